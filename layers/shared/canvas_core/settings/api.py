"""The API functions' settings (docs/api.md, docs/portal.md): request limits and portal sessions; and the
webhooks', since they manage endpoints. The function that starts runs also reads the state machine's."""

from __future__ import annotations

from canvas_core.settings.base import MIB, EnvSettings, ResourceName, env, required
from canvas_core.settings.webhooks import WebhookSettings


class ApiSettings(WebhookSettings):
    max_prompt_chars: int = env("MAX_PROMPT_CHARS", 20000, gt=0)
    max_files: int = env("MAX_FILES", 10, ge=0)
    # API Gateway and Lambda cap a request at 6 MB, and base64 adds a third.
    max_file_bytes: int = env("MAX_FILE_BYTES", 4 * MIB, ge=0)
    max_upload_bytes: int = env("MAX_UPLOAD_BYTES", 4 * MIB, ge=0)
    max_concurrent_runs: int = env("MAX_CONCURRENT_RUNS", 10, ge=0)
    # Runs and re-runs one account may start in a minute (a burst of creates, even each cancelled at once).
    max_runs_per_minute: int = env("MAX_RUNS_PER_MINUTE", 30, ge=1)
    portal_session_seconds: int = env("PORTAL_SESSION_SECONDS", 12 * 3600, gt=0)


class StateMachineSettings(EnvSettings):
    """The state machine a run's execution starts on: the create-run function's."""

    state_machine_arn: ResourceName = required("STATE_MACHINE_ARN")
    # How long a run created with `review=true` waits for approval before it ends `failed` (template parameter
    # ReviewTimeoutHours; the state machine's own limit leaves 24 hours for it beside a run's 2).
    review_timeout_hours: int = env("REVIEW_TIMEOUT_HOURS", 24, ge=1, le=24)
