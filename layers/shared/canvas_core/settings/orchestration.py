"""The state machine steps' settings (docs/execution.md); with the providers', since planning calls a model."""

from __future__ import annotations

from canvas_core.settings.base import ServiceSettings, env
from canvas_core.settings.providers import ProviderSettings


class OrchestrationSettings(ServiceSettings, ProviderSettings):
    # How long a block may run before the state machine gives up on it (a Lambda runs 900 s at most).
    block_timeout_seconds: int = env("BLOCK_TIMEOUT_SECONDS", 900, gt=0)
