"""Fake model servers on 127.0.0.1 that speak the real wire formats, for the providers' tests:

- `FakeBedrock`: the Bedrock Runtime Converse API (`POST /model/{modelId}/converse`), reached through boto3's
  bedrock-runtime client with `endpoint_url` (or `AWS_ENDPOINT_URL_BEDROCK_RUNTIME`) pointing at it; errors as
  Bedrock sends them (`x-amzn-ErrorType` header, `{"message"}` body).
- `FakeOpenAI`: an OpenAI-compatible `POST {base}/chat/completions`; errors as `{"error": {...}}` with
  Retry-After on 429.

Both take images beside the prompt as their APIs do (a Converse `image` block, whose bytes boto3 sends in
base64; a chat-completions `image_url` part with a data URL) and record them decoded (`Call.images`).

Each records the calls it got (`calls`: model, system, prompt, images, headers), answers with `reply(call) -> text`
(by default a plan for the Planner and a short cited answer otherwise), counts tokens deterministically
(`tokens(text)`), and fails the next calls on demand (`fail_next(status, code, times)`).

Like a small model that would otherwise generate until its context is full, each refuses (400) a request that
sends no output cap (`max_tokens` / `max_completion_tokens`; Converse's `inferenceConfig.maxTokens`), and cuts a
reply longer than the cap to the cap, saying so as the real APIs do (`finish_reason: "length"`;
`stopReason: "max_tokens"`).

    with FakeBedrock() as bedrock:
        client = boto3.client("bedrock-runtime", endpoint_url=bedrock.url, ...)
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self
from urllib.parse import unquote

PLANNER_MARK = "You are the Planner agent"
NO_CAP = "The request sets no output cap (max_tokens); this server refuses to generate without one."
IMAGE_TOKENS = 100  # what the fakes count for each image a call carries
DEFAULT_PLAN = {
    "steps": [
        {"id": "s1", "type": "prompt-block", "title": "Key facts", "persona": "Analyst", "inputs": []},
        {"id": "s2", "type": "text-block", "title": "Answer", "persona": "Writer", "inputs": ["s1"]},
    ]
}


@dataclass(frozen=True)
class Image:
    format: str  # png, jpeg, gif, webp
    data: bytes


@dataclass
class Call:
    model: str
    system: str
    prompt: str
    headers: dict[str, str]
    body: dict[str, Any]
    images: list[Image] = field(default_factory=list)


@dataclass
class Failure:
    status: int
    code: str
    message: str
    retry_after: str | None = None
    when: Callable[[Call], bool] | None = None  # only calls it matches; any call when None


def tokens(text: str) -> int:
    """The fake's token count: one per word, so tests can predict usage."""
    return len(text.split())


def input_tokens(call: Call) -> int:
    """The fake's count of what a call sent: its words and a fixed amount per image."""
    return tokens(call.system + " " + call.prompt) + IMAGE_TOKENS * len(call.images)


def default_reply(call: Call) -> str:
    if PLANNER_MARK in call.system:
        return "Here is the plan:\n```json\n" + json.dumps(DEFAULT_PLAN) + "\n```"
    return f"Answer from {call.model}: tide pools hold anemones and crabs [1]."


