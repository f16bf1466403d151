"""The model providers' settings (docs/providers.md): read by the blocks and by the planner."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import field_validator

from canvas_core.settings.base import EnvSettings, env, env_ending, required

ModelProviderName = Literal["offline", "bedrock", "openai"]


class ProviderSettings(EnvSettings):
    # No default: the template gives every function that reads it its value (bedrock), the local stack its own.
    model_provider: ModelProviderName = required("MODEL_PROVIDER")
    # The model of each role, by variable name: PLANNER_MODEL_ID, WRITER_MODEL_ID, ... (providers/roles.py).
    model_ids: dict[str, str] = env_ending("_MODEL_ID")
    # The Bedrock image model image-block draws with; none when empty.
    image_model_id: str = env("IMAGE_MODEL_ID", "")
    # The first retry's backoff ceiling; it doubles per attempt (providers/retry.py).
    model_retry_backoff_seconds: float = env("MODEL_RETRY_BACKOFF_SECONDS", 1.0, ge=0)
    # The output cap every model call sends, unless its role has its own (providers/roles.py): bounds generation.
    model_max_output_tokens: int = env("MODEL_MAX_OUTPUT_TOKENS", 0, ge=0)
    # Per role: PLANNER_MAX_OUTPUT_TOKENS, WRITER_MAX_OUTPUT_TOKENS, ... (and MODEL_MAX_OUTPUT_TOKENS itself).
    max_output_tokens: dict[str, int] = env_ending("_MAX_OUTPUT_TOKENS")
    # No call sends more than this many input tokens (estimated from characters); larger inputs are cut to fit.
    model_input_token_budget: int = env("MODEL_INPUT_TOKEN_BUDGET", 24_000, ge=1_000)
    # The longest a call may take: a call's timeout is the time its output cap takes at the slowest expected
    # generation speed, plus a start-up allowance, never more than this.
    model_timeout_seconds: float = env("MODEL_TIMEOUT_SECONDS", 300.0, gt=0)
    model_min_tokens_per_second: float = env("MODEL_MIN_TOKENS_PER_SECOND", 20.0, gt=0)
    openai_base_url: str = env("OPENAI_BASE_URL", "")
    # The key itself wins over the secret holding it (providers/openai.py).
    openai_api_key: str = env("OPENAI_API_KEY", "", repr=False)
    openai_api_key_secret_arn: str = env("OPENAI_API_KEY_SECRET_ARN", "")
    # How structured answers are constrained to their schema (providers/structured.py): OpenAI's json_schema form,
    # llama-cpp-python's json_object form with a schema, or none (the answer's JSON is read and checked).
    openai_structured_output: Literal["json_schema", "json_object", "none"] = env(
        "OPENAI_STRUCTURED_OUTPUT", "json_schema"
    )
    # Bedrock's endpoint elsewhere than boto3 would find it: a test's fake server, a VPC endpoint.
    bedrock_endpoint_url: str = env("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", "")
    aws_region: str = env("AWS_REGION", "")

    @field_validator("model_provider", mode="before")
    @classmethod
    def _lower_case(cls, value: Any) -> Any:
        return value.lower() if isinstance(value, str) else value
