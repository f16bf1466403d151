"""What a block Lambda receives from the state machine and what it gives back. Outputs travel by reference
through the canvas: the one exception is a small output handed by a block to the dependent it released, which
then starts without reading it (`Release`)."""

from __future__ import annotations

from typing import Any

from canvas_core.models.base import Model
from canvas_core.models.items import NodeItem


class Release(Model):
    """What the token that released a parked block carried: its block id, and, when its one input released it,
    what the block would otherwise read when it starts (canvas_core/dataflow.py, `carried_release`)."""

    block_id: str
    node: NodeItem | None = None
    inputs: list[NodeItem] | None = None
    account: dict[str, Any] | None = None


class BlockCredentials(Model):
    """Credentials the state machine's Scope Block step vended for one block: the BlockSessionRole narrowed by a
    session policy to the block's own run (canvas_core/isolation.py). The block's AWS calls are made with them."""

    access_key_id: str
    secret_access_key: str
    session_token: str
    expiration: str


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
    # What the release that started this block carried (Wait For Inputs' result), and the task's attempt: a retried
    # attempt reads the store, whatever its release carried.
    release: Release | None = None
    attempt: int = 0
    # The ReservationShortError of an earlier attempt, which Scope Block has since paid for: this attempt stores the
    # output that one kept (and reads the store, whatever its release carried).
    short: dict[str, Any] | None = None
    # What the block may touch (None only where no state machine runs it: tests calling the runner directly).
    credentials: BlockCredentials | None = None


class BlockResult(Model):
    block_id: str
    status: str
