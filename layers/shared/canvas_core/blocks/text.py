"""text-block: the Writer. It synthesizes its inputs into the answer to the prompt (its instructions), citing
their sources by number, and ends with the numbered list of sources (`agents/writer.py`)."""

from __future__ import annotations

from canvas_core.agents.writer import write_answer
from canvas_core.blocks.context import BlockContext, BlockOutput


def run(ctx: BlockContext) -> BlockOutput:
    return write_answer(ctx)
