"""API keys over HTTP on the embedded stack: a key made with POST /v1/api_keys works at once on every route that
takes a key, the first request of each records the key's last use (each API function authenticates the same way,
and records a use at most once a minute), and a revoked key is refused."""

from __future__ import annotations

import httpx
import pytest

pytestmark = pytest.mark.e2e

# A request of each API function that takes a key (ids that match nothing: the key is checked first).
NOWHERE = "00000000-0000-4000-8000-000000000000"
ROUTES = [
    ("GET", f"/v1/run/{NOWHERE}"),
    ("POST", f"/v1/run/{NOWHERE}/approve"),
    ("POST", f"/v1/run/{NOWHERE}/cancel"),
    ("GET", "/v1/runs"),
    ("GET", "/v1/account"),
    ("GET", "/v1/api_keys"),
    ("GET", "/v1/webhook_endpoints"),
    ("GET", f"/v1/canvas/{NOWHERE}/dag"),
    ("GET", f"/v1/canvas/{NOWHERE}/tasks"),
    ("GET", f"/v1/canvas/{NOWHERE}/tasks/{NOWHERE}"),
    ("POST", f"/v1/canvas/{NOWHERE}/blocks/{NOWHERE}/rerun"),
]


@pytest.mark.parametrize(("method", "path"), ROUTES, ids=[f"{m} {p}" for m, p in ROUTES])
def test_a_new_key_works_at_once_its_first_use_is_recorded_and_a_revoked_key_is_refused(http, service, method, path):
    # Given a key made through the API
    created = http.post("/v1/api_keys")
    assert created.status_code == 200, created.text
    key = created.json()["data"]
    assert key["last_used"] is None

    # When its first request is to this route
    with httpx.Client(base_url=service.base_url, headers={"X-API-KEY": key["key"]}, timeout=30) as client:
        answer = client.request(method, path, json={} if method == "POST" else None)
        # Then the key is accepted (the ids match nothing of the account's)
        assert answer.status_code not in (401, 403), answer.text

        # And its use is recorded
        keys = {k["id"]: k for k in http.get("/v1/api_keys").json()["data"]["keys"]}
        assert keys[key["id"]]["last_used"] is not None

        # And once revoked it is refused
        revoked = http.delete(f"/v1/api_keys/{key['id']}")
        assert revoked.status_code == 200, revoked.text
        assert client.request(method, path, json={} if method == "POST" else None).status_code == 401


def test_the_portal_refuses_a_sign_in_with_a_revoked_key(http, service):
    # Given a key made through the API, then revoked
    key = http.post("/v1/api_keys").json()["data"]
    assert http.delete(f"/v1/api_keys/{key['id']}").status_code == 200

    # When it signs in to the portal
    with httpx.Client(base_url=service.base_url, timeout=30) as portal:
        refused = portal.post("/portal/api/session", json={"api_key": key["key"]})

    # Then it is refused (and counted against the client's sign-in attempts), and no session cookie is set
    assert refused.status_code == 401, refused.text
    assert not refused.cookies
