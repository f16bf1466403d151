"""DynamoDB storage for accounts, API keys, runs, canvases (nodes and edges) and tasks.

A canvas is one partition of the canvases table (`CANVAS`, `NODE#<id>`, `EDGE#<source>#<target>` items);
a task tree is one partition of the tasks table. Every method raises domain errors, never ClientError.

An account item holds `credits_balance`, which a debit never takes below zero, and `active_runs`, the count of
its runs still `running`: a run is counted in the write that stores it and uncounted in the write that ends it.

One module per table, each building on the ones below it (a run's writes settle credits; a block's completion counts
its dependents' inputs and pays): `base` (the client and the shared item helpers), `accounts` (accounts and API
keys), `credits` (reservations, top-ups and settlement), `runs`, `reviews`, `tasks`, `dataflow` (a node's inputs
and its parked token) and `canvases` (nodes, edges and a block's own writes). `Store` is all of them: the logic
takes it as a parameter.
"""

from canvas_core.adapters.store.base import (
    RUNS_BY_ACCOUNT_INDEX,
    START_WINDOW_MS,
    TOP_UP_CREDITS,
    Completion,
    expires_at,
    jsonable_fields,
)
from canvas_core.adapters.store.canvases import CanvasesTable
from canvas_core.adapters.store.runs import retry_after_ms, start_wait_ms


class Store(CanvasesTable):
    """DynamoDB storage for accounts, API keys, runs, canvases and tasks: every table's operations."""


__all__ = [
    "RUNS_BY_ACCOUNT_INDEX",
    "START_WINDOW_MS",
    "TOP_UP_CREDITS",
    "Completion",
    "Store",
    "expires_at",
    "jsonable_fields",
    "retry_after_ms",
    "start_wait_ms",
]
