"""The provider interface: one completion call with a system prompt, and the usage it cost."""

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
