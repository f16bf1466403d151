"""The portal function in-process: sign-in exchanges a key for a session cookie, sessions end (expiry, sign-out,
revoked key), changes need the session's CSRF token and a same-origin Origin, and nothing of another account is
found: keys, runs, the viewer."""

from __future__ import annotations

import json
import uuid

import pytest

from canvas_core import settings
from canvas_core.adapters.store import Store
from canvas_core.auth import create_account_with_key, hash_api_key
from canvas_core.keys import key_id_of
from canvas_core.models.catalog import NodeStatus
from canvas_core.models.items import CanvasItem, EdgeItem, NodeItem, RunItem
from tests.support import body_of, header, load_event

pytestmark = pytest.mark.component

HOST = "abc123.execute-api.us-east-1.amazonaws.com"


def portal_call(
    function, context, method, path, *, cookie=None, csrf=None, origin=f"https://{HOST}", body=None, raw_body=None
):
    event = load_event("portal_sign_in" if path.startswith("/portal/") else "portal_page")
    resource = "/portal" if path == "/portal" else "/portal/{proxy+}"
    params = {"proxy": path.removeprefix("/portal/")} if resource != "/portal" else None
    if path.startswith("/runs/"):
        resource, params = "/runs/{run_id}", {"run_id": path.removeprefix("/runs/")}
    headers = {"Host": HOST, "Accept": "application/json"}
    if origin:
        headers["Origin"] = origin
    if cookie:
        headers["Cookie"] = f"canvas_session={cookie}"
    if csrf:
        headers["X-CSRF-Token"] = csrf
    if body is not None or raw_body is not None:
        headers["Content-Type"] = "application/json"
    event.update(
        resource=resource,
        path=path,
        httpMethod=method,
        pathParameters=params,
        headers=headers,
        multiValueHeaders={k: [v] for k, v in headers.items()},
        body=json.dumps(body) if body is not None else raw_body,
    )
    return function("portal")(event, context)


def session_cookie(response) -> str:
    [cookie] = response["multiValueHeaders"]["Set-Cookie"]
    return cookie.split(";", 1)[0].split("=", 1)[1]


def sign_in(function, context, api_key):
    response = portal_call(function, context, "POST", "/portal/api/session", body={"api_key": api_key})
    assert response["statusCode"] == 200, response
    return session_cookie(response), body_of(response)["data"]["csrf_token"]


def test_sign_in_sets_a_strict_http_only_secure_cookie_and_never_echoes_the_key(aws, account, function, context):
    # When the holder signs in
    response = portal_call(function, context, "POST", "/portal/api/session", body={"api_key": account.api_key})

    # Then the answer sets the session cookie with every protection, and says whose session it is
    assert response["statusCode"] == 200
    [cookie] = response["multiValueHeaders"]["Set-Cookie"]
    attributes = {part.strip().split("=")[0] for part in cookie.split(";")[1:]}
    assert {"Path", "Max-Age", "HttpOnly", "Secure", "SameSite"} <= attributes
    assert "SameSite=Strict" in cookie and "Path=/" in cookie
    data = body_of(response)["data"]
    assert data["account_id"] == account.account_id and data["csrf_token"]
    assert account.api_key not in json.dumps(response)
    assert header(response, "Cache-Control") == "no-store"


def test_a_bad_key_opens_no_session(aws, function, context):
    response = portal_call(function, context, "POST", "/portal/api/session", body={"api_key": "sk_canvas_nope"})
    assert response["statusCode"] == 401 and "Set-Cookie" not in response["multiValueHeaders"]
    assert body_of(response) == {"success": False, "error": "Invalid or revoked API key"}


def test_the_session_reads_the_account(aws, account, function, context):
    cookie, _ = sign_in(function, context, account.api_key)
    response = portal_call(function, context, "GET", "/portal/api/account", cookie=cookie)
    assert response["statusCode"] == 200
    assert body_of(response)["data"]["credits_balance"] == 5000


def test_calls_without_a_session_are_401(aws, function, context):
    for path in ("/portal/api/account", "/portal/api/keys", "/portal/api/runs", "/portal/api/session"):
        response = portal_call(function, context, "GET", path)
        assert response["statusCode"] == 401, path
        assert body_of(response)["success"] is False
    assert portal_call(function, context, "GET", "/portal/api/keys", cookie="forged")["statusCode"] == 401


