"""prompt-block: one model call over the block's inputs, answering the block's instructions."""

from __future__ import annotations

from canvas_core.blocks.context import BlockContext, BlockOutput


def run(ctx: BlockContext) -> BlockOutput:
    task = ctx.node.instructions or ctx.run.prompt
    material = ctx.material()
    completion = ctx.complete(f"{task}\n\nMaterial:\n{material}" if material else task, role="researcher")
    return BlockOutput(content=completion.text, sources=ctx.input_sources())
