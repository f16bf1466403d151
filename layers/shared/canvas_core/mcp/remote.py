"""POST /mcp: the MCP server over Streamable HTTP, stateless, with JSON responses (an event stream only for a call that
asks for progress), for one API Gateway (REST proxy) event at a time. The caller's API key (X-API-KEY, or
`Authorization: Bearer sk_...`) is checked first, as on every route, and answered 401 in the contract's shape; then
the SDK's transport answers the JSON-RPC message, its tools acting for the key's account."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, MutableMapping
from contextvars import ContextVar
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings

from canvas_core.auth import authenticate
from canvas_core.errors import ServiceError
from canvas_core.mcp.backend import CanvasBackend
from canvas_core.mcp.tools import create_server
from canvas_core.observability import logger
from canvas_core.settings import GatherSettings, ProviderSettings, StateMachineSettings, api_settings, load

# API Gateway ends a request after 29 s: a wait answers before that, and the client waits again.
MAX_WAIT_SECONDS = 20.0
# Lambda's request payload limit: files travel base64-encoded in the JSON-RPC body (the SDK's default is 4 MiB).
MAX_REQUEST_BYTES = 6 * 1024 * 1024

_caller: ContextVar[CanvasBackend] = ContextVar("mcp_caller")


def create_remote_server() -> MCPServer:
    """The function's MCP server, built once per container; each request's tools act for the caller it authenticated.
    Its settings are read here, when the function starts (those of create_run, which its tools include)."""
    api_settings()
    for model in (StateMachineSettings, ProviderSettings, GatherSettings):
        load(model)
    return create_server(_caller.get, max_wait_seconds=MAX_WAIT_SECONDS)


def answer(server: MCPServer, event: dict[str, Any], backend_for: Callable[[str], CanvasBackend]) -> dict[str, Any]:
    """The REST proxy response to one MCP request: 401 without a valid key, else the SDK's answer."""
    try:
        account_id = authenticate(_api_key_headers(event.get("headers") or {}))
    except ServiceError as refused:
        logger.info("Request refused", extra={"status": refused.status_code, "error": refused.message})
        return _error(refused.status_code, refused.message)
    if event.get("httpMethod", "POST") != "POST":
        # Stateless: no stream to open with GET, no session to end with DELETE; the transport's answer is 405.
        response = _error(405, "Method not allowed: the MCP endpoint is stateless and takes POST only")
        response["headers"]["Allow"] = "POST"
        return response
    logger.append_keys(account_id=account_id)
    _caller.set(backend_for(account_id))
    try:
        return anyio.run(_serve, server, event)
    except Exception:
        logger.exception("Unexpected error")
        return _error(500, "Internal server error")


def _api_key_headers(headers: dict[str, str]) -> dict[str, str]:
    """The key as authentication reads it: X-API-KEY, or else a bearer token (how MCP clients send a key)."""
    if any(name.lower() == "x-api-key" for name in headers):
        return headers
    authorization = next((v for k, v in headers.items() if k.lower() == "authorization"), "")
    scheme, _, token = authorization.strip().partition(" ")
    return {"X-API-KEY": token.strip()} if scheme.lower() == "bearer" else {}


async def _serve(server: MCPServer, event: dict[str, Any]) -> dict[str, Any]:
    # A new transport per request: stateless, so nothing is kept between requests (which may reach other containers),
    # and a session manager runs once.
    server.streamable_http_app(
        stateless_http=True,
        json_response=not _asks_for_progress(event),
        max_request_body_size=MAX_REQUEST_BYTES,
        # DNS rebinding protects a server a browser can reach without credentials; every request here carries a key.
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    manager = server.session_manager
    body = event.get("body") or ""
    request_bytes = base64.b64decode(body) if event.get("isBase64Encoded") else body.encode("utf-8")
    status = 500
    response_headers: list[tuple[bytes, bytes]] = []
    chunks: list[bytes] = []
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            await anyio.sleep_forever()
        sent = True
        return {"type": "http.request", "body": request_bytes, "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        nonlocal status, response_headers
        if message["type"] == "http.response.start":
            status, response_headers = message["status"], list(message.get("headers") or [])
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body") or b"")

    async with manager.run():
        await manager.handle_request(_scope(event), receive, send)
    headers: dict[str, list[str]] = {}
    for name, value in response_headers:
        headers.setdefault(name.decode("latin-1"), []).append(value.decode("latin-1"))
    return {
        "statusCode": status,
        "multiValueHeaders": headers,
        "body": b"".join(chunks).decode("utf-8"),
        "isBase64Encoded": False,
    }


def _asks_for_progress(event: dict[str, Any]) -> bool:
    """Whether the request is a call carrying a progressToken from a client that reads event streams: it is then
    answered as one (its progress notifications, then its result), which API Gateway delivers whole when the call
    ends; any other request is answered with one JSON body."""
    headers = {k.lower(): v for k, v in (event.get("headers") or {}).items()}
    if "text/event-stream" not in headers.get("accept", ""):
        return False
    try:
        message = json.loads(event.get("body") or "") if not event.get("isBase64Encoded") else None
    except ValueError:
        return False
    params = message.get("params") if isinstance(message, dict) else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and meta.get("progressToken") is not None


def _scope(event: dict[str, Any]) -> dict[str, Any]:
    """The ASGI scope of the event's request (what an ASGI server would build from the HTTP request)."""
    multi = event.get("multiValueHeaders") or {k: [v] for k, v in (event.get("headers") or {}).items()}
    headers = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, values in multi.items() for v in values or []]
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": event.get("httpMethod", "POST"),
        "scheme": "https",
        "path": event.get("path", "/mcp"),
        "raw_path": event.get("path", "/mcp").encode("utf-8"),
        "root_path": "",
        "query_string": b"",
        "headers": headers,
        "server": ("localhost", 443),
        "client": None,
    }


def _error(status: int, message: str) -> dict[str, Any]:
    return {
        "statusCode": status,
        "headers": {"Content-Type": "application/json"},
        "body": json.dumps({"success": False, "error": message}),
        "isBase64Encoded": False,
    }
