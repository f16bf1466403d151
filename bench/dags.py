"""Canvases with known shapes and block latencies, for the makespan benchmark and the fault-injection tests.

A scripted canvas replaces the planner's output (`plan_canvas`) and every block's behaviour (the runner's
`implementation`) in this process, which is where the embedded stack runs its Lambda handlers: the state
machine, the dataflow release and the block runner stay the real ones.
"""

from __future__ import annotations

import json
import math
import random
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from unittest import mock

from canvas_core.blocks.context import BlockContext, BlockOutput
from canvas_core.errors import BlockFatalError, BlockRetryableError
from canvas_core.models.catalog import BlockType
from canvas_core.models.items import EdgeItem, NodeItem, RunItem
from canvas_core.planner import Plan, task_tree


@dataclass
class Block:
    seconds: float = 0.0
    fail: str | None = None  # "once" (a passing error, retried), "retried" (a passing error every time) or "always"
    hang: bool = False
    credits: int = 0  # what the block charges, as a model's calls would


@dataclass
class Dag:
    blocks: list[Block]
    edges: list[tuple[int, int]] = field(default_factory=list)  # (source index, target index), source < target

    def critical_path(self) -> float:
        finish = [0.0] * len(self.blocks)
        for i, block in enumerate(self.blocks):
            start = max((finish[s] for s, t in self.edges if t == i), default=0.0)
            finish[i] = start + block.seconds
        return max(finish, default=0.0)

    def level_by_level(self) -> float:
        """Makespan of a schedule that runs the DAG in waves: each level waits for the slowest of the last."""
        level = [0] * len(self.blocks)
        for i in range(len(self.blocks)):
            level[i] = max((level[s] + 1 for s, t in self.edges if t == i), default=0)
        waves: dict[int, float] = {}
        for i, block in enumerate(self.blocks):
            waves[level[i]] = max(waves.get(level[i], 0.0), block.seconds)
        return sum(waves.values())


def layered_random_dag(rng: random.Random, min_blocks: int = 6, max_blocks: int = 30, median_s: float = 1.0) -> Dag:
    """Blocks in 3 to 6 layers, each fed by 1 to 3 blocks of earlier layers; lognormal latencies (skewed)."""
    count = rng.randint(min_blocks, max_blocks)
    layers = rng.randint(3, min(6, count))
    cuts = sorted(rng.sample(range(1, count), layers - 1))
    bounds = [0, *cuts, count]
    layer_of = [next(k for k in range(layers) if bounds[k] <= i < bounds[k + 1]) for i in range(count)]
    edges = set()
    for i in range(bounds[1], count):
        earlier = [j for j in range(i) if layer_of[j] < layer_of[i]]
        # One input from the layer just before keeps the layers real; others may reach further back.
        previous = [j for j in earlier if layer_of[j] == layer_of[i] - 1]
        edges.add((rng.choice(previous), i))
        for j in rng.sample(earlier, min(len(earlier), rng.randint(0, 2))):
            edges.add((j, i))
    blocks = [Block(seconds=round(median_s * math.exp(rng.gauss(0, 0.8)), 3)) for _ in range(count)]
    return Dag(blocks, sorted(edges))


def plan_for(run: RunItem, dag: Dag) -> Plan:
    """The canvas of `dag` for `run`: text-blocks whose instructions script their behaviour."""
    ids = [str(uuid.uuid5(uuid.UUID(run.canvas_id), f"bench:{i}")) for i in range(len(dag.blocks))]
    nodes = [
        NodeItem(
            canvas_id=run.canvas_id,
            block_id=ids[i],
            name=f"Block {i}",
            type=BlockType.TEXT.value,
            instructions=json.dumps(block.__dict__),
            persona="Writer",
            position=i,
        )
        for i, block in enumerate(dag.blocks)
    ]
    edges = [EdgeItem(source_id=ids[s], target_id=ids[t]) for s, t in dag.edges]
    return Plan(nodes=nodes, edges=edges, tasks=task_tree(run, nodes))


class Script:
    """Scripted behaviour for the blocks of scripted canvases; hanging blocks wait until `release()`."""

    def __init__(self) -> None:
        self.attempts: dict[str, int] = {}
        self.started: dict[str, float] = {}
        self.finished: dict[str, float] = {}
        # The process's CPU time (every thread) at the same instants: the CPU a canvas's makespan cost.
        self.cpu_started: dict[str, float] = {}
        self.cpu_finished: dict[str, float] = {}
        self._released = threading.Event()
        self._lock = threading.Lock()

    def run(self, ctx: BlockContext) -> BlockOutput:
        block = Block(**json.loads(ctx.node.instructions or "{}"))
        with self._lock:
            attempt = self.attempts[ctx.node.block_id] = self.attempts.get(ctx.node.block_id, 0) + 1
            self.started.setdefault(ctx.node.block_id, time.monotonic())
            self.cpu_started.setdefault(ctx.node.block_id, time.process_time())
        if block.hang:
            self._released.wait(600)
            return BlockOutput(content=f"{ctx.node.name} came back late")
        if block.fail == "always":
            raise BlockFatalError(f"{ctx.node.name} failed on purpose")
        if block.fail == "once" and attempt == 1:
            raise BlockRetryableError(f"{ctx.node.name} failed once on purpose")
        if block.fail == "retried":
            raise BlockRetryableError(f"{ctx.node.name} failed again on purpose (attempt {attempt})")
        time.sleep(block.seconds)
        self.finished[ctx.node.block_id] = time.monotonic()
        self.cpu_finished[ctx.node.block_id] = time.process_time()
        return BlockOutput(content=f"{ctx.node.name} done after {block.seconds}s", credits=block.credits)

    def release(self) -> None:
        self._released.set()


@contextmanager
def scripted(dag_for_prompt: dict[str, Dag]) -> Iterator[Script]:
    """While active, a run whose prompt is a key of `dag_for_prompt` plans that DAG, with scripted blocks."""
    from canvas_core import planner

    script = Script()
    real_plan = planner.plan_canvas

    def plan(run: RunItem) -> Plan:
        dag = dag_for_prompt.get(run.prompt)
        return plan_for(run, dag) if dag is not None else real_plan(run)

    def implementation(block_type: str):
        return script.run

    with (
        mock.patch("canvas_core.orchestration.plan_canvas", plan),
        mock.patch("canvas_core.blocks.runner.implementation", implementation),
    ):
        try:
            yield script
        finally:
            script.release()
