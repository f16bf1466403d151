"""The operator commands against a running `canvas serve`, as an operator uses them: `--endpoint-url` with the AWS
endpoint the server prints, from another process."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import httpx
import pytest

from tests.e2e.conftest import CANVAS, canvas_serve

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, str]]:
    """(base URL, AWS endpoint URL) of a `canvas serve` in its own process."""
    with canvas_serve() as server:
        yield server.base_url, server.endpoint_url


def canvas(*args: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    return subprocess.run([str(CANVAS), *args], capture_output=True, text=True, env=environment, timeout=60)


def value(out: str, name: str) -> str:
    return next(line.split(": ", 1)[1].split()[0] for line in out.splitlines() if line.startswith(f"{name}: "))


def test_an_operator_creates_an_account_grants_credits_and_manages_keys(served):
    base_url, endpoint = served
    # When an operator creates an account with 200 credits and grants it 300 more
    created = canvas("create-account", "--credits", "200", "--endpoint-url", endpoint)
    assert created.returncode == 0, created.stderr
    account_id, api_key = value(created.stdout, "account_id"), value(created.stdout, "api_key")
    granted = canvas("grant-credits", account_id, "300", "--endpoint-url", endpoint)
    assert granted.returncode == 0 and value(granted.stdout, "credits_balance") == "500"

    # Then the key opens the account on the API, with the balance
    with httpx.Client(base_url=base_url, timeout=30) as client:
        account = client.get("/v1/account", headers={"X-API-KEY": api_key})
        assert account.status_code == 200 and account.json()["data"]["credits_balance"] == 500

        # When a second key is made for it and then revoked by id
        second = canvas("create-key", "--account", account_id, "--endpoint-url", endpoint)
        assert second.returncode == 0, second.stderr
        second_key = value(second.stdout, "api_key")
        assert client.get("/v1/account", headers={"X-API-KEY": second_key}).status_code == 200
        key_id = value(second.stdout, "key_id")
        revoked = canvas("revoke-key", "--account", account_id, "--key-id", key_id, "--endpoint-url", endpoint)
        assert revoked.returncode == 0, revoked.stderr

        # Then that key is refused, the first still works
        assert client.get("/v1/account", headers={"X-API-KEY": second_key}).status_code == 401
        assert client.get("/v1/account", headers={"X-API-KEY": api_key}).status_code == 200
