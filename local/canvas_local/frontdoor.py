"""The embedded stack's API Gateway: an HTTP server that turns each request into a REST (v1) proxy event,
calls the function whose `Api` event matches the method and path, and answers with what it returns."""

from __future__ import annotations

import base64
import json
import logging
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from canvas_local import priority
from canvas_local.lambda_runtime import ACCOUNT_ID, FunctionError, LocalFunction, Throttled
from canvas_local.template import ApiRoute

LOG = logging.getLogger(__name__)

# Lambda's limit on a synchronous invocation's payload; API Gateway's own (10 MB) is never reached first.
MAX_EVENT_BYTES = 6 * 1024 * 1024
# Connections the kernel queues before the server accepts them: a burst waits instead of being reset.
LISTEN_BACKLOG = 1024
# Connections served at once (a thread each); past this a new one gets 503 at once rather than a thread.
MAX_CONNECTIONS = 256
# How long a request waits for a free execution environment before it is answered 429, as API Gateway
# answers when Lambda throttles.
THROTTLE_WAIT_SECONDS = 10
RETRY_AFTER_SECONDS = 1
# An idle keep-alive connection is closed after this, so abandoned clients do not hold threads.
IDLE_CONNECTION_SECONDS = 30


class HttpError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


# ---------------------------------------------------------------- routing


@dataclass(frozen=True)
class Match:
    route: ApiRoute
    path_parameters: dict[str, str]


class Router:
    """Picks a route as API Gateway does: the most specific resource path first (literal segments beat
    `{param}`, which beats `{proxy+}`), then the method (`ANY` matches every method)."""

    def __init__(self, routes: list[ApiRoute]):
        self.routes = routes

    def match(self, method: str, path: str) -> Match:
        segments = _segments(path)
        candidates = []
        for route in self.routes:
            params = _match_segments(_segments(route.path), segments)
            if params is not None:
                candidates.append((_specificity(route.path), route, params))
        if not candidates:
            raise HttpError(404, f"Not found: {method} {path}")
        candidates.sort(key=lambda candidate: candidate[0])
        for _, route, params in candidates:
            if route.method in (method, "ANY"):
                return Match(route, params)
        raise HttpError(405, f"Method not allowed: {method} {path}")


def _segments(path: str) -> list[str]:
    return [segment for segment in path.split("/") if segment]


def _specificity(template: str) -> list[int]:
    return [2 if s.endswith("+}") else 1 if s.startswith("{") else 0 for s in _segments(template)]


def _match_segments(template: list[str], segments: list[str]) -> dict[str, str] | None:
    params: dict[str, str] = {}
    for index, part in enumerate(template):
        if part.startswith("{") and part.endswith("+}"):
            rest = segments[index:]
            if not rest:
                return None
            params[part[1:-2]] = "/".join(rest)
            return params
        if index >= len(segments):
            return None
        if part.startswith("{") and part.endswith("}"):
            params[part[1:-1]] = segments[index]
        elif part != segments[index]:
            return None
    return params if len(template) == len(segments) else None


# ---------------------------------------------------------------- the server


