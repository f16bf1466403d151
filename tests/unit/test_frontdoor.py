"""canvas_local.frontdoor without sockets: routing as API Gateway does it, the proxy event, and how a
function's result or failure becomes the HTTP response."""

from __future__ import annotations

import base64
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

    # Then the function is never called
    assert status == 413
    assert result["success"] is False


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


def test_a_connection_past_the_servers_limit_gets_503_not_a_reset(monkeypatch):
    # Given a front door that serves one connection at a time, that one held open by a client
    monkeypatch.setattr(frontdoor, "MAX_CONNECTIONS", 1)
    door = FrontDoor(ROUTES, {"GetRun": LocalFunction.of("GetRun", echo)}, binary_media_types=[], stage="api")
    door.start()
    host, port = door.url.removeprefix("http://").split(":")
    try:
        with socket.create_connection((host, int(port)), timeout=5) as holder:
            holder.sendall(b"GET /v1/run/r-1 HTTP/1.1\r\nHost: x\r\n\r\n")
            assert holder.recv(65536).startswith(b"HTTP/1.1 200")  # kept alive: its thread stays busy

            # When a second client connects and asks
            with socket.create_connection((host, int(port)), timeout=5) as second:
                second.sendall(b"GET /v1/run/r-2 HTTP/1.1\r\nHost: x\r\n\r\n")
                answer_bytes = second.recv(65536)
    finally:
        door.stop()

    # Then it gets an HTTP answer: 503 with Retry-After, in the contract's error shape
    head, _, body = answer_bytes.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 503")
    assert b"Retry-After: 1" in head
    assert json.loads(body) == {"success": False, "error": "Service busy: retry shortly"}