def test_changes_without_the_csrf_token_are_refused(aws, account, function, context):
    # Given a session
    cookie, csrf = sign_in(function, context, account.api_key)

    # When a key is created without the token, or with another one
    missing = portal_call(function, context, "POST", "/portal/api/keys", cookie=cookie)
    wrong = portal_call(function, context, "POST", "/portal/api/keys", cookie=cookie, csrf=csrf + "x")

    # Then both are refused, and no key was made
    for response in (missing, wrong):
        assert response["statusCode"] == 403
        assert body_of(response) == {"success": False, "error": "Refused: the request lacks the session's CSRF token"}
    keys = body_of(portal_call(function, context, "GET", "/portal/api/keys", cookie=cookie))["data"]["keys"]
    assert len(keys) == 1

    # And with the token it is made
    made = portal_call(function, context, "POST", "/portal/api/keys", cookie=cookie, csrf=csrf)
    assert made["statusCode"] == 200 and body_of(made)["data"]["key"].startswith("sk_canvas_")


def test_changes_from_another_origin_are_refused(aws, account, function, context):
    cookie, csrf = sign_in(function, context, account.api_key)
    for origin in ("https://evil.example", "null"):
        response = portal_call(function, context, "POST", "/portal/api/keys", cookie=cookie, csrf=csrf, origin=origin)
        assert response["statusCode"] == 403
        assert body_of(response)["error"] == "Refused: the request comes from another origin"
    signed = portal_call(
        function, context, "POST", "/portal/api/session", body={"api_key": account.api_key}, origin="https://evil.ex"
    )
    assert signed["statusCode"] == 403


def test_an_expired_session_is_401(aws, account, function, context, monkeypatch):
    # Given a session, and a clock past its end
    cookie, _ = sign_in(function, context, account.api_key)
    later = 1000 * (13 * 3600)
    import canvas_core.portal.sessions as sessions

    real_now = sessions.now_ms
    monkeypatch.setattr(sessions, "now_ms", lambda: real_now() + later)

    # Then it is refused
    assert portal_call(function, context, "GET", "/portal/api/account", cookie=cookie)["statusCode"] == 401


def test_revoking_the_key_ends_its_sessions(aws, account, function, context):
    # Given a second key and a session opened with it
    first_cookie, first_csrf = sign_in(function, context, account.api_key)
    made = portal_call(function, context, "POST", "/portal/api/keys", cookie=first_cookie, csrf=first_csrf)
    second = body_of(made)["data"]
    second_cookie, _ = sign_in(function, context, second["key"])

    # When the first session revokes the second key
    revoked = portal_call(
        function, context, "DELETE", f"/portal/api/keys/{second['id']}", cookie=first_cookie, csrf=first_csrf
    )
    assert revoked["statusCode"] == 200

    # Then the second key's session is over, the first goes on
    assert portal_call(function, context, "GET", "/portal/api/keys", cookie=second_cookie)["statusCode"] == 401
    assert portal_call(function, context, "GET", "/portal/api/keys", cookie=first_cookie)["statusCode"] == 200


def test_sign_out_ends_the_session_and_clears_the_cookie(aws, account, function, context):
    cookie, csrf = sign_in(function, context, account.api_key)
    assert portal_call(function, context, "DELETE", "/portal/api/session", cookie=cookie)["statusCode"] == 403
    out = portal_call(function, context, "DELETE", "/portal/api/session", cookie=cookie, csrf=csrf)
    assert out["statusCode"] == 200
    assert "Max-Age=0" in out["multiValueHeaders"]["Set-Cookie"][0]
    assert portal_call(function, context, "GET", "/portal/api/account", cookie=cookie)["statusCode"] == 401


def test_another_accounts_key_is_404_through_the_portal(aws, account, function, context):
    _, other_key = create_account_with_key()
    other_id = key_id_of(hash_api_key(other_key))
    cookie, csrf = sign_in(function, context, account.api_key)
    response = portal_call(function, context, "DELETE", f"/portal/api/keys/{other_id}", cookie=cookie, csrf=csrf)
    assert response["statusCode"] == 404


