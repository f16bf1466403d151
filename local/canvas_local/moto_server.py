"""moto's server app (every service on one port) behind a server made for many concurrent callers.

moto's ThreadedMotoServer runs werkzeug's development server: it closes the connection after every response
and starts a thread for every connection, one at a time on its accept loop. With a few dozen blocks calling
DynamoDB at once, requests queued behind thread starts for most of a second. Here a fixed pool of threads
serves the connections, the kernel's listen queue is deep, and nothing is created per request.

The stack's own boto3 clients (handlers, stack, watcher) do not need the socket at all: `serve_in_process`
hands their requests to the same app in the calling thread, which saves the HTTP round trip and the two thread
handoffs of every call. The server stays for everyone else (presigned URLs, other processes).
"""

from __future__ import annotations

import io
import itertools
import logging
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import unquote, urlsplit

from botocore.awsrequest import AWSResponse
from botocore.exceptions import ClientError
from moto.core.botocore_stubber import MockRawResponse
from moto.core.request import Request
from moto.dynamodb.responses import DynamoHandler
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from moto.stepfunctions.responses import StepFunctionResponse
from urllib3 import HTTPHeaderDict
from werkzeug.serving import BaseWSGIServer

LOG = logging.getLogger(__name__)

WORKERS = 64
LISTEN_BACKLOG = 1024


class _PooledWSGIServer(BaseWSGIServer):
    multithread = True
    request_queue_size = LISTEN_BACKLOG

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="moto-server")

    def process_request(self, request: Any, client_address: Any) -> None:
        self._pool.submit(self._serve_connection, request, client_address)

    def _serve_connection(self, request: Any, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)

    def server_close(self) -> None:
        super().server_close()
        self._pool.shutdown(wait=False, cancel_futures=True)


class MotoServer:
    """The part of ThreadedMotoServer's interface the stack uses: start, stop, get_host_and_port; and
    `serve_in_process(session)` for the clients of a boto3 session."""

    def __init__(self, ip_address: str = "127.0.0.1", port: int = 0):
        self._address = (ip_address, port)
        self._server: _PooledWSGIServer | None = None
        self._thread: threading.Thread | None = None
        self._in_process: InProcessTransport | None = None
        self._sessions: list[Any] = []

    @property
    def served_in_process(self) -> int:
        """How many requests were served in their caller's thread."""
        return self._in_process.served if self._in_process is not None else 0

    def serve_in_process(self, session: Any) -> None:
        """Serve the requests of every client `session` (boto3 or botocore) creates from now on for this server's
        endpoint in the calling thread, through the same app and locks; other endpoints are left alone."""
        if self._server is None or self._in_process is None:
            raise RuntimeError("moto's server is not started")
        session.events.register("before-send", self._in_process)
        self._sessions.append(session)

    def stop_serving_in_process(self, session: Any) -> None:
        session.events.unregister("before-send", self._in_process)
        if session in self._sessions:
            self._sessions.remove(session)

    def start(self) -> None:
        app = DomainDispatcherApplication(create_backend_app)
        self._server = _PooledWSGIServer(*self._address, app, handler=MotoRequestHandler)
        host, port = self.get_host_and_port()
        self._in_process = InProcessTransport(app, host, port)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.5}, name="moto-server", daemon=True
        )
        self._thread.start()

    def get_host_and_port(self) -> tuple[str, int]:
        if self._server is None:
            raise RuntimeError("moto's server is not started")
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def stop(self) -> None:
        for session in list(self._sessions):
            self.stop_serving_in_process(session)
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = self._thread = None


