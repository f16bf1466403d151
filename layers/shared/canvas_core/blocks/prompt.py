"""prompt-block: a persona's subtask (the block's instructions) worked through over the block's inputs in one
model call, citing the inputs' sources by number (`agents/writer.py`)."""

from __future__ import annotations

from canvas_core.agents.writer import work_on_task
from canvas_core.blocks.context import BlockContext, BlockOutput


def run(ctx: BlockContext) -> BlockOutput:
    return work_on_task(ctx, default_role="researcher")
