"""Makespan of canvases executed by the real state machine on the embedded stack, against their critical path.

Each DAG's blocks sleep for known durations (bench/dags.py); the measured makespan runs from the first block's
start to the last block's end. Beside it, the makespan a level-by-level schedule would need on the same DAG
(computed), the orchestration overhead per block (a chain of zero-latency blocks) and the Step Functions state
transitions per block (from the execution history; the AWS cost driver).
"""

from __future__ import annotations

import logging
import random
import statistics
import time

from bench.dags import Block, Dag, layered_random_dag, scripted
from canvas_core.auth import authenticate
from canvas_core.models.api import CreateRunRequest
from canvas_core.runs import create_run
from canvas_local.stack import LocalStack

SEED = 20261121
RANDOM_DAGS = 30
API_KEY = "sk_canvas_bench_makespan_key_000000000000"


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


class Runner:
    def __init__(self, stack: LocalStack):
        self.stack = stack
        self.account_id = authenticate({"X-API-KEY": API_KEY})
        self.sfn = stack.client("stepfunctions")
        arn = stack.state_machine_arns["RunCanvasStateMachine"]
        self.execution_prefix = arn.replace(":stateMachine:", ":execution:")

    def run(self, name: str, dag: Dag) -> tuple[float, int]:
        """(makespan of the blocks in seconds, state transitions of the execution)."""
        with scripted({name: dag}) as script:
            created = create_run(CreateRunRequest(prompt=name, template="auto"), self.account_id)
            execution_arn = f"{self.execution_prefix}:{created.run_id}"
            ended = self.stack.wait_for_execution(execution_arn, timeout=600)
        if ended["status"] != "SUCCEEDED" or len(script.finished) != len(dag.blocks):
            raise RuntimeError(f"{name}: execution {ended['status']}, {len(script.finished)} blocks finished")
        makespan = max(script.finished.values()) - min(script.started.values())
        return makespan, self.transitions(execution_arn)

    def transitions(self, execution_arn: str) -> int:
        count, token = 0, None
        while True:
            page = self.sfn.get_execution_history(
                executionArn=execution_arn, maxResults=1000, **({"nextToken": token} if token else {})
            )
            count += sum(1 for e in page["events"] if e["type"].endswith("StateEntered"))
            token = page.get("nextToken")
            if not token:
                return count


def main() -> None:
    # Logging every request would be measured as orchestration overhead.
    for noisy in ("werkzeug", "botocore", "canvas_local"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    with LocalStack(api_keys=[API_KEY], parameter_overrides={"LogLevel": "WARNING"}) as stack:
        runner = Runner(stack)
        measured, baseline, per_block_transitions = [], [], []
        started = time.monotonic()
        for name, dag in suite():
            makespan, transitions = runner.run(name, dag)
            critical = dag.critical_path()
            measured.append(makespan / critical)
            baseline.append(dag.level_by_level() / critical)
            per_block_transitions.append(transitions / len(dag.blocks))
            print(
                f"  {name:<11} blocks={len(dag.blocks):>2} critical={critical:5.2f}s makespan={makespan:5.2f}s "
                f"ratio={makespan / critical:.3f} level_by_level={dag.level_by_level() / critical:.3f} "
                f"transitions/block={transitions / len(dag.blocks):.2f}",
                flush=True,
            )
        chain = Dag([Block(0.0) for _ in range(20)], [(i, i + 1) for i in range(19)])
        overhead, _ = runner.run("zero-latency-chain", chain)
    print(f"dags {len(measured)} (suite {time.monotonic() - started:.0f}s)")
    print(f"makespan_ratio_p50 {statistics.median(measured):.3f}")
    print(f"makespan_ratio_p95 {percentile(measured, 0.95):.3f}")
    print(f"level_by_level_ratio_p50 {statistics.median(baseline):.3f}")
    print(f"level_by_level_ratio_p95 {percentile(baseline, 0.95):.3f}")
    print(f"orchestration_overhead_ms_per_block {overhead / len(chain.blocks) * 1000:.0f}")
    print(f"state_transitions_per_block {statistics.mean(per_block_transitions):.2f}")


if __name__ == "__main__":
    main()
