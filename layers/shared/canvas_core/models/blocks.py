"""What a block Lambda receives from the state machine and what it gives back (ids only: outputs travel
by reference through the canvas, never in the execution state)."""

from __future__ import annotations

from canvas_core.models.base import Model


class BlockInput(Model):
    run_id: str
    canvas_id: str
    account_id: str
    block_id: str
    block_type: str
    # The ids of the blocks this one reads, when the state machine hands them over (saves a read).
    inputs: list[str] | None = None
    # The ids of the blocks that read this one, likewise: their release can ride in this block's completion.
    dependents: list[str] | None = None


class BlockResult(Model):
    block_id: str
    status: str
