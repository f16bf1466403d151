"""Makespan of canvases executed by the real state machine on the embedded stack, against their critical path.

Each DAG's blocks sleep for known durations (bench/dags.py); the measured makespan runs from the first block's
start to the last block's end. Beside it, the makespan a level-by-level schedule would need on the same DAG
(computed), by width band too; the orchestration overhead per block (chains of zero-latency blocks) and the Step
Functions state transitions per block (from the execution history; the AWS cost driver): those of the blocks'
own states per block, and the run's own states (plan, the maps, finalize) per run.
"""

from __future__ import annotations

import json
import logging
import random
import statistics
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

from bench import STACK_PARAMETERS
from bench.dags import Block, Dag, Script, layered_random_dag, scripted
from canvas_core.adapters.store import Store
from canvas_core.auth import authenticate
from canvas_core.blocks import runner as block_runner
from canvas_core.models.api import CreateRunRequest
from canvas_core.runs import create_run
from canvas_local.stack import LocalStack

SEED = 20261121
RANDOM_DAGS = 30
API_KEY = "sk_canvas_bench_makespan_key_000000000000"
DEFINITION = Path(__file__).resolve().parent.parent / "statemachine" / "run_canvas.asl.json"
# Canvases by their number of blocks: the ratio is reported per band, beside the level-by-level baseline.
WIDTH_BANDS = ((1, 10), (11, 20), (21, 40))
OVERHEAD_CHAINS = 3


def suite() -> list[tuple[str, Dag]]:
    rng = random.Random(SEED)
    dags = [(f"layered-{i}", layered_random_dag(rng)) for i in range(RANDOM_DAGS)]
    # Shapes that finish on the critical path under any schedule, as a control.
    dags.append(("chain", Dag([Block(1.0) for _ in range(6)], [(i, i + 1) for i in range(5)])))
    fan = [Block(1.0)] + [Block(0.6 + 0.2 * i) for i in range(8)] + [Block(1.0)]
    dags.append(("fan", Dag(fan, [(0, i) for i in range(1, 9)] + [(i, 9) for i in range(1, 9)])))
    return dags


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * p
    low, high = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (k - low)


@contextmanager
def counted_releases() -> Iterator[Counter[str]]:
    """While active, how completed blocks released their dependents: `completion`, claimed by the write that
    completed the block; `after`, claimed by a write of its own after it (a write more before the dependent starts)."""
    counts: Counter[str] = Counter()
    real_release_ready, real_claim = block_runner.release_ready, Store.claim_ready_release

    def release_ready(*args: Any, claimed: dict[str, str] | None = None, **kwargs: Any) -> Any:
        counts["completion"] += len(claimed or {})
        return real_release_ready(*args, claimed=claimed, **kwargs)

    def claim_ready_release(self: Store, *args: Any, **kwargs: Any) -> Any:
        node = real_claim(self, *args, **kwargs)
        counts["after"] += node is not None
        return node

    with (
        mock.patch.object(block_runner, "release_ready", release_ready),
        mock.patch.object(Store, "claim_ready_release", claim_ready_release),
    ):
        yield counts


class Runner:
    def __init__(self, stack: LocalStack):
        self.stack = stack
        self.account_id = authenticate({"X-API-KEY": API_KEY})
        self.sfn = stack.client("stepfunctions")
        arn = stack.state_machine_arns["RunCanvasStateMachine"]
        self.execution_prefix = arn.replace(":stateMachine:", ":execution:")
        # The process's CPU seconds over the last run's makespan (every thread: the stack is one process).
        self.makespan_cpu = 0.0
        # The last run's blocks: when each started and finished.
        self.script = Script()
        # The last run's releases by completed blocks, by how they were claimed (`counted_releases`).
        self.releases: Counter[str] = Counter()

    def run(self, name: str, dag: Dag) -> tuple[float, tuple[int, int]]:
        """(makespan of the blocks in seconds, (state transitions of the blocks, of the run itself))."""
        with scripted({name: dag}) as script, counted_releases() as releases:
            created = create_run(CreateRunRequest(prompt=name, template="auto"), self.account_id)
            execution_arn = f"{self.execution_prefix}:{created.run_id}"
            ended = self.stack.wait_for_execution(execution_arn, timeout=600)
        if ended["status"] != "SUCCEEDED" or len(script.finished) != len(dag.blocks):
            raise RuntimeError(f"{name}: execution {ended['status']}, {len(script.finished)} blocks finished")
        self.script, self.releases = script, releases
        makespan = max(script.finished.values()) - min(script.started.values())
        self.makespan_cpu = max(script.cpu_finished.values()) - min(script.cpu_started.values())
        return makespan, self.transitions(execution_arn)

    def transitions(self, execution_arn: str) -> tuple[int, int]:
        """States entered (`*StateEntered` events, what AWS bills): by the blocks' iterations, and by the run."""
        block_states = states_inside_maps(json.loads(DEFINITION.read_text(encoding="utf-8")))
        blocks, run, token = 0, 0, None
        while True:
            page = self.sfn.get_execution_history(
                executionArn=execution_arn, maxResults=1000, **({"nextToken": token} if token else {})
            )
            for event in page["events"]:
                if event["type"].endswith("StateEntered"):
                    if event["stateEnteredEventDetails"]["name"] in block_states:
                        blocks += 1
                    else:
                        run += 1
            token = page.get("nextToken")
            if not token:
                return blocks, run


