"""The state machine steps' settings (docs/execution.md); with the providers', since planning calls a model."""

from __future__ import annotations

from canvas_core.settings.base import EnvSettings, ResourceName, ServiceSettings, env, required
from canvas_core.settings.providers import ProviderSettings


class OrchestrationSettings(ServiceSettings, ProviderSettings):
    # How long a block may run before the state machine gives up on it (a Lambda runs 900 s at most).
    block_timeout_seconds: int = env("BLOCK_TIMEOUT_SECONDS", 900, gt=0)


class ScopeSettings(EnvSettings):
    """Scope Block's (canvas_core/isolation.py): the role whose narrowed credentials each block is handed."""

    block_session_role_arn: ResourceName = required("BLOCK_SESSION_ROLE_ARN")
    # How long a block's credentials last: through its waits for a slot and its own timeout (IAM allows an hour to
    # credentials a function's role asks for, role chaining).
    block_credentials_seconds: int = env("BLOCK_CREDENTIALS_SECONDS", 3600, ge=900, le=3600)