class FrontDoor:
    def __init__(
        self,
        routes: list[ApiRoute],
        functions: Mapping[str, LocalFunction],
        binary_media_types: list[str],
        stage: str = "Prod",
        host: str = "127.0.0.1",
        port: int = 0,
        on_change: Callable[[], None] | None = None,
    ):
        self.router = Router(routes)
        self.on_change = on_change  # told of every request that may change state (not GET or HEAD)
        self.functions = functions
        self.binary_media_types = binary_media_types
        self.stage = stage
        self.address = (host, port)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("the front door is not started")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def bind(self) -> None:
        """Take the port (OSError if it is in use); requests queue from here until `start` serves them."""
        if self._server is None:
            self._server = _Server(self.address, _make_handler(self))

    def start(self) -> None:
        self.bind()
        assert self._server is not None
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.1}, name="canvas-frontdoor", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        if self._server is None:
            return
        if self._thread is not None:  # shutdown() waits for serve_forever, which a bound-only door never ran
            self._server.shutdown()
            self._thread.join(timeout=10)
        self._server.server_close()
        self._server = self._thread = None

    # -------------------------------------------------- one request

    def respond(self, request: Request) -> Response:
        if self.on_change is not None and request.method not in ("GET", "HEAD", "OPTIONS"):
            self.on_change()
        try:
            match = self.router.match(request.method, request.path)
            event = self.event(request, match)
            if len(json.dumps(event)) > MAX_EVENT_BYTES:
                raise HttpError(413, "Request too large: the limit is 6 MB")
            return self.call(match.route.function, event)
        except HttpError as exc:
            return error_response(exc.status, exc.message)

    def call(self, function_name: str, event: dict[str, Any]) -> Response:
        try:
            with priority.api_request():
                result = self.functions[function_name].call(event, wait=THROTTLE_WAIT_SECONDS)
        except Throttled:
            response = error_response(429, "Too many requests: retry shortly")
            response.headers.append(("Retry-After", str(RETRY_AFTER_SECONDS)))
            return response
        except FunctionError as exc:
            # Lambda failed the invocation (a timeout, a response over 6 MB): API Gateway's integration failure.
            LOG.error("%s: %s", function_name, exc)
            return error_response(502, "Internal server error")
        except Exception:
            LOG.exception("%s raised", function_name)
            return error_response(500, "Internal server error")
        try:
            return Response.from_proxy_result(result)
        except (TypeError, ValueError, KeyError):
            # API Gateway answers 502 to a malformed proxy response.
            LOG.error("%s returned a malformed proxy response: %r", function_name, result)
            return error_response(502, "Internal server error")

    def event(self, request: Request, match: Match) -> dict[str, Any]:
        """The REST API (v1) Lambda proxy event, field for field."""
        binary = self.is_binary(request.header("content-type"))
        body: str | None = None
        if request.body:
            body = base64.b64encode(request.body).decode() if binary else request.body.decode("utf-8", "replace")
        query = parse_qsl(request.query, keep_blank_values=True)
        now = time.time()
        return {
            "resource": match.route.path,
            "path": request.path,
            "httpMethod": request.method,
            "headers": {name: value for name, value in request.headers} or None,
            "multiValueHeaders": _multi(request.headers) or None,
            "queryStringParameters": dict(query) or None,
            "multiValueQueryStringParameters": _multi(query) or None,
            "pathParameters": match.path_parameters or None,
            "stageVariables": None,
            "requestContext": {
                "accountId": ACCOUNT_ID,
                "apiId": "local",
                "resourceId": "local",
                "resourcePath": match.route.path,
                "httpMethod": request.method,
                "path": f"/{self.stage}{request.path}",
                "stage": self.stage,
                "protocol": "HTTP/1.1",
                "requestId": str(uuid.uuid4()),
                "extendedRequestId": str(uuid.uuid4()),
                "requestTime": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
                "requestTimeEpoch": int(now * 1000),
                "domainName": request.header("host") or "localhost",
                "identity": {"sourceIp": request.client_ip, "userAgent": request.header("user-agent")},
            },
            "body": body,
            "isBase64Encoded": binary and body is not None,
        }

    def is_binary(self, content_type: str | None) -> bool:
        if not content_type:
            return False
        media_type = content_type.split(";", 1)[0].strip().lower()
        kind = media_type.split("/", 1)[0]
        return any(t in (media_type, f"{kind}/*", "*/*") for t in self.binary_media_types)


def _multi(pairs: list[tuple[str, str]]) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    for name, value in pairs:
        grouped.setdefault(name, []).append(value)
    return grouped


@dataclass
class Request:
    method: str
    path: str
    query: str
    headers: list[tuple[str, str]]
    body: bytes
    client_ip: str

    def header(self, name: str) -> str | None:
        values = [value for key, value in self.headers if key.lower() == name]
        return values[-1] if values else None


