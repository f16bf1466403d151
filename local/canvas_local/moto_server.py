"""moto's server app (every service on one port) behind a server made for many concurrent callers.

moto's ThreadedMotoServer runs werkzeug's development server: it closes the connection after every response
and starts a thread for every connection, one at a time on its accept loop. With a few dozen blocks calling
DynamoDB at once, requests queued behind thread starts for most of a second. Here a fixed pool of threads
serves the connections, the kernel's listen queue is deep, and nothing is created per request.

moto checks no signature: anyone who reaches its port could read and write every table and bucket. So the port
is on loopback only, and it answers only requests signed (SigV4) with one of the access key ids it was given, the
stack's own (`CallerCheck`): other processes of the machine, a browser page that finds the port, are refused.

The stack's own boto3 clients (handlers, stack, watcher) do not need the socket at all: `serve_in_process`
hands their requests to the same app in the calling thread, which saves the HTTP round trip and the two thread
handoffs of every call. The server stays for the operator's admin commands, in other processes.

A call to DynamoDB, Step Functions, SQS or EventBridge is answered even earlier, as soon as botocore has validated
and serialized its parameters (the clients' classes get a `_make_api_call` that asks the transport first), when
moto would take its default account and region from the request's signature anyway (the client's region is moto's
default and its access key is not one moto reads from a signature: the stack's clients use its own). Nothing
else in moto reads the endpoint, signature, user agent or retry headers, so botocore's endpoint rules, signing,
request building and retry loop are skipped; the answer is parsed as botocore's endpoint parses it (DynamoDB's
attribute values built directly, as its parser would build them).
"""

from __future__ import annotations

import io
import itertools
import json
import logging
import re
import sys
import threading
from collections.abc import Callable, Collection, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from botocore.awsrequest import AWSResponse
from botocore.client import BaseClient
from botocore.endpoint import convert_to_response_dict
from botocore.exceptions import ClientError
from botocore.httpchecksum import handle_checksum_body
from botocore.parsers import JSONParser, ResponseParserFactory
from moto.core import DEFAULT_ACCOUNT_ID
from moto.core.botocore_stubber import MockRawResponse
from moto.core.request import PRESERVED_HEADER_NAMES_ENVIRON_KEY, Request
from moto.core.responses import BaseResponse
from moto.dynamodb.responses import DynamoHandler
from moto.events.responses import EventsHandler
from moto.iam.models import get_account_id_from
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from moto.sqs.responses import SQSResponse
from moto.stepfunctions.responses import StepFunctionResponse
from urllib3 import HTTPHeaderDict
from werkzeug.serving import BaseWSGIServer

from canvas_local import priority
from canvas_local.faults import FaultInjector
from canvas_local.scopes import SessionPolicies

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


# The access key id of a SigV4 request: in its Authorization header, or a presigned URL's X-Amz-Credential.
_CREDENTIAL = re.compile(r"^AWS4-HMAC-SHA256 +Credential=([^/,\s]+)/")


def access_key_of(environ: dict[str, Any]) -> str | None:
    """The access key id a request is signed with (SigV4), or None when it is not signed so."""
    match = _CREDENTIAL.match(environ.get("HTTP_AUTHORIZATION", ""))
    if match:
        return match.group(1)
    credential = parse_qs(environ.get("QUERY_STRING", "")).get("X-Amz-Credential")
    return credential[0].split("/", 1)[0] if credential and "/" in credential[0] else None


