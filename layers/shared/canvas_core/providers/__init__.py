"""Model providers behind one interface: `offline` (deterministic, no network), `bedrock` (Converse API)."""

from __future__ import annotations

import os

from canvas_core.providers.base import Completion, ModelProvider


def get_provider(name: str | None = None) -> ModelProvider:
    name = (name or os.environ.get("MODEL_PROVIDER") or "offline").lower()
    if name == "offline":
        from canvas_core.providers.offline import OfflineProvider

        return OfflineProvider()
    if name == "bedrock":
        from canvas_core.providers.bedrock import BedrockProvider

        return BedrockProvider(model_id=os.environ.get("WRITER_MODEL_ID") or BedrockProvider.DEFAULT_MODEL_ID)
    raise ValueError(f"Unknown model provider: {name!r} (expected offline or bedrock)")


__all__ = ["Completion", "ModelProvider", "get_provider"]
