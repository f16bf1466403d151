"""Every setting canvas_core reads from the environment, as one pydantic model per function family; nothing
else in canvas_core reads the environment. template.yaml gives each function the variables its models read and no
other (Globals what every function reads: `ServiceSettings`, Powertools'; its entry its family's and its own
resources'); tests set them with monkeypatch.

| family | functions | model | made of |
|---|---|---|---|
| API | functions/api/*, functions/portal | `ApiSettings` | `WebhookSettings`, and the API's limits |
| orchestration | functions/orchestration/* | `OrchestrationSettings` | `ServiceSettings`, `ProviderSettings` |
| blocks | functions/blocks/* | `BlockSettings` | `ServiceSettings`, `ProviderSettings`, `GatherSettings` |
| webhooks | functions/webhooks/* | `DeliverySettings` | `WebhookSettings`, the queues |

A setting that names an AWS resource (a table, the bucket, the bus, a queue, the state machine) has no default:
a function reads it only where its template entry gives it. The few functions that need a resource beyond their
family's read its model too when they start: `StateMachineSettings` (create-run), `WebhookQueueSettings` (the
endpoints' API and the portal, which queue pings).

A function's models are read when the function starts (its cold start): a bad value, or a resource its template
entry lacks, fails it there, with a message that names the variable, never in the middle of a request. Code
reads the smallest model that has what it needs (the store `service_settings()`, a provider
`provider_settings()`, ...): each is validated once for the values its variables hold (on Lambda, once per
container), so it agrees with the models that were checked.
"""

from __future__ import annotations

from canvas_core.settings.api import ApiSettings, StateMachineSettings
from canvas_core.settings.base import (
    EnvSettings,
    ServiceSettings,
    SettingsError,
    TracingSettings,
    load,
    reset,
)
from canvas_core.settings.blocks import BlockSettings
from canvas_core.settings.gather import FetchSettings, GatherSettings
from canvas_core.settings.orchestration import OrchestrationSettings, ScopeSettings
from canvas_core.settings.providers import ModelProviderName, ProviderSettings
from canvas_core.settings.webhooks import DeliverySettings, WebhookQueueSettings, WebhookSettings


def api_settings() -> ApiSettings:
    return load(ApiSettings)


def orchestration_settings() -> OrchestrationSettings:
    return load(OrchestrationSettings)


def scope_settings() -> ScopeSettings:
    return load(ScopeSettings)


def block_settings() -> BlockSettings:
    return load(BlockSettings)


def webhook_settings() -> WebhookSettings:
    return load(WebhookSettings)


def delivery_settings() -> DeliverySettings:
    return load(DeliverySettings)


def webhook_queue_settings() -> WebhookQueueSettings:
    return load(WebhookQueueSettings)


def state_machine_settings() -> StateMachineSettings:
    return load(StateMachineSettings)


def service_settings() -> ServiceSettings:
    return load(ServiceSettings)


def provider_settings() -> ProviderSettings:
    return load(ProviderSettings)


def fetch_settings() -> FetchSettings:
    return load(FetchSettings)


def gather_settings() -> GatherSettings:
    return load(GatherSettings)


__all__ = [
    "ApiSettings",
    "BlockSettings",
    "DeliverySettings",
    "EnvSettings",
    "FetchSettings",
    "GatherSettings",
    "ModelProviderName",
    "OrchestrationSettings",
    "ProviderSettings",
    "ServiceSettings",
    "SettingsError",
    "StateMachineSettings",
    "TracingSettings",
    "WebhookQueueSettings",
    "WebhookSettings",
    "api_settings",
    "block_settings",
    "delivery_settings",
    "fetch_settings",
    "gather_settings",
    "load",
    "orchestration_settings",
    "provider_settings",
    "reset",
    "service_settings",
    "state_machine_settings",
    "webhook_queue_settings",
    "webhook_settings",
]