def states_inside_maps(scope: dict[str, Any], inside: bool = False) -> set[str]:
    """Names of the states that run once per block: those of every Map's item processor."""
    names: set[str] = set()
    for name, state in scope.get("States", {}).items():
        if inside:
            names.add(name)
        if state.get("Type") == "Map":
            names |= states_inside_maps(state.get("ItemProcessor") or state.get("Iterator") or {}, True)
        for branch in state.get("Branches", []):
            names |= states_inside_maps(branch, inside)
    return names


def band_of(blocks: int) -> str:
    low, high = next(b for b in WIDTH_BANDS if b[0] <= blocks <= b[1])
    return f"{low}_{high}"


def main() -> None:
    # Logging every request would be measured as orchestration overhead.
    for noisy in ("werkzeug", "botocore", "canvas_local"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    with LocalStack(api_keys=[API_KEY], parameter_overrides=STACK_PARAMETERS) as stack:
        runner = Runner(stack)
        measured, baseline, block_transitions, run_transitions, all_transitions = [], [], [], [], []
        bands: dict[str, list[tuple[float, float]]] = {band_of(high): [] for _, high in WIDTH_BANDS}
        releases: Counter[str] = Counter()
        started = time.monotonic()
        for name, dag in suite():
            makespan, (per_blocks, per_run) = runner.run(name, dag)
            critical = dag.critical_path()
            ratio, level = makespan / critical, dag.level_by_level() / critical
            measured.append(ratio)
            baseline.append(level)
            block_transitions.append(per_blocks / len(dag.blocks))
            run_transitions.append(per_run)
            all_transitions.append((per_blocks + per_run) / len(dag.blocks))
            bands[band_of(len(dag.blocks))].append((ratio, level))
            releases += runner.releases
            print(
                f"  {name:<11} blocks={len(dag.blocks):>2} critical={critical:5.2f}s makespan={makespan:5.2f}s "
                f"ratio={ratio:.4f} level_by_level={level:.4f} transitions/block={per_blocks / len(dag.blocks):.2f} "
                f"released_by_completion={runner.releases['completion']} after={runner.releases['after']}",
                flush=True,
            )
        chain = Dag([Block(0.0) for _ in range(20)], [(i, i + 1) for i in range(19)])
        overheads, overheads_cpu = [], []
        for i in range(OVERHEAD_CHAINS):
            overheads.append(runner.run(f"zero-latency-chain-{i}", chain)[0] / len(chain.blocks))
            overheads_cpu.append(runner.makespan_cpu / len(chain.blocks))
    print(f"dags {len(measured)} (suite {time.monotonic() - started:.0f}s)")
    print(f"makespan_ratio_p50 {statistics.median(measured):.3f}")
    print(f"makespan_ratio_p95 {percentile(measured, 0.95):.3f}")
    print(f"level_by_level_ratio_p50 {statistics.median(baseline):.3f}")
    print(f"level_by_level_ratio_p95 {percentile(baseline, 0.95):.3f}")
    # Four decimals: a band's median and its baseline can differ by less than 0.001 (the band of up to 10 blocks
    # holds five DAGs whose level-by-level schedule is their critical path).
    for band, pairs in bands.items():
        if pairs:
            print(
                f"makespan_ratio_p50_blocks_{band} {statistics.median(r for r, _ in pairs):.4f} "
                f"(level_by_level {statistics.median(b for _, b in pairs):.4f}, {len(pairs)} dags)"
            )
    # Releases a completed block's own write claimed, of all those it made (the others cost a write after it).
    released = releases["completion"] + releases["after"]
    print(f"releases_in_completion {releases['completion'] / max(released, 1):.2f} ({released} releases)")
    print(f"orchestration_overhead_ms_per_block {statistics.median(overheads) * 1000:.0f}")
    # The process's CPU over the same chains: they are bound by CPU, so on a quiet machine it equals the above; on
    # a busy one it leaves out the time spent waiting for a core.
    print(f"orchestration_overhead_cpu_ms_per_block {statistics.median(overheads_cpu) * 1000:.0f}")
    print(f"state_transitions_per_block {statistics.mean(block_transitions):.2f}")
    print(f"state_transitions_per_run {statistics.mean(run_transitions):.2f}")
    print(f"state_transitions_all_per_block {statistics.mean(all_transitions):.2f}")


if __name__ == "__main__":
    main()
