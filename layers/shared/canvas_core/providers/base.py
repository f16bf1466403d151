"""The provider interface: one completion call with a system prompt, and the usage it cost.

`role` says which agent is calling (planner, researcher, analyst, reviewer, writer, ...); a provider maps it
to a model id (`roles.py`). A provider raises `BlockRetryableError` for a passing failure (throttling, a 5xx,
a timeout) once its own retries are spent, and `BlockFatalError` for one that retrying cannot fix.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Completion:
    text: str
    model_id: str
    input_tokens: int = 0
    output_tokens: int = 0


class ModelProvider(Protocol):
    def complete(self, *, system: str, prompt: str, role: str) -> Completion: ...


def provider_name(provider: object) -> str:
    """`offline`, `bedrock`, `openai`, or the class name of another provider (a test's fake)."""
    return getattr(provider, "name", None) or type(provider).__name__