class CallerCheck:
    """A WSGI app in front of moto's: a request signed with none of `access_key_ids` is answered 403, as AWS answers
    an unknown key (in the JSON services' error shape when the request is theirs, else in S3's), and never reaches
    moto."""

    def __init__(self, app: Callable[..., Iterable[bytes]], access_key_ids: Collection[str]):
        self.app = app
        self.access_key_ids = frozenset(access_key_ids)

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if access_key_of(environ) in self.access_key_ids:
            return self.app(environ, start_response)
        LOG.warning("moto's port refused a %s from %s", environ.get("REQUEST_METHOD"), environ.get("REMOTE_ADDR"))
        message = "The security token included in the request is invalid: only the embedded stack's own is accepted"
        if environ.get("HTTP_X_AMZ_TARGET"):
            body = json.dumps({"__type": "UnrecognizedClientException", "message": message}).encode()
            content_type = "application/x-amz-json-1.0"
        else:
            xml = f"<?xml version='1.0' encoding='UTF-8'?><Error><Code>AccessDenied</Code><Message>{message}</Message>"
            body = (xml + "</Error>").encode()
            content_type = "application/xml"
        start_response("403 Forbidden", [("Content-Type", content_type), ("Content-Length", str(len(body)))])
        return [body]


class MotoServer:
    """The part of ThreadedMotoServer's interface the stack uses: start, stop, get_host_and_port; and
    `serve_in_process(session)` for the clients of a boto3 session. Over the socket, only requests signed with one
    of `access_key_ids` are served (None: every request, as moto's own server does)."""

    def __init__(self, ip_address: str = "127.0.0.1", port: int = 0, access_key_ids: Collection[str] | None = None):
        self._address = (ip_address, port)
        self._access_key_ids = access_key_ids
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
        session.events.register("creating-client-class", self._in_process.add_client_class)
        session.events.register("before-send", self._in_process)
        self._sessions.append(session)

    def check_session_policies(self, policies: SessionPolicies | None) -> None:
        """Check the in-process calls signed with credentials vended with a session policy against it."""
        if self._in_process is None:
            raise RuntimeError("moto's server is not started")
        self._in_process.session_policies = policies

    def inject_faults(self, faults: FaultInjector | None) -> None:
        """Answer the in-process DynamoDB calls with `faults` injected (None: as moto answers them)."""
        if self._in_process is None:
            raise RuntimeError("moto's server is not started")
        self._in_process.faults = faults

    def stop_serving_in_process(self, session: Any) -> None:
        if self._in_process is None:
            raise RuntimeError("moto's server is not started")
        session.events.unregister("creating-client-class", self._in_process.add_client_class)
        session.events.unregister("before-send", self._in_process)
        if session in self._sessions:
            self._sessions.remove(session)

    def start(self) -> None:
        app = DomainDispatcherApplication(create_backend_app)
        served = app if self._access_key_ids is None else CallerCheck(app, self._access_key_ids)
        self._server = _PooledWSGIServer(*self._address, served, handler=MotoRequestHandler)
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
    calling thread, with the environ werkzeug's server would have built; any other request goes on as usual.
    `answer` answers the calls to moto's JSON services before botocore resolves an endpoint or builds a request
    (through `_AnsweredInProcess`, which `add_client_class` gives the session's clients)."""

    def __init__(self, app: Any, host: str, port: int):
        self._app = app
        self._host, self._port = host, str(port)
        self._prefix = f"http://{host}:{port}"
        self._root = f"{self._prefix}/"
        self._served = itertools.count()
        self._parsers = ResponseParserFactory()
        self.served = 0
        # AWS's failures injected into DynamoDB's answers (canvas_local.faults), or None.
        self.faults: FaultInjector | None = None
        # The session policies of the credentials the stack vended, checked before a call is made (scopes.py).
        self.session_policies: SessionPolicies | None = None

    def answer(self, client: BaseClient, operation_name: str, api_params: dict[str, Any]) -> dict[str, Any] | None:
        """The parsed answer of a call to one of moto's JSON services at its endpoint, as botocore's
        `_make_api_call` would return it (or the error it would raise), or None for botocore to make the call.

        The parameters go through the client's own hooks (`provide-client-params`, `before-parameter-build`),
        validation and serializer, and the body moto parses is the one botocore would send. What is skipped is
        what moto does not read: endpoint rules, user agent, signature, retries and the `before-call` and
        `before-send` hooks."""
        meta = client.meta
        service_id = meta.service_model.service_id.hyphenize()
        handler = _JSON_HANDLERS.get(service_id)
        if handler is None or (meta.endpoint_url or "").rstrip("/") != self._prefix:
            return None
        if self.faults is not None and service_id == "dynamodb":
            return None  # a fault is answered inside botocore's retry loop (`__call__`), as AWS's error would be
        operation = meta.service_model.operation_model(operation_name)
        if operation.has_streaming_input or operation.has_streaming_output or operation.has_event_stream_output:
            return None
        if not _signature_names_defaults(client._request_signer):
            return None
        context = {
            "client_region": meta.region_name,
            "client_config": meta.config,
            "has_streaming_input": False,
            "auth_type": operation.resolved_auth_type,
            "unsigned_payload": operation.unsigned_payload,
            "auth_options": meta.service_model.metadata.get("auth"),
        }
        api_params = client._emit_api_params(api_params=api_params, operation_model=operation, context=context)
        request = client._serializer.serialize_to_request(api_params, operation)  # validates, as botocore does
        headers = dict(request["headers"])
        if priority.marked():
            headers[priority.HEADER] = "1"
        status, response_headers, content = self._dispatch(
            handler, "POST", self._root, headers, _body_bytes(request["body"])
        )
        self.served = next(self._served) + 1
        http = AWSResponse(self._root, status, response_headers, MockRawResponse(content))
        parsed = self._parse(http, operation, context)
        meta.events.emit(
            f"after-call.{service_id}.{operation_name}",
            http_response=http,
            parsed=parsed,
            model=operation,
            context=context,
        )
        if status >= 300:
            raise client.exceptions.from_code(parsed.get("Error", {}).get("Code"))(parsed, operation_name)
        return parsed

    def add_client_class(self, class_attributes: dict[str, Any], base_classes: list[type], **_: Any) -> None:
        """A `creating-client-class` handler: the clients of the session answer their JSON calls through this
        transport (`answer`)."""
        class_attributes["_in_process_transport"] = self
        base_classes.insert(0, _AnsweredInProcess)

    def _parse(self, http: AWSResponse, model: Any, context: dict[str, Any]) -> dict[str, Any]:
        """As botocore's endpoint parses a response (`Endpoint._do_get_response`), after no retry."""
        response_dict = convert_to_response_dict(http, model)
        handle_checksum_body(http, response_dict, context, model)
        protocol = model.service_model.resolved_protocol
        parser = AttributeValueParser() if protocol == "json" else self._parsers.create_parser(protocol)
        parsed: dict[str, Any] = parser.parse(response_dict, model.output_shape)
        if http.status_code >= 300:
            code = parsed.get("Error", {}).get("Code")
            error_shape = model.service_model.shape_for_error_code(code) if code is not None else None
            if error_shape is not None:
                parsed.update(parser.parse(response_dict, error_shape))
        if "ResponseMetadata" in parsed:
            parsed["ResponseMetadata"]["RetryAttempts"] = 0
        return parsed

    def __call__(self, request: Any, event_name: str = "", **_: Any) -> AWSResponse | None:
        url: str = request.url
        if not url.startswith(self._prefix) or url[len(self._prefix) : len(self._prefix) + 1] not in ("/", "?", ""):
            return None
        raw_path = url[len(self._prefix) :] or "/"
        body = _body_bytes(request.body)
        # `before-send.<service>.<operation>`: the JSON services answer at "/" through one handler each, which is
        # called as moto's Flask app would call it, without building and tearing down a Flask request around it.
        service = event_name.split(".")[1] if event_name.count(".") >= 2 else ""
        handler = _JSON_HANDLERS.get(service)
        if handler is not None and raw_path == "/":

            def dispatch() -> tuple[int, Any, bytes]:
                return self._dispatch(handler, request.method, url, request.headers, body)

            if self.faults is not None and service == "dynamodb":
                status, faulted, content = self.faults.dynamodb(event_name.split(".")[2], body, dispatch)
                headers = HTTPHeaderDict(dict(faulted))
            else:
                status, headers, content = dispatch()
        else:
            status, headers, content = self._call(request.method, raw_path, request.headers, body)
        self.served = next(self._served) + 1
        return AWSResponse(url, status, headers, MockRawResponse(content))

    def _dispatch(
        self, handler: Any, method: str, url: str, headers: Any, body: bytes
    ) -> tuple[int, HTTPHeaderDict, bytes]:
        moto_request = self._root_request(headers, body) if method == "POST" and url == self._root else None
        if moto_request is None:
            moto_request = Request.from_primitives(method, url, headers, body)
            url = moto_request.raw_url
        try:
            result = handler(moto_request, url, dict(moto_request.headers))
        except ClientError as exc:  # as moto's Flask wrapper answers it
            result = 400, {}, exc.response["Error"]["Message"]
        status, response_headers, content = result if len(result) == 3 else (200, {}, result)
        if isinstance(content, str):
            content = content.encode("utf-8")
        return int(status), HTTPHeaderDict({k: str(v) for k, v in response_headers.items()}), content

    def _root_request(self, headers: Any, body: bytes) -> Request | None:
        """The request `Request.from_primitives` builds for a POST of `body` to "/" (werkzeug's EnvironBuilder
        makes the same environ, at several times the cost), or None when the headers need its care."""
        if not body:
            return None
        environ: dict[str, Any] = {
            "REQUEST_METHOD": "POST",
            "SCRIPT_NAME": "",
            "PATH_INFO": "/",
            "QUERY_STRING": "",
            "REQUEST_URI": "/",
            "RAW_URI": "/",
            "SERVER_NAME": self._host,
            "SERVER_PORT": self._port,
            "HTTP_HOST": f"{self._host}:{self._port}",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "wsgi.version": (1, 0),
            "wsgi.url_scheme": "http",
            "wsgi.input": io.BytesIO(body),
            "wsgi.errors": sys.stderr,
            "wsgi.multithread": False,
            "wsgi.multiprocess": False,
            "wsgi.run_once": False,
        }
        fields: dict[str, str] = {}
        for name, value in headers.items():
            if isinstance(value, bytes):
                value = value.decode("utf-8")
            key = name.upper().replace("-", "_")
            if not isinstance(value, str) or "\n" in value or "\r" in value or "_" in name or key in fields:
                return None  # werkzeug's checks, a name moto keeps as sent, or headers werkzeug would join
            if key not in ("CONTENT_LENGTH", "TRANSFER_ENCODING"):
                fields[key] = value
        if "CONTENT_TYPE" in fields:
            environ["CONTENT_TYPE"] = fields.pop("CONTENT_TYPE")
        environ["CONTENT_LENGTH"] = str(len(body))
        environ.update((f"HTTP_{key}", value) for key, value in fields.items())
        request = Request(environ)
        environ[PRESERVED_HEADER_NAMES_ENVIRON_KEY] = {}
        return request

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


class _AnsweredInProcess(BaseClient):
    """The base a served session's client classes get first: a call its transport answers is not made."""

    _in_process_transport: InProcessTransport

    def _make_api_call(self, operation_name: str, api_params: dict[str, Any]) -> Any:
        policies = self._in_process_transport.session_policies
        if policies is not None:
            # A call signed with credentials vended with a session policy is checked against it (scopes.py).
            vended = policies.answer(self, operation_name, api_params)
            if vended is not None:
                return vended
        answer = self._in_process_transport.answer(self, operation_name, api_params)
        return super()._make_api_call(operation_name, api_params) if answer is None else answer


# The services whose JSON requests are posted to "/" and answered by one handler each, by botocore's service id.
_JSON_HANDLERS = {
    "dynamodb": DynamoHandler.dispatch,
    "sfn": StepFunctionResponse.dispatch,
    "sqs": SQSResponse.dispatch,
    "eventbridge": EventsHandler.dispatch,
}


class AttributeValueParser(JSONParser):
    """botocore's JSON parser, with DynamoDB's attribute values parsed without a walk of the service model for
    each one (an item's every value went through it): what botocore makes of them, built directly. Any other
    shape, or a value of another form, goes to botocore's own parsing."""

    def _handle_structure(self, shape: Any, value: Any) -> Any:
        if isinstance(value, dict) and _is_attribute_value(shape):
            return self._attribute_value(shape, value)
        return super()._handle_structure(shape, value)

    def _attribute_value(self, shape: Any, value: dict[str, Any]) -> dict[str, Any]:
        parsed: dict[str, Any] = {}
        for kind in _ATTRIBUTE_KINDS:  # botocore parses a structure's members in the model's order
            member = value.get(kind)
            if member is None:
                continue
            if kind == "B":
                parsed[kind] = self._blob_parser(member)
            elif kind == "BS":
                parsed[kind] = [None if m is None else self._blob_parser(m) for m in member]
            elif kind in ("SS", "NS"):
                parsed[kind] = list(member)
            elif kind == "M":
                parsed[kind] = {key: self._handle_structure(shape, m) for key, m in member.items()}
            elif kind == "L":
                parsed[kind] = [None if m is None else self._handle_structure(shape, m) for m in member]
            else:  # S, N, NULL, BOOL: as they come
                parsed[kind] = member
        return parsed


# DynamoDB's AttributeValue: its members in the model's order, with each one's kind.
_ATTRIBUTE_KINDS = ("S", "N", "B", "SS", "NS", "BS", "M", "L", "NULL", "BOOL")
_ATTRIBUTE_SHAPE = (
    ("S", "string", None),
    ("N", "string", None),
    ("B", "blob", None),
    ("SS", "list", "string"),
    ("NS", "list", "string"),
    ("BS", "list", "blob"),
    ("M", "map", "AttributeValue"),
    ("L", "list", "AttributeValue"),
    ("NULL", "boolean", None),
    ("BOOL", "boolean", None),
)
_attribute_shapes: dict[int, tuple[Any, bool]] = {}  # by id, with the shape itself (kept, so the id stays its)


def _is_attribute_value(shape: Any) -> bool:
    """Whether a shape is DynamoDB's AttributeValue as the fast path knows it (checked once per shape)."""
    known = _attribute_shapes.get(id(shape))
    if known is None or known[0] is not shape:
        is_it = shape.name == "AttributeValue" and not shape.is_tagged_union and _members_of(shape) == _ATTRIBUTE_SHAPE
        known = _attribute_shapes[id(shape)] = (shape, is_it)
    return known[1]


def _members_of(shape: Any) -> tuple[tuple[str, str, str | None], ...]:
    members = []
    for name, member in shape.members.items():
        if member.serialization:
            return ()
        inner = getattr(member, "member", None) or getattr(member, "value", None)
        if inner is None:
            kind = None
        elif inner.name == "AttributeValue":
            kind = "AttributeValue"
        else:
            kind = inner.type_name
        members.append((name, member.type_name, kind))
    return tuple(members)


def _signature_names_defaults(request_signer: Any) -> bool:
    """Whether moto takes its default region and account from what this client's signature would carry: the
    signing region is moto's default, and the access key is none that moto picks out of a signature (moto's own
    pattern) to look its account up, or one whose account moto finds to be its default (a key it never issued, such
    as the credentials the stack vends a block: canvas_local/scopes.py)."""
    if request_signer is None or request_signer.region_name != BaseResponse.default_region:
        return False
    credentials = getattr(request_signer, "_credentials", None)
    access_key = getattr(credentials, "access_key", None) if credentials is not None else None
    if access_key is None:
        return credentials is None  # unsigned: moto sees no signature either way
    if BaseResponse.access_key_regex.search(f"AWS4-HMAC-SHA256 Credential={access_key}/") is None:
        return True
    return bool(get_account_id_from(access_key) == DEFAULT_ACCOUNT_ID)


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
