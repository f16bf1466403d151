"""canvas_local.frontdoor without sockets: routing as API Gateway does it, the proxy event, and how a
function's result or failure becomes the HTTP response."""

from __future__ import annotations

import base64
import errno
import json
import socket
import threading
import time
from typing import Any

import pytest

from canvas_local import frontdoor
from canvas_local.frontdoor import FrontDoor, Request
from canvas_local.lambda_runtime import MAX_RESPONSE_BYTES, LocalFunction
from canvas_local.template import ApiRoute

pytestmark = pytest.mark.unit

ROUTES = [
    ApiRoute("GET", "/v1/run/{run_id}", "GetRun"),
    ApiRoute("GET", "/v1/run/latest", "GetLatest"),
    ApiRoute("POST", "/v1/run", "CreateRun"),
    ApiRoute("ANY", "/v1/files/{key+}", "Files"),
    ApiRoute("GET", "/v1/broken", "Broken"),
    ApiRoute("GET", "/v1/malformed", "Malformed"),
]


def echo(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return {"statusCode": 200, "body": json.dumps({"function": context.function_name, "event": event})}


def broken(event: dict[str, Any], context: Any) -> dict[str, Any]:
    raise RuntimeError("boom")


@pytest.fixture
def door() -> FrontDoor:
    functions = {name: LocalFunction.of(name, echo) for name in ("GetRun", "GetLatest", "CreateRun", "Files")}
    functions["Broken"] = LocalFunction.of("Broken", broken)
    functions["Malformed"] = LocalFunction.of("Malformed", lambda event, context: {"body": "no status"})
    return FrontDoor(ROUTES, functions, binary_media_types=["multipart/form-data", "image/*"], stage="api")


def request(method: str, path: str, body: bytes = b"", query: str = "", **headers: str) -> Request:
    pairs = [(name.replace("_", "-"), value) for name, value in headers.items()]
    return Request(method=method, path=path, query=query, headers=pairs, body=body, client_ip="10.0.0.1")


def answer(door: FrontDoor, req: Request) -> tuple[int, dict[str, Any]]:
    response = door.respond(req)
    return response.status, json.loads(response.body)


@pytest.mark.parametrize(
    ("method", "path", "function", "parameters"),
    [
        ("GET", "/v1/run/latest", "GetLatest", None),
        ("GET", "/v1/run/r-1", "GetRun", {"run_id": "r-1"}),
        ("POST", "/v1/run", "CreateRun", None),
        ("DELETE", "/v1/files/a/b.txt", "Files", {"key": "a/b.txt"}),
    ],
)
def test_the_most_specific_route_with_the_method_wins(door, method, path, function, parameters):
    # Given routes where a literal path and a {param} path both match
    # When a request arrives
    status, body = answer(door, request(method, path))

    # Then it reaches the function API Gateway would pick, with its path parameters
    assert status == 200
    assert body["function"] == function
    assert body["event"]["pathParameters"] == parameters


def test_the_event_has_every_field_of_a_rest_proxy_event(door):
    # Given a request with repeated headers and query parameters
    req = request("GET", "/v1/run/r-1", query="a=1&a=2&b=", X_API_KEY="k")
    req.headers.append(("Accept", "text/plain"))
    req.headers.append(("Accept", "application/json"))

    # When it is turned into an event
    _, body = answer(door, req)
    event = body["event"]

    # Then single-valued maps keep the last value, multi-valued maps keep them all
    assert event["headers"] == {"X-API-KEY": "k", "Accept": "application/json"}
    assert event["multiValueHeaders"]["Accept"] == ["text/plain", "application/json"]
    assert event["queryStringParameters"] == {"a": "2", "b": ""}
    assert event["multiValueQueryStringParameters"] == {"a": ["1", "2"], "b": [""]}
    assert event["requestContext"]["path"] == "/api/v1/run/r-1"
    assert event["requestContext"]["identity"]["sourceIp"] == "10.0.0.1"
    assert {"resource", "path", "httpMethod", "body", "isBase64Encoded", "stageVariables"} <= set(event)


@pytest.mark.parametrize(
    ("content_type", "encoded"),
    [
        ("multipart/form-data; boundary=x", True),
        ("image/png", True),
        ("application/json", False),
        ("text/plain; charset=utf-8", False),
    ],
)
def test_binary_media_types_are_base64_encoded(door, content_type, encoded):
    # Given a body of some media type
    payload = b'{"k": "v"}'

    # When it is posted
    _, body = answer(door, request("POST", "/v1/run", body=payload, Content_Type=content_type))

    # Then only the template's binary media types arrive as base64
    event = body["event"]
    assert event["isBase64Encoded"] is encoded
    assert (base64.b64decode(event["body"]) if encoded else event["body"].encode()) == payload


@pytest.mark.parametrize(
    ("method", "path", "status", "error"),
    [
        ("GET", "/v2/run", 404, "Not found: GET /v2/run"),
        ("PUT", "/v1/run", 405, "Method not allowed: PUT /v1/run"),
        ("GET", "/v1/broken", 500, "Internal server error"),
        ("GET", "/v1/malformed", 502, "Internal server error"),
    ],
)
def test_what_no_function_answers_gets_the_error_shape(door, method, path, status, error):
    # Given a request no route matches, or a function that raises or answers without a statusCode
    # When it is handled
    result = answer(door, request(method, path))

    # Then the answer is the service's error body
    assert result == (status, {"success": False, "error": error})


def test_an_event_over_six_megabytes_is_refused(door):
    # Given a multipart body that base64 grows past Lambda's 6 MB payload limit
    body = b"x" * (5 * 1024 * 1024)

    # When it is posted
    status, result = answer(door, request("POST", "/v1/run", body=body, Content_Type="multipart/form-data"))

    # Then the function is never called, and the answer says the size it would have had and the files' own limit,
    # not a limit the 5 MiB sent seems to be under
    assert status == 413
    assert result == {
        "success": False,
        "error": "Request too large: 6.7 MiB once base64-encoded, as the function receives it (at most 6 MiB); "
        "files may be at most 4 MiB in all",
    }


def test_a_response_over_six_megabytes_is_apis_integration_failure():
    # Given a function whose proxy response is larger than Lambda returns
    huge = {"statusCode": 200, "body": "x" * MAX_RESPONSE_BYTES}
    functions = {"Huge": LocalFunction.of("Huge", lambda event, context: huge)}
    door = FrontDoor([ApiRoute("GET", "/v1/huge", "Huge")], functions, binary_media_types=[])

    # When it is called, Then API Gateway's answer to a failed integration comes back
    assert answer(door, request("GET", "/v1/huge")) == (502, {"success": False, "error": "Internal server error"})


def test_a_base64_response_body_is_sent_as_bytes(door):
    # Given a function answering a binary body with a multi-valued header
    png = b"\x89PNG\r\n"
    door.functions["GetLatest"] = LocalFunction.of(
        "GetLatest",
        lambda event, context: {
            "statusCode": 200,
            "headers": {"Content-Type": "image/png", "Set-Cookie": "ignored"},
            "multiValueHeaders": {"Set-Cookie": ["a=1", "b=2"]},
            "body": base64.b64encode(png).decode(),
            "isBase64Encoded": True,
        },
    )

    # When it answers
    response = door.respond(request("GET", "/v1/run/latest"))

    # Then the bytes are decoded, and multiValueHeaders win over headers of the same name
    assert response.body == png
    assert ("Content-Type", "image/png") in response.headers
    assert [value for name, value in response.headers if name == "Set-Cookie"] == ["a=1", "b=2"]


def test_a_request_no_environment_frees_up_for_gets_429_with_retry_after(monkeypatch):
    # Given a function at its concurrency of one, its one environment busy
    monkeypatch.setattr(frontdoor, "THROTTLE_WAIT_SECONDS", 0.1)
    release = threading.Event()

    def slow(event: dict[str, Any], context: Any) -> dict[str, Any]:
        release.wait(10)
        return {"statusCode": 200, "body": "{}"}

    door = FrontDoor(
        ROUTES, {"GetRun": LocalFunction.of("GetRun", slow, concurrency=1)}, binary_media_types=[], stage="api"
    )
    busy = threading.Thread(target=door.respond, args=(request("GET", "/v1/run/r-1"),))
    busy.start()
    try:
        time.sleep(0.1)
        # When another request for it arrives
        response = door.respond(request("GET", "/v1/run/r-2"))
    finally:
        release.set()
        busy.join(10)

    # Then it is answered 429 in the contract's error shape, with when to retry
    assert response.status == 429
    assert json.loads(response.body) == {"success": False, "error": "Too many requests: retry shortly"}
    assert ("Retry-After", str(frontdoor.RETRY_AFTER_SECONDS)) in response.headers


# ---------------------------------------------------------------- over HTTP


@pytest.fixture
def served(door) -> Any:
    door.start()
    try:
        yield door
    finally:
        door.stop()


def address(door: FrontDoor) -> tuple[str, int]:
    host, port = door.url.removeprefix("http://").split(":")
    return host, int(port)


def exchange(door: FrontDoor, raw: bytes, timeout: float = 5) -> tuple[int, dict[str, str], bytes]:
    """Send raw bytes, read until the server closes, and parse the one answer."""
    with socket.create_connection(address(door), timeout=timeout) as connection:
        connection.sendall(raw)
        data = b""
        while chunk := connection.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value for name, _, value in (line.partition(": ") for line in lines)}
    return int(status_line.split()[1]), headers, body


