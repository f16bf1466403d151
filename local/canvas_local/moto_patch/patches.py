"""A speed patch: the moto attributes it replaces, installed and removed together.

Named so that `bench/moto_patches.py` can take each one out in turn and measure what it buys (docs/benchmarks.md,
"What each moto patch buys"); a speed patch that buys nothing measurable is not kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Replacement:
    """`owner.name` (a class's or a module's attribute): moto's own value, and ours."""

    owner: Any
    name: str
    original: Any
    patch: Any


@dataclass(frozen=True)
class SpeedPatch:
    replacements: tuple[Replacement, ...]

    def install(self) -> None:
        for replacement in self.replacements:
            setattr(replacement.owner, replacement.name, replacement.patch)

    def uninstall(self) -> None:
        for replacement in self.replacements:
            setattr(replacement.owner, replacement.name, replacement.original)
