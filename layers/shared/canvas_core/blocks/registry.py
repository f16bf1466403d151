"""Which module implements each block type. Modules are imported only in the Lambda that runs them, so a
block's heavy libraries never weigh on another function's cold start."""

from __future__ import annotations

import importlib
from collections.abc import Callable

from canvas_core.blocks.context import BlockContext, BlockOutput

IMPLEMENTATIONS: dict[str, str] = {
    "prompt-block": "canvas_core.blocks.prompt",
    "text-block": "canvas_core.blocks.text",
    "file-block": "canvas_core.blocks.file",
    "image-block": "canvas_core.blocks.image",
}


def implementation(block_type: str) -> Callable[[BlockContext], BlockOutput] | None:
    module = IMPLEMENTATIONS.get(block_type)
    return importlib.import_module(module).run if module else None
