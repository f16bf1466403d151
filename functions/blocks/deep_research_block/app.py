"""Lambda for deep-research-block: runs one block of that type (see canvas_core/blocks)."""

from canvas_core.blocks import make_block_handler

handler = make_block_handler("deep-research-block")