@pytest.mark.parametrize(
    ("framing", "error"),
    [
        (b"Content-Length: -1\r\n\r\n", "Bad request: Content-Length is invalid"),
        (b"Content-Length: abc\r\n\r\n", "Bad request: Content-Length is invalid"),
        (b"Transfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n", "Bad request: Invalid chunk size"),
        # RFC 9112, section 6.3: both lengths at once is how requests are smuggled; either order, any case
        (
            b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
            "Bad request: a request must not carry both Content-Length and Transfer-Encoding",
        ),
        (
            b"transfer-encoding: chunked\r\ncontent-length: 0\r\n\r\n0\r\n\r\n",
            "Bad request: a request must not carry both Content-Length and Transfer-Encoding",
        ),
    ],
)
def test_malformed_framing_is_answered_400_at_once(served, framing, error):
    # Given a request whose body length cannot be read
    raw = b"POST /v1/run HTTP/1.1\r\nHost: x\r\n" + framing

    # When it is sent
    started = time.monotonic()
    status, headers, body = exchange(served, raw)

    # Then it is answered 400 in the contract's error shape, promptly, and the connection closed
    assert time.monotonic() - started < 2
    assert status == 400
    assert headers["content-type"] == "application/json"
    assert json.loads(body) == {"success": False, "error": error}