@dataclass
class _Script:
    reply: Callable[[Call], str] = default_reply
    calls: list[Call] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    raw: list[bytes] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class _FakeServer:
    def __init__(self, reply: Callable[[Call], str] | None = None):
        self.script = _Script(reply=reply or default_reply)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- what tests use

    @property
    def calls(self) -> list[Call]:
        return self.script.calls

    def replies(self, reply: Callable[[Call], str]) -> None:
        self.script.reply = reply

    def fail_next(
        self,
        status: int,
        code: str,
        times: int = 1,
        message: str = "",
        retry_after: str | None = None,
        when: Callable[[Call], bool] | None = None,
    ) -> None:
        """Fail the next `times` calls (those `when` matches) with this status and error code."""
        self.script.failures += [Failure(status, code, message or f"{code} (fake)", retry_after, when)] * times

    def answer_raw_next(self, body: bytes) -> None:
        """The next call is answered 200 with these bytes, whatever they are (a proxy's HTML page, say)."""
        self.script.raw.append(body)

    @property
    def url(self) -> str:
        assert self._server is not None, "the fake server is not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> Self:
        handler = self._handler()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None):
        assert self._server is not None and self._thread is not None
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
        self._server = None

    # -- what subclasses say

    def _parse(self, path: str, body: dict[str, Any], headers: dict[str, str]) -> Call | None:
        raise NotImplementedError

    def _answer(self, call: Call, text: str) -> dict[str, Any]:
        raise NotImplementedError

    def _error(self, failure: Failure) -> tuple[dict[str, str], dict[str, Any]]:
        raise NotImplementedError

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                headers = {k.lower(): v for k, v in self.headers.items()}
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    body = {}
                call = fake._parse(self.path, body, headers)
                if call is None:
                    return self._send(404, {}, {"message": f"no route {self.path}"})
                with fake.script.lock:
                    fake.script.calls.append(call)
                    failure = next((f for f in fake.script.failures if f.when is None or f.when(call)), None)
                    if failure is not None:
                        fake.script.failures.remove(failure)
                    raw = fake.script.raw.pop(0) if fake.script.raw and failure is None else None
                if raw is not None:
                    return self._send_bytes(200, "text/html", raw)
                if failure is not None:
                    extra, payload = fake._error(failure)
                    return self._send(failure.status, extra, payload)
                auth = fake._refuse(headers)
                if auth is not None:
                    return self._send(401, {}, auth)
                if fake._cap(call) is None:
                    return self._send(400, *fake._error(Failure(400, "invalid_request_error", NO_CAP)))
                self._send(200, {}, fake._answer(call, fake.script.reply(call)))

            def _send(self, status: int, extra: dict[str, str], payload: dict[str, Any]) -> None:
                self._send_bytes(status, "application/json", json.dumps(payload).encode(), extra)

            def _send_bytes(self, status: int, kind: str, data: bytes, extra: dict[str, str] | None = None) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", kind)
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in (extra or {}).items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client stopped waiting (a test of timeouts): the answer has nowhere to go

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler

    def _refuse(self, headers: dict[str, str]) -> dict[str, Any] | None:
        return None

    def _cap(self, call: Call) -> int | None:
        """The output cap the call sent, None when it sent none."""
        raise NotImplementedError

    def _generate(self, call: Call, text: str) -> tuple[str, bool]:
        """The reply as the model gives it: at most the call's cap in tokens; True when it was cut there."""
        cap = self._cap(call) or 0
        words = text.split(" ")
        if tokens(text) <= cap:
            return text, False
        kept: list[str] = []
        for word in words:
            if tokens(" ".join([*kept, word])) > cap:
                break
            kept.append(word)
        return " ".join(kept), True