def store_run(account_id: str) -> RunItem:
    run = RunItem(
        run_id=str(uuid.uuid4()),
        account_id=account_id,
        canvas_id=str(uuid.uuid4()),
        prompt="Tide pools of the Atlantic",
        template="report",
        created_at_ms=1_763_700_000_000,
        estimated_duration_ms=60_000,
    )
    store = Store()
    store.put_run(run)
    canvas = CanvasItem(canvas_id=run.canvas_id, account_id=account_id, run_id=run.run_id, canvas_name=run.prompt)
    store.put_canvas(canvas)
    nodes = [
        NodeItem(canvas_id=run.canvas_id, block_id=f"b{i}", name=f"Block {i}", type="text", position=i)
        for i in range(3)
    ]
    edges = [EdgeItem(source_id="b0", target_id="b2"), EdgeItem(source_id="b1", target_id="b2")]
    store.put_graph(nodes, edges, run.canvas_id)
    return run


def test_the_viewer_shows_the_accounts_run_and_not_another_accounts(aws, account, function, context):
    # Given a run of the caller with a three-block canvas, and a run of another account
    mine = store_run(account.account_id)
    other_account, _ = create_account_with_key()
    theirs = store_run(other_account)
    cookie, _ = sign_in(function, context, account.api_key)

    # When the caller opens both in the viewer
    page = portal_call(function, context, "GET", f"/runs/{mine.run_id}", cookie=cookie)
    data = portal_call(function, context, "GET", f"/portal/api/runs/{mine.run_id}/canvas", cookie=cookie)
    other_page = portal_call(function, context, "GET", f"/runs/{theirs.run_id}", cookie=cookie)
    other_data = portal_call(function, context, "GET", f"/portal/api/runs/{theirs.run_id}/canvas", cookie=cookie)

    # Then their own is drawn: two blocks in the first column, the one reading both in the second
    assert page["statusCode"] == 200 and header(page, "Content-Type").startswith("text/html")
    view = body_of(data)["data"]
    position = {n["id"]: (n["x"], n["y"]) for n in view["nodes"]}
    assert position["b0"][0] == position["b1"][0] < position["b2"][0]
    assert len(view["edges"]) == 2 and all(e["path"].startswith("M ") for e in view["edges"])
    assert view["run"]["run_id"] == mine.run_id
    # And the other account's run is not found, as a missing one
    assert other_page["statusCode"] == 404 and other_data["statusCode"] == 404
    assert body_of(other_data) == {"success": False, "error": f"Run not found: {theirs.run_id}"}


def test_the_viewer_without_a_session_sends_to_the_portal_which_returns_there(aws, function, context):
    # Given a run's viewer page opened without a session
    run_id = str(uuid.uuid4())

    # When it is requested
    response = portal_call(function, context, "GET", f"/runs/{run_id}")

    # Then the browser goes to the portal's sign-in, told to come back to this page (relative to the portal)
    assert response["statusCode"] == 303 and header(response, "Location") == f"../portal?next=runs%2F{run_id}"


def test_pages_and_files_carry_the_security_headers(aws, function, context):
    page = function("portal")(load_event("portal_page"), context)
    assert page["statusCode"] == 200 and "<title>" in page["body"]
    for name, expected in {
        "Content-Type": "text/html; charset=utf-8",
        "X-Frame-Options": "DENY",
        "Cache-Control": "no-store",
        "X-Content-Type-Options": "nosniff",
    }.items():
        assert header(page, name) == expected
    csp = header(page, "Content-Security-Policy")
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp
    script = portal_call(function, context, "GET", "/portal/assets/portal.js")
    assert script["statusCode"] == 200 and header(script, "Content-Type").startswith("text/javascript")
    slash = portal_call(function, context, "GET", "/portal/")
    assert slash["statusCode"] == 308 and header(slash, "Location") == "../portal"
    for name in ("..%2Fsessions.py", "sessions.py", ".hidden.js", "missing.css"):
        assert portal_call(function, context, "GET", f"/portal/assets/{name}")["statusCode"] == 404, name


