"""Amazon Bedrock through the Converse API, with a model id per agent role (`roles.py`).

Throttling, a busy or failing model, a timeout or a dropped connection is retried here (`retry.py`) and then
raised as `BlockRetryableError`; a refused request (validation, access, an unknown model) is `BlockFatalError`
with Bedrock's own message. The client is built once per container, endpoint and timeout, with botocore's retries
off (they would multiply ours).

Every call sends the role's output cap as `inferenceConfig.maxTokens` (`roles.py`) and waits as long as that cap
takes to generate (`call_timeout_seconds`). A call that times out reading the answer is not sent again (Bedrock
may still be generating it): `BlockFatalError`; one that could not connect is retried. An answer with
`stopReason: "max_tokens"` was cut at the cap: `AnswerCutError`, not used.
`AWS_ENDPOINT_URL_BEDROCK_RUNTIME` points it elsewhere (a test's fake server, a VPC endpoint).

Structured answers (`complete_structured`, providers/structured.py) go through Converse's tool use: one tool whose
`inputSchema` is the schema, and `toolChoice` forcing it; the tool call's input is the answer. A model that does not
take tools (Bedrock refuses the request) is asked without, for the rest of the container.

Besides text, a multimodal model describes an image (`describe_image`, a Converse image block), and the image
model that `IMAGE_MODEL_ID` names draws one (`generate_image`, InvokeModel with the TEXT_IMAGE request).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, ConnectionError, ReadTimeoutError
from pydantic import BaseModel

from canvas_core.errors import BlockFatalError
from canvas_core.observability import tracer
from canvas_core.providers.base import AnswerCutError, Completion, fit_input
from canvas_core.providers.retry import TransientError, retry_backoff_seconds, with_retries
from canvas_core.providers.roles import call_timeout_seconds, max_output_tokens, model_for_role
from canvas_core.providers.structured import refused_constraint, schema_text, strict_schema
from canvas_core.settings import provider_settings

RETRYABLE_CODES = frozenset(
    {
        "ThrottlingException",
        "TooManyRequestsException",
        "ServiceUnavailableException",
        "ModelNotReadyException",
        "InternalServerException",
        "ModelTimeoutException",
        "ModelStreamErrorException",
    }
)
IMAGE_FORMATS = frozenset({"png", "jpeg", "gif", "webp"})  # what a Converse image block takes
# Models that refused tool use, and what Bedrock said (learnt once per container).
_NO_TOOLS: dict[str, str] = {}


@lru_cache(maxsize=8)  # a client per endpoint and read timeout: a few roles' caps, the image model's
def bedrock_runtime(endpoint_url: str | None, region: str | None, read_timeout: float = 300) -> Any:
    config = Config(retries={"total_max_attempts": 1}, connect_timeout=10, read_timeout=read_timeout)
    return boto3.client("bedrock-runtime", region_name=region, endpoint_url=endpoint_url or None, config=config)


class BedrockProvider:
    name = "bedrock"
    DEFAULT_MODEL_ID = "amazon.nova-lite-v1:0"

    def __init__(
        self,
        model_id: str | None = None,
        runtime: Any = None,
        max_tokens: int | None = None,
        attempts: int = 3,
        backoff_seconds: float | None = None,
        image_model_id: str | None = None,
    ):
        self.model_id = model_id  # one model for every role, when given
        self.image_model_id = image_model_id  # else IMAGE_MODEL_ID
        self.max_tokens = max_tokens  # one output cap for every role, when given
        self.attempts = attempts
        self.backoff_seconds = retry_backoff_seconds() if backoff_seconds is None else backoff_seconds
        self._runtime = runtime

    def model_for(self, role: str) -> str:
        return self.model_id or model_for_role(role, self.DEFAULT_MODEL_ID)

    def complete(self, *, system: str, prompt: str, role: str) -> Completion:
        return self._converse(self.model_for(role), role, system, [{"text": fit_input(system, prompt)}])

    def describe_image(self, *, system: str, prompt: str, image: bytes, image_format: str, role: str) -> Completion:
        """The model's words on an image (PNG, JPEG, GIF or WebP), sent as a Converse image block before the prompt."""
        model_id = self.model_for(role)
        if image_format not in IMAGE_FORMATS:
            raise BlockFatalError(f"Bedrock takes PNG, JPEG, GIF or WebP images, not {image_format.upper()}")
        block = {"image": {"format": image_format, "source": {"bytes": image}}}
        return self._converse(model_id, role, system, [block, {"text": fit_input(system, prompt)}])

    def complete_structured(
        self, *, system: str, prompt: str, role: str, schema: type[BaseModel], name: str
    ) -> tuple[Completion, str]:
        """An answer constrained to `schema` through a forced tool (its input as the text), and why it was not
        constrained when not."""
        model_id = self.model_for(role)
        tool = re.sub(r"[^A-Za-z0-9_-]", "_", name)[:64] or "answer"
        if model_id in _NO_TOOLS:
            ask = (
                f"{prompt}\n\nAnswer with one JSON object of this JSON schema, and nothing else:\n{schema_text(schema)}"
            )
            return self._converse(model_id, role, system, [{"text": fit_input(system, ask)}]), _NO_TOOLS[model_id]
        tools = tool_config(tool, schema)
        ask = f"{prompt}\n\nAnswer by calling the tool {tool}."
        try:
            return self._converse(model_id, role, system, [{"text": fit_input(system, ask)}], tools), ""
        except BlockFatalError as exc:
            if not refused_constraint(str(exc)) or isinstance(exc, AnswerCutError):
                raise
            _NO_TOOLS[model_id] = f"the model refused the schema's tool: {str(exc)[:200]}"
            return self.complete_structured(system=system, prompt=prompt, role=role, schema=schema, name=name)

    @property
    def generate_image(self) -> Callable[..., tuple[bytes, str]] | None:
        """`generate_image(*, prompt, width, height) -> (image bytes, model id)` with the image model IMAGE_MODEL_ID
        names; None when it names none, so that image-block draws without a model (image_generate.py)."""
        model_id = self.image_model_id or provider_settings().image_model_id
        if not model_id:
            return None
        return BedrockImageModel(model_id, self._runtime, self.attempts, self.backoff_seconds).generate_image

    @tracer.capture_method
    def _converse(
        self,
        model_id: str,
        role: str,
        system: str,
        content: list[dict[str, Any]],
        tools: dict[str, Any] | None = None,
    ) -> Completion:
        cap = self.max_tokens or max_output_tokens(role)
        request: dict[str, Any] = {
            "modelId": model_id,
            "messages": [{"role": "user", "content": content}],
            "inferenceConfig": {"maxTokens": cap},
        }
        if tools:
            request["toolConfig"] = tools
        if system:
            request["system"] = [{"text": system}]
        response = call_bedrock(
            model_id,
            lambda runtime: runtime.converse(**request),
            self._runtime,
            self.attempts,
            self.backoff_seconds,
            read_timeout=call_timeout_seconds(cap),
        )
        if response.get("stopReason") == "max_tokens":
            raise AnswerCutError(model_id, role, cap)
        answer = response.get("output", {}).get("message", {}).get("content", [])
        usage = response.get("usage", {})
        used = [part["toolUse"].get("input") for part in answer if isinstance(part.get("toolUse"), dict)]
        text = json.dumps(used[0]) if tools and used else "".join(part.get("text", "") for part in answer)
        return Completion(
            text=text,
            model_id=model_id,
            input_tokens=int(usage.get("inputTokens", 0)),
            output_tokens=int(usage.get("outputTokens", 0)),
        )


