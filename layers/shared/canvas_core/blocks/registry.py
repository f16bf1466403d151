"""Which module implements each block type: `canvas_core/blocks/<type>.py`, with a `run(ctx) -> BlockOutput`.
Modules are imported only in the Lambda that runs them, so a block's heavy libraries never weigh on another
function's cold start. A type whose module is not there yet fails its blocks with a clear reason."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import cast

from canvas_core.blocks.context import BlockContext, BlockOutput
from canvas_core.models.catalog import BlockType


def module_name(block_type: str) -> str:
    return "canvas_core.blocks." + block_type.removesuffix("-block").replace("-", "_")


IMPLEMENTATIONS: dict[str, str] = {b.value: module_name(b.value) for b in BlockType}


def implementation(block_type: str) -> Callable[[BlockContext], BlockOutput] | None:
    name = IMPLEMENTATIONS.get(block_type)
    if name is None:
        return None
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name == name:
            return None
        raise
    return cast(Callable[[BlockContext], BlockOutput], module.run)  # found by name: the import is untyped
