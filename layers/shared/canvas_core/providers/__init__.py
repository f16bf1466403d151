"""Model providers behind one interface (`base.ModelProvider`), chosen by MODEL_PROVIDER (docs/providers.md):

- `offline`: deterministic, no network; extractive writing, and rule-based planning (the embedded stack's default);
- `bedrock`: Amazon Bedrock's Converse API (the deployed default);
- `openai`: any OpenAI-compatible chat-completions endpoint (OpenAI, Ollama, vLLM).

Each imports only what it needs, when chosen.
"""

from __future__ import annotations

from typing import get_args

from canvas_core.providers.base import Completion, ModelProvider, provider_name
from canvas_core.settings import ModelProviderName, provider_settings

PROVIDERS: tuple[str, ...] = get_args(ModelProviderName)


def get_provider(name: str | None = None) -> ModelProvider:
    """The provider called `name`; by default the one MODEL_PROVIDER chooses."""
    name = (name or provider_settings().model_provider).strip().lower()
    if name == "offline":
        from canvas_core.providers.offline import OfflineProvider

        return OfflineProvider()
    if name == "bedrock":
        from canvas_core.providers.bedrock import BedrockProvider

        return BedrockProvider()
    if name == "openai":
        from canvas_core.providers.openai import OpenAIProvider

        return OpenAIProvider.from_settings(provider_settings())
    raise ValueError(f"Unknown model provider: {name!r} (expected one of {', '.join(PROVIDERS)})")


__all__ = ["PROVIDERS", "Completion", "ModelProvider", "get_provider", "provider_name"]
