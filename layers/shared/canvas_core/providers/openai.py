"""Any OpenAI-compatible chat-completions endpoint (OpenAI, Ollama, vLLM, LiteLLM, ...), with the standard
library only (no SDK to import on a cold start).

Configuration: `OPENAI_BASE_URL` (default https://api.openai.com/v1; Ollama is http://localhost:11434/v1),
the key in `OPENAI_API_KEY` or in the Secrets Manager secret `OPENAI_API_KEY_SECRET_ARN` (the secret string,
or a JSON object with `api_key`; read once per container), and the model per role as for Bedrock
(`roles.py`). Without a key no Authorization header is sent (local servers need none).

408, 409, 425, 429 (except an exhausted quota) and 5xx answers, a connection that cannot be made and one dropped
are retried here, honouring Retry-After, then raised as `BlockRetryableError`; other errors are `BlockFatalError`
with the endpoint's own message.

Every request sends `max_tokens`, the role's output cap (`roles.py`), or `max_completion_tokens` once the endpoint
has refused `max_tokens` asking for it (OpenAI's reasoning models), and waits for the answer as long as that cap
takes to generate (`call_timeout_seconds`). A call that times out waiting for the answer is not sent again: the
server may still be generating the first one, and a second would only queue behind it; it is `BlockFatalError`.
An answer with `finish_reason: "length"` was cut at the cap: `AnswerCutError`, not used.

A multimodal model describes an image (`describe_image`): a user message with a text part and an `image_url`
part holding the image as a data URL.

Structured answers (`complete_structured`, providers/structured.py) send the schema as `response_format`, in the
form OPENAI_STRUCTURED_OUTPUT names: `json_schema` (OpenAI's strict form, which vLLM, Ollama and llama.cpp's
server take too), `json_object` (llama-cpp-python's server: `{"type": "json_object", "schema": ...}`) or `none`.
An endpoint that refuses it is asked without it, and is not sent it again for that model.
"""

from __future__ import annotations

import base64
import json
import re
import urllib.error
import urllib.request
from functools import lru_cache
from typing import Any

from pydantic import BaseModel

from canvas_core.errors import BlockFatalError
from canvas_core.observability import tracer
from canvas_core.providers.base import AnswerCutError, Completion, fit_input
from canvas_core.providers.retry import TransientError, retry_backoff_seconds, with_retries
from canvas_core.providers.roles import call_timeout_seconds, max_output_tokens, model_for_role
from canvas_core.providers.structured import refused_constraint, schema_text, strict_schema
from canvas_core.settings import ProviderSettings, provider_settings

DEFAULT_BASE_URL = "https://api.openai.com/v1"
RETRYABLE_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})
# The field an endpoint's model takes the output cap in, when not `max_tokens` (learnt once per container).
_CAP_FIELDS: dict[tuple[str, str], str] = {}
# Endpoints and models that refused a structured-output constraint, and what they said (learnt once per container).
_UNCONSTRAINED: dict[tuple[str, str], str] = {}
# Endpoints and models that refused a schema with length and size bounds, and are sent it without them.
_PORTABLE: set[tuple[str, str]] = set()