def tool_config(name: str, schema: type[BaseModel]) -> dict[str, Any]:
    """Converse's toolConfig: one tool whose input is `schema`, and the choice of it forced."""
    return {
        "tools": [
            {
                "toolSpec": {
                    "name": name,
                    "description": f"Give the answer as {name}.",
                    "inputSchema": {"json": strict_schema(schema)},
                }
            }
        ],
        "toolChoice": {"tool": {"name": name}},
    }


class BedrockImageModel:
    """Bedrock's text-to-image models that take the TEXT_IMAGE request (Nova Canvas, Titan Image Generator)."""

    def __init__(self, model_id: str, runtime: Any = None, attempts: int = 3, backoff_seconds: float | None = None):
        self.model_id = model_id
        self.attempts = attempts
        self.backoff_seconds = retry_backoff_seconds() if backoff_seconds is None else backoff_seconds
        self._runtime = runtime

    def generate_image(self, *, prompt: str, width: int, height: int) -> tuple[bytes, str]:
        body = json.dumps(
            {
                "taskType": "TEXT_IMAGE",
                "textToImageParams": {"text": prompt},
                "imageGenerationConfig": {"numberOfImages": 1, "width": width, "height": height, "quality": "standard"},
            }
        )
        response = call_bedrock(
            self.model_id,
            lambda runtime: runtime.invoke_model(
                modelId=self.model_id, body=body, accept="application/json", contentType="application/json"
            ),
            self._runtime,
            self.attempts,
            self.backoff_seconds,
        )
        try:
            payload = json.loads(response["body"].read())
        except (KeyError, ValueError, OSError) as exc:
            raise BlockFatalError(f"{self.model_id} answered with something that is not JSON") from exc
        if payload.get("error") or not payload.get("images"):
            raise BlockFatalError(f"{self.model_id} made no image: {payload.get('error') or 'empty answer'}")
        return base64.b64decode(payload["images"][0]), self.model_id


def call_bedrock[T](
    model_id: str,
    call: Callable[[Any], T],
    runtime: Any,
    attempts: int,
    backoff_seconds: float,
    read_timeout: float = 300,
) -> T:
    """`call(runtime)` with the container's client unless one is given, retried when Bedrock fails in passing."""
    if runtime is None:
        settings = provider_settings()
        runtime = bedrock_runtime(settings.bedrock_endpoint_url or None, settings.aws_region or None, read_timeout)
    return with_retries(lambda: _attempt(model_id, call, runtime), attempts=attempts, backoff_seconds=backoff_seconds)


def _attempt[T](model_id: str, call: Callable[[Any], T], runtime: Any) -> T:
    try:
        return call(runtime)
    except ClientError as exc:
        error = exc.response.get("Error", {})
        code = error.get("Code", "")
        message = f"Bedrock {code or 'error'} for {model_id}: {error.get('Message', '')}".rstrip(": ")
        if code in RETRYABLE_CODES or exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) >= 500:
            raise TransientError(message) from exc
        raise BlockFatalError(message) from exc
    except ReadTimeoutError as exc:
        # Sent, and no answer in time: Bedrock may still be generating it, so it is not sent again.
        raise BlockFatalError(
            f"Bedrock did not answer {model_id} in time ({exc}); not sent again, as the model may still be "
            "generating (lower the output cap or raise MODEL_TIMEOUT_SECONDS)"
        ) from exc
    except ConnectionError as exc:
        raise TransientError(f"Bedrock unreachable for {model_id}: {exc}") from exc
    except BotoCoreError as exc:
        raise BlockFatalError(f"Bedrock request for {model_id} failed: {exc}") from exc