def test_another_accounts_webhook_endpoint_is_404_through_the_portal(aws, account, function, context):
    from canvas_core.webhooks import endpoints

    # Given an endpoint of another account, and the caller's session
    other_account, _ = create_account_with_key()
    theirs = endpoints.create_endpoint(other_account, "https://93.184.215.14/canvas")
    cookie, csrf = sign_in(function, context, account.api_key)

    # Then no portal route finds it, and the caller's list is empty
    base = f"/portal/api/webhook_endpoints/{theirs.id}"
    for method, path in (
        ("DELETE", base),
        ("POST", f"{base}/rotate_secret"),
        ("POST", f"{base}/ping"),
        ("GET", f"{base}/deliveries"),
    ):
        response = portal_call(function, context, method, path, cookie=cookie, csrf=csrf)
        assert response["statusCode"] == 404, (method, path)
        assert body_of(response) == {"success": False, "error": f"Webhook endpoint not found: {theirs.id}"}
    listed = portal_call(function, context, "GET", "/portal/api/webhook_endpoints", cookie=cookie)
    assert body_of(listed)["data"] == {"endpoints": []}
    assert [e.id for e in endpoints.list_endpoints(other_account)] == [theirs.id]


def test_an_attempt_that_got_no_answer_is_listed_through_the_portal(aws, account, function, context):
    from canvas_core.models.webhooks import DeliveryMessage, WebhookEventType
    from canvas_core.webhooks import endpoints
    from canvas_core.webhooks.delivery import Deliveries, Outcome
    from canvas_core.webhooks.endpoints import delivery_fetcher

    # Given an endpoint whose first attempt timed out
    mine = endpoints.create_endpoint(account.account_id, "https://93.184.215.14/canvas")

    def time_out(address: str, port: int, timeout: float):
        raise TimeoutError("timed out")

    message = DeliveryMessage(endpoint_id=mine.id, event_id="evt_1", type=WebhookEventType.WEBHOOK_PING, body="{}")
    deliveries = Deliveries(fetcher=delivery_fetcher(connector=time_out), queue=DiscardingQueue())
    assert deliveries.deliver(message) == Outcome.RETRYING

    # When the portal lists its deliveries
    cookie, _ = sign_in(function, context, account.api_key)
    path = f"/portal/api/webhook_endpoints/{mine.id}/deliveries"
    response = portal_call(function, context, "GET", path, cookie=cookie)

    # Then the attempt shows no status code, and why no answer came
    assert response["statusCode"] == 200, response
    (attempt,) = body_of(response)["data"]["deliveries"]
    assert attempt["status_code"] is None and attempt["error"]


class DiscardingQueue:
    def send(self, message, delay_seconds: float = 0) -> None:
        pass


def sign_in_from(function, context, address: str, api_key: str):
    event = load_event("portal_sign_in")
    event["requestContext"]["identity"]["sourceIp"] = address
    headers = {"Host": HOST, "Origin": f"https://{HOST}", "Content-Type": "application/json"}
    event.update(headers=headers, multiValueHeaders={k: [v] for k, v in headers.items()})
    event["body"] = json.dumps({"api_key": api_key})
    return function("portal")(event, context)


def test_sign_in_is_refused_for_a_minute_after_ten_wrong_keys_from_one_address(
    aws, account, function, context, monkeypatch
):
    # Given a clock 15 s into a minute, and ten wrong keys from one address, each a 401
    monkeypatch.setattr("canvas_core.portal.sessions.now_ms", lambda: 1_794_999_975_000)
    for attempt in range(10):
        assert sign_in_from(function, context, "198.51.100.7", f"sk_canvas_wrong_{attempt}")["statusCode"] == 401

    # When that address tries again, with a wrong key or the right one
    wrong = sign_in_from(function, context, "198.51.100.7", "sk_canvas_wrong_again")
    right = sign_in_from(function, context, "198.51.100.7", account.api_key)

    # Then both are 429 in the error shape, saying when to try again, and no session is opened
    for response in (wrong, right):
        assert response["statusCode"] == 429
        assert header(response, "Retry-After") == "45"
        body = body_of(response)
        assert body["success"] is False and "Too many failed sign-ins" in body["error"]
        assert "Set-Cookie" not in response["multiValueHeaders"]

    # And another address still signs in
    assert sign_in_from(function, context, "198.51.100.8", account.api_key)["statusCode"] == 200


