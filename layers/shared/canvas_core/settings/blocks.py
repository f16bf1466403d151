"""The block functions' settings (docs/block-types.md)."""

from __future__ import annotations

from canvas_core.settings.base import ServiceSettings, env
from canvas_core.settings.gather import GatherSettings
from canvas_core.settings.providers import ProviderSettings


class BlockSettings(ServiceSettings, ProviderSettings, GatherSettings):
    """Every block function's, whatever its type: the providers' and the gathering blocks' (a block reads each
    part through its own model, `provider_settings()` and `gather_settings()`)."""

    # Blocks one account may have running at once, over all its runs (template parameter
    # MaxRunningBlocksPerAccount): a block past it waits for a slot (the state machine retries it).
    max_running_blocks: int = env("MAX_RUNNING_BLOCKS_PER_ACCOUNT", 40, ge=1)