class OpenAIProvider:
    name = "openai"
    DEFAULT_MODEL_ID = "gpt-4o-mini"

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        model_id: str | None = None,
        timeout_seconds: float | None = None,
        attempts: int = 3,
        backoff_seconds: float | None = None,
        structured_output: str | None = None,
    ):
        self.base_url = (base_url or DEFAULT_BASE_URL).rstrip("/")
        self._structured_output = structured_output  # else OPENAI_STRUCTURED_OUTPUT
        self.api_key = api_key
        self.model_id = model_id  # one model for every role, when given
        self.timeout_seconds = timeout_seconds  # else the time the call's output cap takes
        self.attempts = attempts
        self.backoff_seconds = retry_backoff_seconds() if backoff_seconds is None else backoff_seconds

    @classmethod
    def from_settings(cls, settings: ProviderSettings) -> OpenAIProvider:
        key = settings.openai_api_key or None
        if not key and settings.openai_api_key_secret_arn:
            key = _secret_api_key(settings.openai_api_key_secret_arn)
        return cls(base_url=settings.openai_base_url or None, api_key=key)

    def model_for(self, role: str) -> str:
        return self.model_id or model_for_role(role, self.DEFAULT_MODEL_ID)

    def complete(self, *, system: str, prompt: str, role: str) -> Completion:
        return self._chat(self.model_for(role), role, system, fit_input(system, prompt))

    def complete_structured(
        self, *, system: str, prompt: str, role: str, schema: type[BaseModel], name: str
    ) -> tuple[Completion, str]:
        """An answer constrained to `schema` (its JSON in the text), and why it was not constrained when not."""
        model_id = self.model_for(role)
        where = (self.base_url, model_id)
        form = self.structured_output
        ask = fit_input(system, f"{prompt}\n\nAnswer with one JSON object of the schema you are given.")
        if form == "none" or where in _UNCONSTRAINED:
            reason = _UNCONSTRAINED.get(where) or "OPENAI_STRUCTURED_OUTPUT is none"
            text_ask = fit_input(system, f"{prompt}\n\nAnswer with one JSON object of this JSON schema, and nothing "
                                         f"else:\n{schema_text(schema)}")  # fmt: skip
            return self._chat(model_id, role, system, text_ask), reason
        portable = where in _PORTABLE
        try:
            return self._chat(model_id, role, system, ask, response_format(form, schema, name, portable)), ""
        except BlockFatalError as exc:
            if not refused_constraint(str(exc)) or isinstance(exc, AnswerCutError):
                raise
            if portable:
                _UNCONSTRAINED[where] = f"the endpoint refused the schema constraint: {str(exc)[:200]}"
            else:
                _PORTABLE.add(where)  # first without the keywords some endpoints' strict mode refuses
            return self.complete_structured(system=system, prompt=prompt, role=role, schema=schema, name=name)

    def describe_image(self, *, system: str, prompt: str, image: bytes, image_format: str, role: str) -> Completion:
        """The model's words on an image (PNG, JPEG, GIF or WebP), sent as a data URL beside the prompt."""
        url = f"data:image/{image_format};base64,{base64.b64encode(image).decode()}"
        parts: list[dict[str, Any]] = [
            {"type": "text", "text": fit_input(system, prompt)},
            {"type": "image_url", "image_url": {"url": url}},
        ]
        return self._chat(self.model_for(role), role, system, parts)

    @property
    def structured_output(self) -> str:
        return self._structured_output or provider_settings().openai_structured_output

    @tracer.capture_method
    def _chat(
        self,
        model_id: str,
        role: str,
        system: str,
        content: str | list[dict[str, Any]],
        response_format: dict[str, Any] | None = None,
    ) -> Completion:
        messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
        messages.append({"role": "user", "content": content})
        cap = max_output_tokens(role)
        timeout = self.timeout_seconds or call_timeout_seconds(cap)
        where = (self.base_url, model_id)
        field = _CAP_FIELDS.get(where, "max_tokens")
        extra = {"response_format": response_format} if response_format else {}
        try:
            payload = self._send(model_id, {"model": model_id, "messages": messages, field: cap, **extra}, timeout)
        except BlockFatalError as exc:
            if field != "max_tokens" or "max_completion_tokens" not in str(exc):
                raise
            # OpenAI's reasoning models take the cap as max_completion_tokens and refuse max_tokens.
            _CAP_FIELDS[where] = "max_completion_tokens"
            request = {"model": model_id, "messages": messages, _CAP_FIELDS[where]: cap, **extra}
            payload = self._send(model_id, request, timeout)
        try:
            choice = payload["choices"][0]
            text = choice["message"].get("content") or ""
        except (KeyError, IndexError, TypeError, AttributeError):
            raise BlockFatalError(f"{self._where()} answered {model_id} without a message") from None
        if choice.get("finish_reason") == "length":
            raise AnswerCutError(model_id, role, cap)
        usage = payload.get("usage") or {}
        return Completion(
            text=text,
            model_id=model_id,
            input_tokens=int(usage.get("prompt_tokens") or 0),
            output_tokens=int(usage.get("completion_tokens") or 0),
        )

    def _send(self, model_id: str, request: dict[str, Any], timeout: float) -> dict[str, Any]:
        body = json.dumps(request).encode()
        return with_retries(
            lambda: self._post(model_id, body, timeout), attempts=self.attempts, backoff_seconds=self.backoff_seconds
        )

    def _post(self, model_id: str, body: bytes, timeout: float) -> dict[str, Any]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(f"{self.base_url}/chat/completions", data=body, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                answer: dict[str, Any] = json.loads(response.read())
                return answer
        except urllib.error.HTTPError as exc:
            raise self._error(exc, model_id) from exc
        except TimeoutError as exc:
            # Sent, and no answer in time (urllib wraps a timeout while connecting in URLError instead).
            raise BlockFatalError(
                f"{self._where()} did not answer {model_id} within {timeout:.0f} s; not sent again, as the server "
                "may still be generating (lower the output cap or raise MODEL_TIMEOUT_SECONDS)"
            ) from exc
        except (urllib.error.URLError, ConnectionError) as exc:
            reason = getattr(exc, "reason", exc)
            raise TransientError(f"{self._where()} unreachable for {model_id}: {reason}") from exc
        except json.JSONDecodeError as exc:
            raise BlockFatalError(f"{self._where()} answered {model_id} with something that is not JSON") from exc

    def _error(self, exc: urllib.error.HTTPError, model_id: str) -> Exception:
        detail, code = _error_detail(exc)
        message = f"{self._where()} answered {exc.code} for {model_id}: {detail}".rstrip(": ")
        if exc.code == 429 and code == "insufficient_quota":
            return BlockFatalError(message)
        if exc.code in RETRYABLE_STATUSES:
            return TransientError(message, retry_after=_retry_after(exc.headers.get("Retry-After")))
        if exc.code == 404:
            message += " (is the model id one this endpoint serves? set PlannerModelId/WriterModelId)"
        return BlockFatalError(message)

    def _where(self) -> str:
        return f"The OpenAI-compatible endpoint {self.base_url}"


def response_format(form: str, schema: type[BaseModel], name: str, portable: bool = False) -> dict[str, Any]:
    """`response_format` constraining the answer to `schema`: OpenAI's strict json_schema form, or llama-cpp-python's
    json_object form with a schema; `portable`, without the length and size bounds some strict modes refuse (the
    answer is still validated with them)."""
    document = strict_schema(schema, portable=portable)
    if form == "json_object":
        return {"type": "json_object", "schema": document}
    safe_name = re.sub(r"[^A-Za-z0-9_-]", "_", name)[:64] or "answer"
    return {"type": "json_schema", "json_schema": {"name": safe_name, "strict": True, "schema": document}}


def _error_detail(exc: urllib.error.HTTPError) -> tuple[str, str | None]:
    try:
        data = json.loads(exc.read() or b"{}")
    except (json.JSONDecodeError, OSError):
        return exc.reason or "", None
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict):
        return str(error.get("message") or exc.reason or ""), error.get("code")
    if isinstance(error, str):
        return error, None
    return str(exc.reason or ""), None


def _retry_after(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


@lru_cache(maxsize=4)
def _secret_api_key(secret_arn: str) -> str:
    from canvas_core.secrets import secret_api_key

    return secret_api_key(secret_arn, "OpenAI API key", key_fields=("OPENAI_API_KEY",))