def test_successful_sign_ins_are_not_limited(aws, account, function, context):
    for _ in range(15):
        assert sign_in_from(function, context, "198.51.100.9", account.api_key)["statusCode"] == 200
    assert sign_in_from(function, context, "198.51.100.9", "sk_canvas_wrong")["statusCode"] == 401


def test_a_private_webhook_url_is_refused_naming_the_switch_that_allows_it(
    aws, account, function, context, monkeypatch
):
    # Given a deployment that keeps webhook endpoints off private addresses (the default)
    monkeypatch.delenv("WEBHOOK_ALLOW_PRIVATE_ADDRESSES", raising=False)
    settings.reset()
    cookie, csrf = sign_in(function, context, account.api_key)

    # When an endpoint on loopback is added from the portal
    body = {"url": "http://127.0.0.1:9000/hooks"}
    response = portal_call(
        function, context, "POST", "/portal/api/webhook_endpoints", cookie=cookie, csrf=csrf, body=body
    )

    # Then it is refused, and the answer names the embedded stack's flag and the AWS template parameter
    assert response["statusCode"] == 400
    assert body_of(response) == {
        "success": False,
        "error": "Invalid url: Refused to fetch 127.0.0.1: a loopback address; private addresses are refused unless "
        "the operator allows them (canvas serve --webhook-allow-private-addresses on the embedded stack, "
        "the WebhookAllowPrivateAddresses template parameter on AWS)",
    }


def test_unknown_pages_are_html_404_pages_and_unknown_json_calls_keep_the_error_body(aws, account, function, context):
    # Given a session
    cookie, _ = sign_in(function, context, account.api_key)

    # When pages that do not exist are opened, and a JSON call that does not exist is made
    page = portal_call(function, context, "GET", "/portal/nothing/here", cookie=cookie)
    anonymous = portal_call(function, context, "GET", "/portal/nothing")
    call = portal_call(function, context, "GET", "/portal/api/nothing", cookie=cookie)

    # Then the pages are 404 pages in the portal's style, linking back to the portal relative to where they are
    for response, base in ((page, "../../"), (anonymous, "../")):
        assert response["statusCode"] == 404
        assert header(response, "Content-Type") == "text/html; charset=utf-8"
        assert header(response, "Content-Security-Policy").startswith("default-src 'none'")
        assert "<h2>Page not found</h2>" in response["body"]
        assert f'href="{base}portal"' in response["body"]
        assert f'href="{base}portal/assets/portal.css"' in response["body"]
    assert "There is no page at /portal/nothing/here." in page["body"]
    # And the JSON call answers the service's error body
    assert call["statusCode"] == 404 and header(call, "Content-Type") == "application/json"
    assert body_of(call) == {"success": False, "error": "Not found: GET /portal/api/nothing"}


def test_the_viewer_of_a_missing_or_another_accounts_run_is_an_html_page(aws, account, function, context):
    # Given a run of another account, and the caller's session
    other_account, _ = create_account_with_key()
    theirs = store_run(other_account)
    missing = str(uuid.uuid4())
    cookie, _ = sign_in(function, context, account.api_key)

    # When the caller opens it, a run that does not exist, and an id that is no run id
    for run_id, status, message in (
        (theirs.run_id, 404, f"Run not found: {theirs.run_id}"),
        (missing, 404, f"Run not found: {missing}"),
        ("<b>x", 400, "Invalid run_id: &#x27;&lt;b&gt;x&#x27; is not a UUID"),
    ):
        response = portal_call(function, context, "GET", f"/runs/{run_id}", cookie=cookie)

        # Then each is a page saying so, with the way back to the portal, the id shown as text
        assert response["statusCode"] == status, run_id
        assert header(response, "Content-Type") == "text/html; charset=utf-8"
        assert f'<p id="error-message">{message}</p>' in response["body"]
        assert 'href="../portal"' in response["body"]
    assert "<b>x" not in response["body"]


def ended_run_with_a_chain(account_id: str) -> tuple[RunItem, list[str]]:
    """A completed run of the account whose canvas is a -> b, and its block ids."""
    run = store_run(account_id)
    store = Store()
    ids = [str(uuid.uuid4()), str(uuid.uuid4())]
    nodes = [
        NodeItem(canvas_id=run.canvas_id, block_id=block_id, name=f"Step {i}", type="text-block", position=10 + i)
        for i, block_id in enumerate(ids)
    ]
    for n in nodes:
        n.status, n.content = NodeStatus.COMPLETED, f"{n.name} done"
    store.put_graph(nodes, [EdgeItem(source_id=ids[0], target_id=ids[1])], run.canvas_id)
    store.finish_run(run.run_id, status="completed", finished_at_ms=run.created_at_ms + 1)
    return run, ids


