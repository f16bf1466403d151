"""Amazon Bedrock through the Converse API."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from canvas_core.adapters.aws import client
from canvas_core.errors import BlockFatalError, BlockRetryableError
from canvas_core.providers.base import Completion

_RETRYABLE = {"ThrottlingException", "ServiceUnavailableException", "ModelNotReadyException", "InternalServerException"}


class BedrockProvider:
    DEFAULT_MODEL_ID = "amazon.nova-lite-v1:0"

    def __init__(self, model_id: str, runtime: Any = None, max_tokens: int = 4096):
        self.model_id = model_id
        self.max_tokens = max_tokens
        self._runtime = runtime

    def complete(self, *, system: str, prompt: str, role: str) -> Completion:
        runtime = self._runtime or client("bedrock-runtime")
        try:
            response = runtime.converse(
                modelId=self.model_id,
                system=[{"text": system}],
                messages=[{"role": "user", "content": [{"text": prompt}]}],
                inferenceConfig={"maxTokens": self.max_tokens},
            )
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            message = f"Bedrock {code} for {self.model_id}: {exc.response.get('Error', {}).get('Message', '')}"
            raise (BlockRetryableError if code in _RETRYABLE else BlockFatalError)(message) from exc
        content = response["output"]["message"]["content"]
        usage = response.get("usage", {})
        return Completion(
            text="".join(part.get("text", "") for part in content),
            model_id=self.model_id,
            input_tokens=int(usage.get("inputTokens", 0)),
            output_tokens=int(usage.get("outputTokens", 0)),
        )