def test_a_body_declared_over_six_megabytes_is_answered_413_before_it_is_read(served):
    # Given a request declaring a body larger than Lambda takes, none of it sent
    raw = f"POST /v1/run HTTP/1.1\r\nHost: x\r\nContent-Length: {7 * 1024 * 1024}\r\n\r\n".encode()

    # When it is sent, Then it is refused at once, in the contract's error shape
    status, _, body = exchange(served, raw)
    assert status == 413
    assert json.loads(body) == {"success": False, "error": "Request too large: the limit is 6 MB"}


@pytest.mark.parametrize(
    "chunks",
    [
        b"ffffffffffffffffff\r\n",  # a size past any limit, none of its bytes sent
        b"10\r\n0123456789abcdef\r\n600000\r\n",  # a second chunk that takes the body past 6 MB
    ],
)
def test_a_chunk_past_the_limit_is_answered_413_as_soon_as_its_size_is_read(served, chunks):
    # Given a chunked request whose next chunk declares more than the limit, its bytes never sent
    raw = b"POST /v1/run HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks

    # When it is sent, Then it is refused at once, not left waiting for the bytes or the deadline
    started = time.monotonic()
    status, _, body = exchange(served, raw)
    assert time.monotonic() - started < 2
    assert status == 413
    assert json.loads(body) == {"success": False, "error": "Request too large: the limit is 6 MB"}


