"""text-block: a note. It carries its inputs to the reader under the block's name, without a model call."""

from __future__ import annotations

from canvas_core.blocks.context import BlockContext, BlockOutput


def run(ctx: BlockContext) -> BlockOutput:
    body = "\n\n".join(n.content for n in ctx.inputs if n.content) or (ctx.node.instructions or "")
    return BlockOutput(content=body.strip(), sources=[s for n in ctx.inputs for s in n.sources])