class FakeBedrock(_FakeServer):
    """Bedrock Runtime's Converse operation."""

    def _parse(self, path: str, body: dict[str, Any], headers: dict[str, str]) -> Call | None:
        parts = path.split("/")
        if len(parts) != 4 or parts[1] != "model" or parts[3] != "converse":
            return None
        system = "".join(s.get("text", "") for s in body.get("system", []))
        content = [c for m in body.get("messages", []) for c in m.get("content", [])]
        prompt = "".join(c.get("text", "") for c in content)
        images = [
            Image(c["image"].get("format", ""), base64.b64decode(c["image"].get("source", {}).get("bytes", "")))
            for c in content
            if "image" in c
        ]
        return Call(model=unquote(parts[2]), system=system, prompt=prompt, headers=headers, body=body, images=images)

    def _cap(self, call: Call) -> int | None:
        cap = call.body.get("inferenceConfig", {}).get("maxTokens")
        return cap if isinstance(cap, int) and cap > 0 else None

    def _answer(self, call: Call, text: str) -> dict[str, Any]:
        text, cut = self._generate(call, text)
        used_in, used_out = input_tokens(call), tokens(text)
        tools = call.body.get("toolConfig", {}).get("tools", [])
        content: list[dict[str, Any]] = [{"text": text}]
        try:
            given = json.loads(text) if tools and not cut else None
        except json.JSONDecodeError:
            given = None  # a model that answers in words despite the forced tool
        if isinstance(given, dict):
            name = tools[0]["toolSpec"]["name"]
            content = [{"toolUse": {"toolUseId": "tooluse_fake", "name": name, "input": given}}]
        return {
            "output": {"message": {"role": "assistant", "content": content}},
            "stopReason": "max_tokens" if cut else "tool_use" if isinstance(given, dict) else "end_turn",
            "usage": {"inputTokens": used_in, "outputTokens": used_out, "totalTokens": used_in + used_out},
            "metrics": {"latencyMs": 12},
        }

    def _error(self, failure: Failure) -> tuple[dict[str, str], dict[str, Any]]:
        return {"x-amzn-ErrorType": f"{failure.code}:http://internal.amazon.com/coral/com.amazon.bedrock/"}, {
            "message": failure.message
        }


class FakeOpenAI(_FakeServer):
    """An OpenAI-compatible chat-completions endpoint under `/v1`; with `api_key`, it refuses other keys."""

    def __init__(self, reply: Callable[[Call], str] | None = None, api_key: str | None = None):
        super().__init__(reply)
        self.api_key = api_key

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def _parse(self, path: str, body: dict[str, Any], headers: dict[str, str]) -> Call | None:
        if path != "/v1/chat/completions":
            return None
        messages = body.get("messages", [])
        system = "".join(m.get("content", "") for m in messages if m.get("role") == "system")
        parts: list[dict[str, Any]] = []  # a user message's content: a string, or text and image_url parts
        for message in messages:
            if message.get("role") == "user":
                content = message.get("content") or ""
                parts += content if isinstance(content, list) else [{"type": "text", "text": content}]
        prompt = "".join(p.get("text", "") for p in parts if p.get("type") == "text")
        images = [_data_url(p.get("image_url", {}).get("url", "")) for p in parts if p.get("type") == "image_url"]
        return Call(
            model=body.get("model", ""), system=system, prompt=prompt, headers=headers, body=body, images=images
        )

    def _refuse(self, headers: dict[str, str]) -> dict[str, Any] | None:
        if self.api_key and headers.get("authorization") != f"Bearer {self.api_key}":
            return {
                "error": {
                    "message": "Incorrect API key provided.",
                    "type": "invalid_request_error",
                    "code": "invalid_api_key",
                }
            }
        return None

    def _cap(self, call: Call) -> int | None:
        cap = call.body.get("max_completion_tokens", call.body.get("max_tokens"))
        return cap if isinstance(cap, int) and cap > 0 else None

    def _answer(self, call: Call, text: str) -> dict[str, Any]:
        text, cut = self._generate(call, text)
        used_in, used_out = input_tokens(call), tokens(text)
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": call.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "length" if cut else "stop",
                }
            ],
            "usage": {"prompt_tokens": used_in, "completion_tokens": used_out, "total_tokens": used_in + used_out},
        }

    def _error(self, failure: Failure) -> tuple[dict[str, str], dict[str, Any]]:
        extra = {"Retry-After": failure.retry_after} if failure.retry_after is not None else {}
        return extra, {"error": {"message": failure.message, "type": "requests", "code": failure.code}}


def _data_url(url: str) -> Image:
    """An image from `data:image/<format>;base64,<data>`; anything else is recorded with no format and no bytes."""
    head, _, data = url.partition(",")
    if not (head.startswith("data:image/") and head.endswith(";base64")):
        return Image(format="", data=b"")
    try:
        return Image(format=head[len("data:image/") : -len(";base64")], data=base64.b64decode(data, validate=True))
    except binascii.Error:
        return Image(format="", data=b"")