def test_the_viewers_rerun_needs_the_csrf_token_and_finds_only_the_accounts_canvases(aws, account, function, context):
    # Given an ended run of the caller, and one of another account
    mine, (_, second) = ended_run_with_a_chain(account.account_id)
    other_account, _ = create_account_with_key()
    theirs, (_, their_second) = ended_run_with_a_chain(other_account)
    cookie, csrf = sign_in(function, context, account.api_key)
    path = f"/portal/api/canvas/{mine.canvas_id}/blocks/{second}/rerun"
    body = {"instructions": "Shorter, please"}

    # When the re-run is posted without the session's CSRF token, then with it, and for the other account's canvas
    refused = portal_call(function, context, "POST", path, cookie=cookie, body=body)
    started = portal_call(function, context, "POST", path, cookie=cookie, csrf=csrf, body=body)
    other_path = f"/portal/api/canvas/{theirs.canvas_id}/blocks/{their_second}/rerun"
    other = portal_call(function, context, "POST", other_path, cookie=cookie, csrf=csrf, body=body)

    # Then the first is refused, the second starts a re-run of the block, the third is not found
    assert refused["statusCode"] == 403
    assert body_of(refused)["error"] == "Refused: the request lacks the session's CSRF token"
    assert started["statusCode"] == 200, started["body"]
    run = Store().get_run(body_of(started)["data"]["run_id"])
    assert run.account_id == account.account_id
    assert run.rerun_of.model_dump() == {"run_id": mine.run_id, "canvas_id": mine.canvas_id, "block_id": second}
    _, nodes, _ = Store().get_canvas(run.canvas_id)
    copied = {n.block_id: n for n in nodes}
    assert (copied[second].reused, copied[second].instructions) == (False, "Shorter, please")
    assert other["statusCode"] == 404
    assert body_of(other) == {"success": False, "error": f"Run not found: {theirs.canvas_id}"}


def test_the_viewers_rerun_with_a_body_nested_too_deeply_is_a_400_not_a_crash(aws, account, function, context):
    # Given an ended run of the caller, and a session
    mine, (_, second) = ended_run_with_a_chain(account.account_id)
    cookie, csrf = sign_in(function, context, account.api_key)
    path = f"/portal/api/canvas/{mine.canvas_id}/blocks/{second}/rerun"

    # When the re-run's body nests deeper than anyone writes by hand
    response = portal_call(function, context, "POST", path, cookie=cookie, csrf=csrf, raw_body="[" * 100_000)

    # Then it is refused as a bad request, and nothing starts
    assert response["statusCode"] == 400, response["body"]
    assert "Request body is nested too deeply: more than 200 levels" in body_of(response)["error"]
    assert [r.run_id for r in Store().list_runs(account.account_id, 10, None)[0]] == [mine.run_id]


def test_the_viewers_rerun_refused_by_its_rules_answers_their_text(aws, account, function, context):
    # Given an ended run of the caller, and a session
    mine, (_, second) = ended_run_with_a_chain(account.account_id)
    cookie, csrf = sign_in(function, context, account.api_key)
    path = f"/portal/api/canvas/{mine.canvas_id}/blocks/{second}/rerun"

    # When the re-run's body breaks a rule of the re-run (a misspelt field, instructions too long)
    misspelt = portal_call(function, context, "POST", path, cookie=cookie, csrf=csrf, body={"instruction": "x"})
    too_long = portal_call(
        function, context, "POST", path, cookie=cookie, csrf=csrf, body={"instructions": "x" * 10_001}
    )

    # Then each is answered with the rule's own text, as POST /v1/.../rerun answers it
    assert (misspelt["statusCode"], body_of(misspelt)["error"]) == (
        400,
        "Unknown field 'instruction': the body takes only instructions",
    )
    assert (too_long["statusCode"], body_of(too_long)["error"]) == (
        400,
        "instructions is too long: 10001 characters (maximum 10000)",
    )