@dataclass
class Response:
    status: int
    headers: list[tuple[str, str]]
    body: bytes

    @classmethod
    def from_proxy_result(cls, result: Any) -> Response:
        if not isinstance(result, dict) or not isinstance(result.get("statusCode"), int):
            raise ValueError("statusCode missing")
        multi = {name: [str(v) for v in values] for name, values in (result.get("multiValueHeaders") or {}).items()}
        # API Gateway: a header in multiValueHeaders wins over the same header in headers.
        taken = {name.lower() for name in multi}
        headers = [(name, value) for name, values in multi.items() for value in values]
        headers += [(n, str(v)) for n, v in (result.get("headers") or {}).items() if n.lower() not in taken]
        if not any(name.lower() == "content-type" for name, _ in headers):
            headers.append(("Content-Type", "application/json"))
        body = result.get("body") or ""
        data = base64.b64decode(body) if result.get("isBase64Encoded") else str(body).encode("utf-8")
        return cls(result["statusCode"], headers, data)


def error_response(status: int, message: str) -> Response:
    body = json.dumps({"success": False, "error": message}).encode("utf-8")
    return Response(status, [("Content-Type", "application/json")], body)


class _Server(ThreadingHTTPServer):
    """A thread per connection up to MAX_CONNECTIONS; past that, 503 and close, never a reset."""

    daemon_threads = True
    request_queue_size = LISTEN_BACKLOG

    def __init__(self, *args: Any, **kwargs: Any):
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        super().__init__(*args, **kwargs)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            _answer_busy(request)
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that goes away mid-answer is routine under load, not a traceback.
        LOG.debug("Connection from %s ended with an error", client_address, exc_info=True)


def _answer_busy(connection: Any) -> None:
    body = json.dumps({"success": False, "error": "Service busy: retry shortly"}).encode("utf-8")
    head = (
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
        f"Retry-After: {RETRY_AFTER_SECONDS}\r\nConnection: close\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    try:
        connection.sendall(head.encode("ascii") + body)
        # Read what the client already sent: closing over unread data would reset the connection and could
        # destroy the answer before the client reads it.
        connection.shutdown(socket.SHUT_WR)
        connection.settimeout(0.05)
        while connection.recv(65536):
            pass
    except OSError:
        pass


def _make_handler(front_door: FrontDoor) -> type[BaseHTTPRequestHandler]:
    class Handler(_RequestHandler):
        door = front_door

    return Handler


class _RequestHandler(BaseHTTPRequestHandler):
    door: FrontDoor
    protocol_version = "HTTP/1.1"  # keep-alive, as clients expect of API Gateway
    timeout = IDLE_CONNECTION_SECONDS

    def _handle(self) -> None:
        url = urlsplit(self.path)
        try:
            body = self._read_body()
        except HttpError as exc:
            # The unread body would be parsed as the next request.
            self.close_connection = True
            self._send(error_response(exc.status, exc.message))
            return
        request = Request(
            method=self.command,
            path=unquote(url.path) or "/",
            query=url.query,
            headers=list(self.headers.items()),
            body=body,
            client_ip=self.client_address[0],
        )
        self._send(self.door.respond(request))

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _handle

    def _read_body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            return self._read_chunked()
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_EVENT_BYTES:
            raise HttpError(413, "Request too large: the limit is 6 MB")
        return self.rfile.read(length) if length else b""

    def _read_chunked(self) -> bytes:
        data = bytearray()
        while True:
            size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                self.rfile.readline()  # the blank line after the last chunk
                return bytes(data)
            if len(data) + size > MAX_EVENT_BYTES:
                raise HttpError(413, "Request too large: the limit is 6 MB")
            data += self.rfile.read(size)
            self.rfile.readline()

    def _send(self, response: Response) -> None:
        self.send_response(response.status)
        # The front door's own answers carry a request id too, as API Gateway's gateway responses do.
        if not any(name.lower() == "x-request-id" for name, _ in response.headers):
            self.send_header("X-Request-ID", str(uuid.uuid4()))
        for name, value in response.headers:
            if name.lower() not in ("content-length", "transfer-encoding", "connection"):
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(response.body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(response.body)

    def log_message(self, format: str, *args: Any) -> None:
        LOG.info("%s %s", self.address_string(), format % args)
