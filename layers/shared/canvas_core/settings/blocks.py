"""The block functions' settings (docs/block-types.md)."""

from __future__ import annotations

from canvas_core.settings.base import ServiceSettings
from canvas_core.settings.gather import GatherSettings
from canvas_core.settings.providers import ProviderSettings


class BlockSettings(ServiceSettings, ProviderSettings, GatherSettings):
    """Every block function's, whatever its type: the providers' and the gathering blocks' (a block reads each
    part through its own model, `provider_settings()` and `gather_settings()`)."""
