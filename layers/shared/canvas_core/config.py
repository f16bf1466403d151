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
    )
