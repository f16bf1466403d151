"""Every setting canvas_core reads from the environment, as one pydantic model per function family; nothing
else in canvas_core reads the environment. template.yaml gives each function its variables, the embedded stack
the same from the template, tests set them with monkeypatch.

| family | functions | model | made of |
|---|---|---|---|
| API | functions/api/*, functions/portal | `ApiSettings` | `WebhookSettings`, and the API's limits |
| orchestration | functions/orchestration/* | `OrchestrationSettings` | `ServiceSettings`, `ProviderSettings` |
| blocks | functions/blocks/* | `BlockSettings` | `ServiceSettings`, `ProviderSettings`, `GatherSettings` |
| webhooks | functions/webhooks/* | `WebhookSettings` | `ServiceSettings`, `FetchSettings` |

A function's family model is read when the function starts (its cold start): a bad value fails it there, with
a message that names the variable, never in the middle of a request. Code reads the smallest model that has
what it needs (the store `service_settings()`, a provider `provider_settings()`, ...): each is read once per
process from the same environment, so it agrees with the family model that was checked.

After changing the environment of a running process (a test, the embedded stack), `reset()` makes the next read
see the change.
"""

from __future__ import annotations

from canvas_core.settings.api import ApiSettings
from canvas_core.settings.base import EnvSettings, ServiceSettings, SettingsError, TracingSettings, load, reset
from canvas_core.settings.blocks import BlockSettings
from canvas_core.settings.gather import FetchSettings, GatherSettings
from canvas_core.settings.orchestration import OrchestrationSettings
from canvas_core.settings.providers import ModelProviderName, ProviderSettings
from canvas_core.settings.webhooks import WebhookSettings


def api_settings() -> ApiSettings:
    return load(ApiSettings)


def orchestration_settings() -> OrchestrationSettings:
    return load(OrchestrationSettings)


def block_settings() -> BlockSettings:
    return load(BlockSettings)


def webhook_settings() -> WebhookSettings:
    return load(WebhookSettings)


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
    "EnvSettings",
    "FetchSettings",
    "GatherSettings",
    "ModelProviderName",
    "OrchestrationSettings",
    "ProviderSettings",
    "ServiceSettings",
    "SettingsError",
    "TracingSettings",
    "WebhookSettings",
    "api_settings",
    "block_settings",
    "fetch_settings",
    "gather_settings",
    "orchestration_settings",
    "provider_settings",
    "reset",
    "service_settings",
    "webhook_settings",
]