class InProcessTransport:
    """A botocore `before-send` handler: a request for moto's endpoint is answered by moto's WSGI app in the
    calling thread, with the environ werkzeug's server would have built; any other request goes on as usual."""

    def __init__(self, app: Any, host: str, port: int):
        self._app = app
        self._host, self._port = host, str(port)
        self._prefix = f"http://{host}:{port}"
        self._served = itertools.count()
        self.served = 0

    def __call__(self, request: Any, event_name: str = "", **_: Any) -> AWSResponse | None:
        url: str = request.url
        if not url.startswith(self._prefix) or url[len(self._prefix) : len(self._prefix) + 1] not in ("/", "?", ""):
            return None
        raw_path = url[len(self._prefix) :] or "/"
        body = _body_bytes(request.body)
        # `before-send.<service>.<operation>`: the JSON services answer at "/" through one handler each, which is
        # called as moto's Flask app would call it, without building and tearing down a Flask request around it.
        handler = _JSON_HANDLERS.get(event_name.split(".")[1] if event_name.count(".") >= 2 else "")
        if handler is not None and raw_path == "/":
            status, headers, content = self._dispatch(handler, request.method, url, request.headers, body)
        else:
            status, headers, content = self._call(request.method, raw_path, request.headers, body)
        self.served = next(self._served) + 1
        return AWSResponse(url, status, headers, MockRawResponse(content))

    @staticmethod
    def _dispatch(handler: Any, method: str, url: str, headers: Any, body: bytes) -> tuple[int, HTTPHeaderDict, bytes]:
        moto_request = Request.from_primitives(method, url, headers, body)
        try:
            result = handler(moto_request, moto_request.raw_url, dict(moto_request.headers))
        except ClientError as exc:  # as moto's Flask wrapper answers it
            result = 400, {}, exc.response["Error"]["Message"]
        status, response_headers, content = result if len(result) == 3 else (200, {}, result)
        if isinstance(content, str):
            content = content.encode("utf-8")
        return int(status), HTTPHeaderDict({k: str(v) for k, v in response_headers.items()}), content

    def _call(self, method: str, raw_path: str, headers: Any, body: bytes) -> tuple[int, HTTPHeaderDict, bytes]:
        parts = urlsplit(raw_path)
        environ: dict[str, Any] = {
            "wsgi.version": (1, 0),
            "wsgi.url_scheme": "http",
            "wsgi.input": io.BytesIO(body),
            "wsgi.errors": sys.stderr,
            "wsgi.multithread": True,
            "wsgi.multiprocess": False,
            "wsgi.run_once": False,
            "REQUEST_METHOD": method,
            "SCRIPT_NAME": "",
            "PATH_INFO": _wsgi_str(unquote(parts.path)),
            "QUERY_STRING": _wsgi_str(parts.query),
            "REQUEST_URI": _wsgi_str(raw_path),
            "RAW_URI": _wsgi_str(raw_path),
            "REMOTE_ADDR": "127.0.0.1",
            "REMOTE_PORT": 0,
            "SERVER_NAME": self._host,
            "SERVER_PORT": self._port,
            "SERVER_PROTOCOL": "HTTP/1.1",
            "HTTP_HOST": f"{self._host}:{self._port}",
        }
        for name, value in headers.items():
            if isinstance(value, bytes):
                value = value.decode("latin-1")
            key = name.upper().replace("-", "_")
            if key in ("TRANSFER_ENCODING", "CONTENT_LENGTH", "HOST", "EXPECT"):
                continue  # the body is whole: its length is known and nothing is chunked or awaited
            if key != "CONTENT_TYPE":
                key = f"HTTP_{key}"
            environ[key] = value.replace("\r\n", "")
        environ["CONTENT_LENGTH"] = str(len(body))
        answer: dict[str, Any] = {}

        def start_response(status: str, response_headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            answer["status"], answer["headers"] = status, response_headers
            return lambda data: chunks.append(data)

        chunks: list[bytes] = []
        iterable = self._app(environ, start_response)
        try:
            chunks.extend(iterable)
        finally:
            close = getattr(iterable, "close", None)
            if close is not None:
                close()
        return int(answer["status"].split(" ", 1)[0]), HTTPHeaderDict(answer["headers"]), b"".join(chunks)


_JSON_HANDLERS = {"dynamodb": DynamoHandler.dispatch, "sfn": StepFunctionResponse.dispatch}


def _wsgi_str(text: str) -> str:
    # PEP 3333: environ strings carry the bytes of the request as latin-1.
    return text.encode("utf-8").decode("latin-1")


def _body_bytes(body: Any) -> bytes:
    if body is None:
        return b""
    if isinstance(body, bytes):
        return body
    if isinstance(body, (bytearray, memoryview)):
        return bytes(body)
    if isinstance(body, str):
        return body.encode("utf-8")
    read = getattr(body, "read", None)
    if read is not None:
        data = read()
        return data.encode("utf-8") if isinstance(data, str) else bytes(data)
    return b"".join(bytes(chunk) for chunk in body)
