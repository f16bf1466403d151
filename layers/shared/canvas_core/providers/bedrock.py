"""Amazon Bedrock through the Converse API, with a model id per agent role (`roles.py`).

Throttling, a busy or failing model, a timeout or a dropped connection is retried here (`retry.py`) and then
raised as `BlockRetryableError`; a refused request (validation, access, an unknown model) is `BlockFatalError`
with Bedrock's own message. The client is built once per container and endpoint, with botocore's retries off
(they would multiply ours) and a read timeout long enough for a long answer.
`AWS_ENDPOINT_URL_BEDROCK_RUNTIME` points it elsewhere (a test's fake server, a VPC endpoint).
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, ConnectionError, ReadTimeoutError

from canvas_core.errors import BlockFatalError
from canvas_core.providers.base import Completion
from canvas_core.providers.retry import TransientError, retry_backoff_seconds, with_retries
from canvas_core.providers.roles import model_for_role

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
    ):
        self.model_id = model_id  # one model for every role, when given
        self.max_tokens = max_tokens
        self.attempts = attempts
        self.backoff_seconds = retry_backoff_seconds() if backoff_seconds is None else backoff_seconds
        self._runtime = runtime

    def model_for(self, role: str) -> str:
        return self.model_id or model_for_role(role, self.DEFAULT_MODEL_ID)

    def complete(self, *, system: str, prompt: str, role: str) -> Completion:
        model_id = self.model_for(role)
        runtime = self._runtime or bedrock_runtime(
            os.environ.get("AWS_ENDPOINT_URL_BEDROCK_RUNTIME"), os.environ.get("AWS_REGION")
        )
        request = {
            "modelId": model_id,
            "messages": [{"role": "user", "content": [{"text": prompt}]}],
            "inferenceConfig": {"maxTokens": self.max_tokens},
        }
        if system:
            request["system"] = [{"text": system}]
        response = with_retries(
            lambda: self._converse(runtime, model_id, request),
            attempts=self.attempts,
            backoff_seconds=self.backoff_seconds,
        )
        content = response.get("output", {}).get("message", {}).get("content", [])
        usage = response.get("usage", {})
        return Completion(
            text="".join(part.get("text", "") for part in content),
            model_id=model_id,
            input_tokens=int(usage.get("inputTokens", 0)),
            output_tokens=int(usage.get("outputTokens", 0)),
        )

    @staticmethod
    def _converse(runtime: Any, model_id: str, request: dict[str, Any]) -> dict[str, Any]:
        try:
            return runtime.converse(**request)
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
