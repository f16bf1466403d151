"""Settings read from the environment once per container (template.yaml and the embedded stack set them)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True)
class Settings:
    accounts_table: str
    api_keys_table: str
    runs_table: str
    canvases_table: str
    tasks_table: str
    idempotency_table: str
    artifacts_bucket: str
    state_machine_arn: str
    model_provider: str
    download_url_ttl_seconds: int
    max_prompt_chars: int
    max_files: int
    max_file_bytes: int
    max_upload_bytes: int
    max_concurrent_runs: int
    portal_sessions_table: str = "PortalSessionsTable"
    portal_session_seconds: int = 12 * 3600
    # Runs, canvases and tasks expire (DynamoDB TTL on expires_at) this many days after they were written.
    data_retention_days: int = 90


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    env = os.environ.get
    return Settings(
        accounts_table=env("ACCOUNTS_TABLE_NAME", "AccountsTable"),
        api_keys_table=env("API_KEYS_TABLE_NAME", "ApiKeysTable"),
        runs_table=env("RUNS_TABLE_NAME", "RunsTable"),
        canvases_table=env("CANVASES_TABLE_NAME", "CanvasesTable"),
        tasks_table=env("TASKS_TABLE_NAME", "TasksTable"),
        idempotency_table=env("IDEMPOTENCY_TABLE_NAME", "IdempotencyTable"),
        artifacts_bucket=env("ARTIFACTS_BUCKET_NAME", "artifacts"),
        state_machine_arn=env("STATE_MACHINE_ARN", ""),
        model_provider=env("MODEL_PROVIDER", "offline"),
        download_url_ttl_seconds=int(env("DOWNLOAD_URL_TTL_SECONDS", "3600")),
        max_prompt_chars=int(env("MAX_PROMPT_CHARS", "20000")),
        max_files=int(env("MAX_FILES", "10")),
        # API Gateway and Lambda cap a request at 6 MB, and base64 adds a third.
        max_file_bytes=int(env("MAX_FILE_BYTES", str(4 * 1024 * 1024))),
        max_upload_bytes=int(env("MAX_UPLOAD_BYTES", str(4 * 1024 * 1024))),
        max_concurrent_runs=int(env("MAX_CONCURRENT_RUNS", "10")),
        portal_sessions_table=env("PORTAL_SESSIONS_TABLE_NAME", "PortalSessionsTable"),
        portal_session_seconds=int(env("PORTAL_SESSION_SECONDS", str(12 * 3600))),
        data_retention_days=int(env("DATA_RETENTION_DAYS", "90")),
    )


@dataclass(frozen=True)
class WebhookSettings:
    """The webhook family's settings (docs/webhooks.md)."""

    endpoints_table: str = "WebhookEndpointsTable"
    deliveries_table: str = "WebhookDeliveriesTable"
    queue_url: str = "WebhookQueue"  # a URL, or (the embedded stack) a queue name
    dead_letter_queue_url: str = "WebhookDeadLetterQueue"
    event_bus_name: str = "default"
    # Every retry delay is multiplied by this: 1.0 in production, a small fraction to test the schedule fast.
    retry_time_scale: float = 1.0
    allow_private_addresses: bool = False
    livemode: bool = True
    timeout_seconds: float = 10.0


@lru_cache(maxsize=1)
def webhook_settings() -> WebhookSettings:
    env = os.environ.get
    d = WebhookSettings()
    scale = float(env("WEBHOOK_RETRY_TIME_SCALE") or d.retry_time_scale)
    if not 0 < scale <= 1:
        raise ValueError(f"WEBHOOK_RETRY_TIME_SCALE must be in (0, 1], not {scale}")
    return WebhookSettings(
        endpoints_table=env("WEBHOOK_ENDPOINTS_TABLE_NAME") or d.endpoints_table,
        deliveries_table=env("WEBHOOK_DELIVERIES_TABLE_NAME") or d.deliveries_table,
        queue_url=env("WEBHOOK_QUEUE_URL") or d.queue_url,
        dead_letter_queue_url=env("WEBHOOK_DEAD_LETTER_QUEUE_URL") or d.dead_letter_queue_url,
        event_bus_name=env("EVENT_BUS_NAME") or d.event_bus_name,
        retry_time_scale=scale,
        allow_private_addresses=_true(env("WEBHOOK_ALLOW_PRIVATE_ADDRESSES", "false")),
        livemode=_true(env("WEBHOOK_LIVEMODE", "true")),
        timeout_seconds=float(env("WEBHOOK_TIMEOUT_SECONDS") or d.timeout_seconds),
    )


def _true(value: str) -> bool:
    return value.strip().lower() in ("1", "true", "yes", "on")
