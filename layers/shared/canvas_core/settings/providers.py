"""The model providers' settings (docs/providers.md): read by the blocks and by the planner."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import field_validator

from canvas_core.settings.base import EnvSettings, env, env_ending

ModelProviderName = Literal["offline", "bedrock", "openai"]


class ProviderSettings(EnvSettings):
    model_provider: ModelProviderName = env("MODEL_PROVIDER", "offline")
    # The model of each role, by variable name: PLANNER_MODEL_ID, WRITER_MODEL_ID, ... (providers/roles.py).
    model_ids: dict[str, str] = env_ending("_MODEL_ID")
    # The Bedrock image model image-block draws with; none when empty.
    image_model_id: str = env("IMAGE_MODEL_ID", "")
    # The first retry's backoff ceiling; it doubles per attempt (providers/retry.py).
    model_retry_backoff_seconds: float = env("MODEL_RETRY_BACKOFF_SECONDS", 1.0, ge=0)
    openai_base_url: str = env("OPENAI_BASE_URL", "")
    # The key itself wins over the secret holding it (providers/openai.py).
    openai_api_key: str = env("OPENAI_API_KEY", "", repr=False)
    openai_api_key_secret_arn: str = env("OPENAI_API_KEY_SECRET_ARN", "")
    # Bedrock's endpoint elsewhere than boto3 would find it: a test's fake server, a VPC endpoint.
    bedrock_endpoint_url: str = env("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", "")
    aws_region: str = env("AWS_REGION", "")

    @field_validator("model_provider", mode="before")
    @classmethod
    def _lower_case(cls, value: Any) -> Any:
        return value.lower() if isinstance(value, str) else value
