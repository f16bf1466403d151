"""The handoff from a block to its dependent on the embedded stack: from the end of a block's work to the start of
the work of the block that reads it, in chains of short blocks through the real state machine, with the calls made
on the way (where each begins after the block's end, and how long it takes).

Each handoff is the orchestration overhead one edge of a critical path adds to a canvas's makespan (bench/makespan.py).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

from bench import STACK_PARAMETERS
from bench.dags import Block, Dag, Script
from bench.makespan import API_KEY, Runner
from canvas_core.adapters.executions import Executions
from canvas_core.adapters.store import Store
from canvas_local.stack import LocalStack

CHAIN = 15
BLOCK_SECONDS = 0.1
ROUNDS = 3
# The calls a handoff may make, by the name they are reported under.
CALLS = {
    "complete": (Store, "complete_block"),
    "claim": (Store, "claim_ready_release"),
    "send": (Executions, "send_task_success"),
    "read": (Store, "get_nodes_and_account"),
    "mark_running": (Store, "start_block"),
}


@contextmanager
def timed_calls() -> Iterator[list[tuple[float, float, str]]]:
    """While active, every call of CALLS is recorded as (start, end, name), in perf_counter seconds."""
    calls: list[tuple[float, float, str]] = []
    lock = threading.Lock()

    def timed(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def call(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                with lock:
                    calls.append((started, time.perf_counter(), name))

        return call

    with contextlib.ExitStack() as stack:
        for name, (owner, attribute) in CALLS.items():
            stack.enter_context(mock.patch.object(owner, attribute, timed(name, getattr(owner, attribute))))
        yield calls


def main() -> None:
    for noisy in ("werkzeug", "botocore", "canvas_local"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    chain = Dag([Block(BLOCK_SECONDS) for _ in range(CHAIN)], [(i, i + 1) for i in range(CHAIN - 1)])
    handoffs: list[float] = []
    steps: dict[str, list[tuple[float, float]]] = {name: [] for name in CALLS}
    with LocalStack(api_keys=[API_KEY], parameter_overrides=STACK_PARAMETERS) as stack:
        runner = Runner(stack)
        runner.run("handoff-warm-up", Dag([Block(0.0) for _ in range(3)], [(0, 1), (1, 2)]))
        for round_ in range(ROUNDS):
            with timed_calls() as calls:
                runner.run(f"handoff-{round_}", chain)
            # The chain's blocks in order: each one's work starts after the previous one's ended.
            script: Script = runner.script
            order = sorted(script.started, key=script.started.__getitem__)
            for previous, following in itertools.pairwise(order):
                ended, began = script.finished[previous], script.started[following]
                handoffs.append((began - ended) * 1000)
                for start, end, name in calls:
                    if ended <= start < began:
                        steps[name].append(((start - ended) * 1000, (end - start) * 1000))
    print(f"handoff_ms_p50 {statistics.median(handoffs):.1f} ({len(handoffs)} handoffs)")
    for name, seen in steps.items():
        if seen:
            begins, lasts = statistics.median(b for b, _ in seen), statistics.median(d for _, d in seen)
            where = f"begins {begins:.1f} ms after the block's end, {len(seen)} calls"
            print(f"handoff_{name}_ms_p50 {lasts:.1f} ({where})")
        else:
            print(f"handoff_{name}_ms_p50 0 (not made between a block's end and its dependent's start)")


if __name__ == "__main__":
    main()
