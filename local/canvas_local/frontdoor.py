"""The embedded stack's API Gateway: a WSGI app, served by waitress, that turns each request into a REST (v1)
proxy event, calls the function whose `Api` event matches the method and path, and answers with what it returns."""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl

from waitress import wasyncore
from waitress.adjustments import Adjustments
from waitress.channel import HTTPChannel
from waitress.parser import HTTPRequestParser, ParsingError, get_header_lines
from waitress.receiver import ChunkedReceiver
from waitress.rfc7230 import HEADER_FIELD_RE
from waitress.server import TcpWSGIServer
from waitress.task import ErrorTask, ThreadedTaskDispatcher, WSGITask
from waitress.utilities import Error, RequestEntityTooLarge

from canvas_local import priority
from canvas_local.lambda_runtime import ACCOUNT_ID, FunctionError, LocalFunction, Throttled
from canvas_local.template import ApiRoute

if TYPE_CHECKING:
    from canvas_local.downloads import DownloadLinks

LOG = logging.getLogger(__name__)

# Lambda's limit on a synchronous invocation's payload; API Gateway's own (10 MB) is never reached first.
MIB = 1024 * 1024
MAX_EVENT_MIB = 6
MAX_EVENT_BYTES = MAX_EVENT_MIB * MIB
# Connections the kernel queues before the server accepts them: a burst waits instead of being reset.
LISTEN_BACKLOG = 1024
# Connections open at once (a file descriptor each, polled, not a thread); past this the server stops accepting
# and new ones wait in the backlog until one closes.
MAX_CONNECTIONS = 4096
# Requests handled at once (a worker thread each, started with the door): enough for every API function's
# environments to be waited on together, since a request waits for an environment up to THROTTLE_WAIT_SECONDS.
WORKER_THREADS = 64
# A request's head must arrive within HEAD_SECONDS of its first byte and the whole request within
# REQUEST_SECONDS, or it is answered 408 and closed: a client that trickles cannot keep a connection for ever.
HEAD_SECONDS = 10
REQUEST_SECONDS = 60
# How long a request waits for a free execution environment before it is answered 429, as API Gateway
# answers when Lambda throttles.
THROTTLE_WAIT_SECONDS = 10
RETRY_AFTER_SECONDS = 1
# An idle keep-alive connection is closed after this, so abandoned clients do not hold connections.
IDLE_CONNECTION_SECONDS = 30
# How often (seconds) the server looks for idle connections and overdue requests; waitress's unit is a second.
CHECK_SECONDS = 1
# The methods API Gateway routes (what `ANY` stands for); any other (TRACE, CONNECT, ...) is answered 405.
METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
# Where `GET /` leads when no route claims it.
HOME = "/portal"
# Where the download links point (canvas_local.downloads), answered by the door itself as S3 answers presigned URLs.
DOWNLOADS = "/downloads/"
# The environ key under which the request's headers, as sent, reach the app.
HEADER_PAIRS = "canvas.header_pairs"


