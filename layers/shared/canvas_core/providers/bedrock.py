"""Amazon Bedrock through the Converse API, with a model id per agent role (`roles.py`).

Throttling, a busy or failing model, a timeout or a dropped connection is retried here (`retry.py`) and then
raised as `BlockRetryableError`; a refused request (validation, access, an unknown model) is `BlockFatalError`
with Bedrock's own message. The client is built once per container and endpoint, with botocore's retries off
(they would multiply ours) and a read timeout long enough for a long answer.
`AWS_ENDPOINT_URL_BEDROCK_RUNTIME` points it elsewhere (a test's fake server, a VPC endpoint).

Besides text, a multimodal model describes an image (`describe_image`, a Converse image block), and the image
model that `IMAGE_MODEL_ID` names draws one (`generate_image`, InvokeModel with the TEXT_IMAGE request).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, ConnectionError, ReadTimeoutError

from canvas_core.errors import BlockFatalError
from canvas_core.observability import tracer
from canvas_core.providers.base import Completion
from canvas_core.providers.retry import TransientError, retry_backoff_seconds, with_retries
from canvas_core.providers.roles import model_for_role
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


@lru_cache(maxsize=4)
def bedrock_runtime(endpoint_url: str | None, region: str | None) -> Any:
    config = Config(retries={"total_max_attempts": 1}, connect_timeout=10, read_timeout=300)
    return boto3.client("bedrock-runtime", region_name=region, endpoint_url=endpoint_url or None, config=config)


class BedrockProvider:
    name = "bedrock"
    DEFAULT_MODEL_ID = "amazon.nova-lite-v1:0"

    def __init__(
        self,
        model_id: str | None = None,
        runtime: Any = None,
        max_tokens: int = 4096,
        attempts: int = 3,
        backoff_seconds: float | None = None,
        image_model_id: str | None = None,
    ):
        self.model_id = model_id  # one model for every role, when given
        self.image_model_id = image_model_id  # else IMAGE_MODEL_ID
        self.max_tokens = max_tokens
        self.attempts = attempts
        self.backoff_seconds = retry_backoff_seconds() if backoff_seconds is None else backoff_seconds
        self._runtime = runtime

    def model_for(self, role: str) -> str:
        return self.model_id or model_for_role(role, self.DEFAULT_MODEL_ID)

    def complete(self, *, system: str, prompt: str, role: str) -> Completion:
        return self._converse(self.model_for(role), system, [{"text": prompt}])

    def describe_image(self, *, system: str, prompt: str, image: bytes, image_format: str, role: str) -> Completion:
        """The model's words on an image (PNG, JPEG, GIF or WebP), sent as a Converse image block before the prompt."""
        model_id = self.model_for(role)
        if image_format not in IMAGE_FORMATS:
            raise BlockFatalError(f"Bedrock takes PNG, JPEG, GIF or WebP images, not {image_format.upper()}")
        block = {"image": {"format": image_format, "source": {"bytes": image}}}
        return self._converse(model_id, system, [block, {"text": prompt}])

    @property
    def generate_image(self) -> Callable[..., tuple[bytes, str]] | None:
        """`generate_image(*, prompt, width, height) -> (image bytes, model id)` with the image model IMAGE_MODEL_ID
        names; None when it names none, so that image-block draws without a model (image_generate.py)."""
        model_id = self.image_model_id or provider_settings().image_model_id
        if not model_id:
            return None
        return BedrockImageModel(model_id, self._runtime, self.attempts, self.backoff_seconds).generate_image

    @tracer.capture_method
    def _converse(self, model_id: str, system: str, content: list[dict[str, Any]]) -> Completion:
        request: dict[str, Any] = {
            "modelId": model_id,
            "messages": [{"role": "user", "content": content}],
            "inferenceConfig": {"maxTokens": self.max_tokens},
        }
        if system:
            request["system"] = [{"text": system}]
        response = call_bedrock(
            model_id, lambda runtime: runtime.converse(**request), self._runtime, self.attempts, self.backoff_seconds
        )
        answer = response.get("output", {}).get("message", {}).get("content", [])
        usage = response.get("usage", {})
        return Completion(
            text="".join(part.get("text", "") for part in answer),
            model_id=model_id,
            input_tokens=int(usage.get("inputTokens", 0)),
            output_tokens=int(usage.get("outputTokens", 0)),
        )


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


def call_bedrock[T](model_id: str, call: Callable[[Any], T], runtime: Any, attempts: int, backoff_seconds: float) -> T:
    """`call(runtime)` with the container's client unless one is given, retried when Bedrock fails in passing."""
    if runtime is None:
        settings = provider_settings()
        runtime = bedrock_runtime(settings.bedrock_endpoint_url or None, settings.aws_region or None)
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
    except (ConnectionError, ReadTimeoutError) as exc:
        raise TransientError(f"Bedrock unreachable for {model_id}: {exc}") from exc
    except BotoCoreError as exc:
        raise BlockFatalError(f"Bedrock request for {model_id} failed: {exc}") from exc