def test_a_chunked_body_under_the_limit_reaches_the_function_whole(served):
    raw = b"POST /v1/run HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    raw += b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
    status, _, body = exchange(served, raw)
    assert status == 200
    assert json.loads(body)["event"]["body"] == "hello world"


@pytest.mark.parametrize(
    ("method", "target", "allow"),
    [
        ("TRACE", "/v1/run", "POST"),
        ("TRACE", "/v2/nowhere", "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"),
        ("CONNECT", "127.0.0.1:443", "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"),
        ("PROPFIND", "/v1/files/a", "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"),
        ("PUT", "/v1/run", "POST"),
    ],
)
def test_a_method_no_route_answers_gets_405_with_allow(served, method, target, allow):
    # Given a method API Gateway does not route, or one the path's routes do not take (an ANY route included)
    raw = f"{method} {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode()

    # When it is sent
    status, headers, body = exchange(served, raw)

    # Then it is answered 405 in the contract's error shape, naming the methods that are served
    assert status == 405
    assert headers["allow"] == allow
    assert json.loads(body) == {"success": False, "error": f"Method not allowed: {method} {target}"}


def test_a_request_trickled_past_the_deadline_gets_408_and_is_closed(served, monkeypatch):
    # Given a front door that wants a request's head within a second
    monkeypatch.setattr(frontdoor, "HEAD_SECONDS", 1)

    # When a client sends part of a head and no more
    started = time.monotonic()
    status, _, body = exchange(served, b"GET /v1/run/r-1 HTTP/1.1\r\nHost:", timeout=10)

    # Then it is answered 408 and the connection closed, within the deadline and a check
    assert time.monotonic() - started < 1 + frontdoor.CHECK_SECONDS + 1.5
    assert status == 408
    assert json.loads(body)["success"] is False


def test_get_root_leads_to_the_portal(served):
    # Given no route for `/`
    # When a browser opens the root
    status, headers, _ = exchange(served, b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")

    # Then it is sent to the portal
    assert status == 302
    assert headers["location"] == "/portal"


def test_headers_arrive_as_sent_and_head_gets_no_body(served):
    # Given a request with a repeated header and a mixed-case name, and a UTF-8 path
    raw = (
        b"GET /v1/files/a%20b/%C3%A9 HTTP/1.1\r\nHost: x\r\nX-Api-KEY: k\r\nAccept: a\r\nAccept: b\r\n"
        b"Connection: close\r\n\r\n"
    )

    # When it is sent over HTTP
    status, _, body = exchange(served, raw)

    # Then the event keeps each value and the name as sent, the client's address, and the decoded path
    event = json.loads(body)["event"]
    assert status == 200
    assert event["multiValueHeaders"]["Accept"] == ["a", "b"]
    assert event["headers"]["X-Api-KEY"] == "k"
    assert event["requestContext"]["identity"]["sourceIp"] == "127.0.0.1"
    assert event["pathParameters"] == {"key": "a b/\u00e9"}

    # And a HEAD request gets the headers alone
    status, headers, body = exchange(served, raw.replace(b"GET", b"HEAD", 1))
    assert (status, body) == (200, b"")
    assert int(headers["content-length"]) > 0


def test_a_taken_port_is_refused_at_bind_and_start_stop_leaves_no_thread(served):
    # Given a front door serving on a port
    before = threading.active_count()
    other = FrontDoor(ROUTES, {}, binary_media_types=[], port=address(served)[1])

    # When another binds the same port, Then it is refused with EADDRINUSE and leaves no thread behind
    with pytest.raises(OSError) as refused:
        other.bind()
    assert refused.value.errno == errno.EADDRINUSE

    # And starting and stopping a door again and again leaves no thread behind
    for _ in range(3):
        door = FrontDoor(ROUTES, {}, binary_media_types=[])
        door.start()
        door.stop()
    assert threading.active_count() == before
