"""image-block: an uploaded image (image_upload.py), or one the block makes itself (image_generate.py)."""

from __future__ import annotations

from canvas_core.blocks.context import BlockContext, BlockOutput


def run(ctx: BlockContext) -> BlockOutput:
    if ctx.node.upload_id:
        from canvas_core.blocks.image_upload import run as describe_upload

        return describe_upload(ctx)
    from canvas_core.blocks.image_generate import run as generate

    return generate(ctx)
