"""Bodies of the account endpoints (GET /v1/account, /v1/api_keys), extensions of the contract."""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from canvas_core.models.base import Model, Uuid


class ApiKeyStatus(StrEnum):
    ACTIVE = "active"
    REVOKED = "revoked"


class ApiKeyView(Model):
    """A key as its account sees it: never the key, nor its hash."""

    id: Uuid = Field(description="Stable id of the key (a UUID derived from its hash)")
    prefix: str = Field(description="The key's first 14 characters, e.g. sk_canvas_AbCd")
    last_four: str | None = Field(
        description="The key's last four characters (null for keys made before they were kept)"
    )
    created: str = Field(json_schema_extra={"format": "date-time"}, description="UTC, ISO 8601")
    last_used: str | None = Field(
        json_schema_extra={"format": "date-time"}, description="UTC, ISO 8601, to the minute; null if never used"
    )
    status: ApiKeyStatus


class ApiKeyList(Model):
    keys: list[ApiKeyView]


class CreatedApiKey(ApiKeyView):
    key: str = Field(description="The key itself, shown this once: only its hash is stored")


class AccountLimits(Model):
    max_concurrent_runs: int
    max_runs_per_minute: int = Field(description="Runs and re-runs the account may start in one minute")
    max_webhook_endpoints: int
    max_blocks_per_run: int
    max_files_per_run: int
    max_file_bytes: int
    max_prompt_chars: int


class AccountView(Model):
    account_id: str
    credits_balance: int
    credits_used_this_month: int
    runs_this_month: int
    month: str = Field(description="The month the counters cover, UTC, as YYYY-MM")
    active_runs: int
    limits: AccountLimits