class HttpError(Exception):
    def __init__(self, status: int, message: str, headers: list[tuple[str, str]] | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or []


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
        candidates = self._candidates(path)
        if method not in METHODS:
            raise _method_not_allowed(method, path, self.allowed(path) or list(METHODS))
        if not candidates:
            raise HttpError(404, f"Not found: {method} {path}")
        for _, route, params in candidates:
            if route.method in (method, "ANY"):
                return Match(route, params)
        raise _method_not_allowed(method, path, self.allowed(path))

    def allowed(self, path: str) -> list[str]:
        """The methods some route answers on this path, in METHODS' order."""
        methods = {route.method for _, route, _ in self._candidates(path)}
        return [method for method in METHODS if method in methods or "ANY" in methods]

    def _candidates(self, path: str) -> list[tuple[list[int], ApiRoute, dict[str, str]]]:
        segments = _segments(path)
        candidates = []
        for route in self.routes:
            params = _match_segments(_segments(route.path), segments)
            if params is not None:
                candidates.append((_specificity(route.path), route, params))
        candidates.sort(key=lambda candidate: candidate[0])
        return candidates


def _method_not_allowed(method: str, path: str, allowed: list[str]) -> HttpError:
    return HttpError(405, f"Method not allowed: {method} {path}", [("Allow", ", ".join(allowed))])


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
        downloads: DownloadLinks | None = None,
    ):
        self.router = Router(routes)
        self.downloads = downloads  # what serves the download links under /downloads/ (canvas_local.downloads)
        self.on_change = on_change  # told of every request that may change state (POST, PUT, PATCH, DELETE)
        self.functions = functions
        self.binary_media_types = binary_media_types
        self.stage = stage
        self.address = (host, port)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._sockets: dict[int, Any] = {}  # waitress's socket map: the listening socket, its connections

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("the front door is not started")
        return f"http://{self._server.effective_host}:{self._server.effective_port}"

    def bind(self) -> None:
        """Take the port (OSError if it is in use); connections queue from here until `start` serves them."""
        if self._server is not None:
            return
        adjustments = Adjustments(
            host=self.address[0],
            port=self.address[1],
            threads=WORKER_THREADS,
            connection_limit=MAX_CONNECTIONS,
            backlog=LISTEN_BACKLOG,
            channel_timeout=IDLE_CONNECTION_SECONDS,
            cleanup_interval=CHECK_SECONDS,
            max_request_body_size=MAX_EVENT_BYTES,
            # poll(2), not select(2), which cannot watch a descriptor numbered past 1024
            asyncore_use_poll=True,
            ident="",
        )
        self._sockets = {}
        try:
            # The workers start with `start`: a door that only binds, or fails to, leaves no thread behind.
            self._server = _Server(self.wsgi, self._sockets, adj=adjustments, dispatcher=ThreadedTaskDispatcher())
        except BaseException:
            wasyncore.close_all(self._sockets)
            raise

    def start(self) -> None:
        self.bind()
        assert self._server is not None
        self._server.task_dispatcher.set_thread_count(WORKER_THREADS)
        self._stopping.clear()
        self._thread = threading.Thread(target=self._serve, args=(self._sockets,), name="canvas-frontdoor", daemon=True)
        self._thread.start()

    def _serve(self, sockets: dict[int, Any]) -> None:
        try:
            while not self._stopping.is_set():
                try:
                    wasyncore.loop(timeout=CHECK_SECONDS, map=sockets, use_poll=True, count=1)
                except Exception:  # one connection's failure must not stop the door
                    LOG.exception("The front door's event loop failed; it goes on")
        finally:
            wasyncore.close_all(sockets)  # on this thread, so no poll watches a closed descriptor

    def stop(self) -> None:
        server = self._server
        if server is None:
            return
        if self._thread is not None:
            self._stopping.set()
            with contextlib.suppress(OSError):  # OSError: the loop has ended and closed its trigger
                server.pull_trigger()  # wakes the loop at once
            self._thread.join(timeout=10)
        else:
            wasyncore.close_all(self._sockets)
        server.task_dispatcher.shutdown(timeout=10)
        self._server = self._thread = None

    # -------------------------------------------------- HTTP

    def wsgi(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        """The WSGI app waitress serves: the request as the handlers see it, their answer as the client sees it."""
        method = environ["REQUEST_METHOD"]
        request = Request(
            method=method,
            # PEP 3333 carries the path's bytes as latin-1; the client sent UTF-8.
            path=environ.get("PATH_INFO", "").encode("latin-1").decode("utf-8", "replace") or "/",
            query=environ.get("QUERY_STRING", ""),
            headers=list(environ.get(HEADER_PAIRS, [])),
            body=environ["wsgi.input"].read(),
            client_ip=environ.get("REMOTE_ADDR", ""),
        )
        response = self.respond(request)
        headers = [
            (name, value)
            for name, value in response.headers
            if name.lower() not in ("content-length", "transfer-encoding", "connection")
        ]
        # The front door's own answers carry a request id too, as API Gateway's gateway responses do.
        if not any(name.lower() == "x-request-id" for name, _ in headers):
            headers.append(("X-Request-ID", str(uuid.uuid4())))
        headers.append(("Content-Length", str(len(response.body))))
        start_response(f"{response.status} {_reason(response.status)}", headers)
        LOG.info('%s "%s %s" %d', request.client_ip, method, environ.get("REQUEST_URI", ""), response.status)
        return [] if method == "HEAD" else [response.body]

    # -------------------------------------------------- one request

    def respond(self, request: Request) -> Response:
        if self.on_change is not None and request.method in ("POST", "PUT", "PATCH", "DELETE"):
            self.on_change()
        if self.downloads is not None:
            if request.path.startswith(DOWNLOADS):
                return self.downloads.serve(request)
            # Links the function mints start with the address this client reached the door at.
            with self.downloads.reached_at(request.header("host")):
                return self._route(request)
        return self._route(request)

    def _route(self, request: Request) -> Response:
        try:
            match = self.router.match(request.method, request.path)
        except HttpError as exc:
            if exc.status == 404 and request.path == "/" and request.method in ("GET", "HEAD"):
                return Response(302, [("Location", HOME)], b"")
            return error_response(exc.status, exc.message, exc.headers)
        try:
            event = self.event(request, match)
            size = len(json.dumps(event))
            if size > MAX_EVENT_BYTES:
                raise HttpError(413, self._too_large(size, match.route.function, event["isBase64Encoded"]))
            return self.call(match.route.function, event)
        except HttpError as exc:
            return error_response(exc.status, exc.message, exc.headers)

    def _too_large(self, size: int, function_name: str, base64_encoded: bool) -> str:
        """What a client can act on: the size the function would have received against Lambda's limit and, for a
        body of files (which base64 grows by a third), the service's own limit on them."""
        if not base64_encoded:
            return f"Request too large: {size / MIB:.1f} MiB as the function receives it (at most {MAX_EVENT_MIB} MiB)"
        message = (
            f"Request too large: {size / MIB:.1f} MiB once base64-encoded, as the function receives it (at most "
            f"{MAX_EVENT_MIB} MiB)"
        )
        files_limit = _upload_limit(self.functions[function_name].environment)
        return f"{message}; files may be at most {files_limit / MIB:g} MiB in all" if files_limit else message

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


def _upload_limit(environment: Mapping[str, str] | None) -> int | None:
    """The files' limit of the function's request (canvas_core's MAX_UPLOAD_BYTES, as its environment sets it or
    by default), or None for a function that has none."""
    if environment and environment.get("MAX_UPLOAD_BYTES", "").isdigit():
        return int(environment["MAX_UPLOAD_BYTES"])
    try:
        from canvas_core.settings.api import ApiSettings
    except ImportError:
        return None
    default = ApiSettings.model_fields["max_upload_bytes"].default
    return default if isinstance(default, int) else None


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


def error_response(status: int, message: str, headers: list[tuple[str, str]] | None = None) -> Response:
    body = json.dumps({"success": False, "error": message}).encode("utf-8")
    return Response(status, [("Content-Type", "application/json"), *(headers or [])], body)


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


# ---------------------------------------------------------------- HTTP, served by waitress

# waitress reads each request whole (head, then body) on its one event-loop thread and only then hands it to a
# worker, so a client that trickles its bytes holds a connection (a file descriptor), never a worker. The classes
# below extend its parser, channel, tasks and server (pinned in pyproject.toml for that reason) with what it has
# no setting for: a deadline on reading a request, the header pairs as sent, and its own errors in the
# contract's error shape; and two framing rules it does not hold: a request with both `Content-Length` and
# `Transfer-Encoding` is refused (400), and a chunk that would take the body past the limit is answered 413 as soon
# as its size is read (waitress would wait for its bytes).


class _Parser(HTTPRequestParser):
    """waitress's request parser, remembering when the request's first byte came and its headers as sent (waitress
    upper-cases names and joins repeated headers, which multiValueHeaders must keep apart)."""

    body_rcv: Any  # waitress's reader of the body: a ChunkedReceiver, a FixedStreamReceiver or None

    def __init__(self, adj: Adjustments):
        super().__init__(adj)
        self.started = time.monotonic()
        self.header_pairs: list[tuple[str, str]] = []

    def parse_header(self, header_plus: bytes) -> None:
        super().parse_header(header_plus)  # raises on a malformed head, which is answered 400
        for line in get_header_lines(header_plus[header_plus.find(b"\r\n") + 2 :]):
            match = HEADER_FIELD_RE.match(line)
            if match:
                name, value = match.group("name", "value")
                self.header_pairs.append((name.decode("latin-1"), value.strip(b" \t").decode("latin-1")))
        names = {name.lower() for name, _ in self.header_pairs}
        if {"content-length", "transfer-encoding"} <= names:
            # RFC 9112, section 6.3: a server may reject such a request, and should, as the two lengths are how
            # requests are smuggled past a proxy that reads the other one. waitress would read the chunks.
            raise ParsingError("a request must not carry both Content-Length and Transfer-Encoding")
        if self.chunked:
            self.body_rcv = _ChunkedReceiver(self.body_rcv.buf, self.adj.max_request_body_size)


class _ChunkedReceiver(ChunkedReceiver):
    """waitress's reader of a chunked body, refusing a chunk whose size takes the body to the limit as soon as the
    size is read: waitress counts a chunk's bytes as they arrive, so a size like `ffffffffffffffffff` kept the
    connection waiting for the request deadline (408) instead of being answered 413."""

    error: Error | None

    def __init__(self, buf: Any, max_body: int):
        super().__init__(buf)
        self.max_body = max_body

    def received(self, s: bytes) -> int:
        consumed: int = super().received(s)
        if self.error is None and len(self.buf) + self.chunk_remainder >= self.max_body:
            self.error = RequestEntityTooLarge(f"exceeds max_body of {self.max_body}")
            self.all_chunks_received = True
        return consumed


class _Task(WSGITask):
    def get_environment(self) -> dict[str, Any]:
        environ: dict[str, Any] = super().get_environment()
        environ[HEADER_PAIRS] = self.request.header_pairs
        return environ


class _ErrorTask(ErrorTask):
    """What waitress answers itself (a malformed request, a body over the limit, a failure outside the app), in
    the contract's error shape."""

    def execute(self) -> None:
        error = self.request.error
        response = error_response(error.code, _error_message(error.code, error.body))
        self.status = f"{error.code} {error.reason}"
        self.response_headers.extend([*response.headers, ("X-Request-ID", str(uuid.uuid4()))])
        self.set_close_on_finish()
        self.content_length = len(response.body)
        self.write(response.body)


def _error_message(status: int, detail: str) -> str:
    if status == 413:
        return "Request too large: the limit is 6 MB"
    if status == 431:
        return "Request header fields too large"
    if status >= 500:
        return "Internal server error" if status == 500 else f"Not implemented: {detail}"
    return f"Bad request: {detail}"


class _Channel(HTTPChannel):
    request: _Parser | None  # the request being read, by parser_class
    parser_class = _Parser
    task_class = _Task
    error_task_class = _ErrorTask

    def answer_timeout(self) -> None:
        """Answer 408 and close: the request's head or body did not arrive in time. Called on the event loop's
        thread when no task is running on this connection, so nothing else writes to it."""
        if self.request is not None:
            self.request.close()
            self.request = None
        response = error_response(408, "Request timeout: the request did not arrive in time")
        head = (
            "HTTP/1.1 408 Request Timeout\r\nContent-Type: application/json\r\nConnection: close\r\n"
            f"X-Request-ID: {uuid.uuid4()}\r\nContent-Length: {len(response.body)}\r\n\r\n"
        )
        data = head.encode("ascii") + response.body
        with self.outbuf_lock:
            self.outbufs[-1].append(data)
            self.current_outbuf_count += len(data)
            self.total_outbufs_len += len(data)
        self.close_when_flushed = True


class _Server(TcpWSGIServer):
    channel_class = _Channel

    def maintenance(self, now: float) -> None:
        """waitress's own (close connections idle for channel_timeout), and the read deadlines."""
        clock = time.monotonic()
        for channel in list(self.active_channels.values()):
            if channel.requests or channel.will_close or channel.close_when_flushed:
                continue
            if channel.last_activity < now - self.adj.channel_timeout:
                channel.will_close = True
                continue
            request = channel.request
            if request is None:
                continue
            limit = REQUEST_SECONDS if request.headers_finished else HEAD_SECONDS
            if clock - request.started > limit:
                LOG.info("%s: request not received within %d s, answered 408", channel.addr[0], limit)
                channel.answer_timeout()
