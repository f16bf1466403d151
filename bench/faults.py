"""The makespan suite on the embedded stack with AWS's failures injected (canvas_local.faults): DynamoDB's
transaction conflicts and throttling, Lambda's service errors. Every block charges credits, so the ledger is
checked too: what each run reports, what its blocks spent, and what the account lost.

Figures: `faults_blocks_failed` (blocks not completed, all runs), `faults_runs_terminal` (runs ended / runs),
`faults_ledger_mismatch_credits` (|account's use - runs' credits| + each run's |credits - its blocks'|),
`faults_balance_min` (the account's lowest balance seen), `makespan_ratio_p50_with_faults`, and what was injected.

`python -m bench faults` (part of `make bench`); `FAULTS` below are the rates.
"""

from __future__ import annotations

import logging
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

from bench import STACK_PARAMETERS
from bench.dags import Block, Dag, scripted
from bench.makespan import percentile, suite
from canvas_core.adapters.store import Store
from canvas_core.auth import authenticate
from canvas_core.models.api import CreateRunRequest
from canvas_core.runs import create_run
from canvas_local.faults import Faults
from canvas_local.stack import LocalStack

FAULTS = Faults(transaction_conflict=0.3, throttle=0.05, lambda_error=0.02)
API_KEY = "sk_canvas_bench_faults_key_00000000000000"
CREDITS_PER_BLOCK = 2
# Runs at once: several runs of one account complete blocks together, as on a busy deployment.
CONCURRENT_RUNS = 4


def priced(dag: Dag) -> Dag:
    return Dag([Block(b.seconds, b.fail, b.hang, CREDITS_PER_BLOCK) for b in dag.blocks], dag.edges)


def main() -> None:
    for noisy in ("werkzeug", "botocore", "canvas_local"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    dags = {name: priced(dag) for name, dag in suite()}
    with LocalStack(api_keys=[API_KEY], parameter_overrides=STACK_PARAMETERS, faults=FAULTS) as stack:
        account_id = authenticate({"X-API-KEY": API_KEY})
        store = Store()
        before = int(store.get_account(account_id)["credits_balance"])
        prefix = stack.state_machine_arns["RunCanvasStateMachine"].replace(":stateMachine:", ":execution:")
        lowest = [before]
        started = time.monotonic()

        def run(name: str) -> str:
            created = create_run(CreateRunRequest(prompt=name, template="auto"), account_id)
            stack.wait_for_execution(f"{prefix}:{created.run_id}", timeout=900)
            lowest.append(int(store.get_account(account_id)["credits_balance"]))
            return created.run_id

        with scripted(dags) as script, ThreadPoolExecutor(CONCURRENT_RUNS) as pool:
            run_ids = list(pool.map(run, dags))
        ratios, failed, terminal, mismatch = [], 0, 0, 0
        runs = [store.get_run(run_id) for run_id in run_ids]
        for dag, item in zip(dags.values(), runs, strict=True):
            _, nodes, _ = store.get_canvas(item.canvas_id)
            failed += sum(n.status.value != "completed" for n in nodes)
            terminal += item.status.value != "running"
            mismatch += abs(item.credits_consumed - item.planning_credits - sum(n.credits for n in nodes))
            ids = {n.block_id for n in nodes}
            starts = [script.started[i] for i in ids if i in script.started]
            ends = [script.finished[i] for i in ids if i in script.finished]
            if starts and ends:
                ratios.append((max(ends) - min(starts)) / dag.critical_path())
        used = before - int(store.get_account(account_id)["credits_balance"])
        mismatch += abs(used - sum(r.credits_consumed for r in runs))
        injected = dict(stack.fault_injector.injected) if stack.fault_injector else {}
    print(f"faults {FAULTS} ({len(runs)} runs, {CONCURRENT_RUNS} at once, {time.monotonic() - started:.0f}s)")
    print(f"faults_blocks_failed {failed}")
    print(f"faults_runs_terminal {terminal}/{len(runs)}")
    print(f"faults_ledger_mismatch_credits {mismatch}")
    print(f"faults_balance_min {min(lowest)}")
    print(f"makespan_ratio_p50_with_faults {statistics.median(ratios):.3f}")
    print(f"makespan_ratio_p95_with_faults {percentile(ratios, 0.95):.3f}")
    print("faults_injected " + " ".join(f"{k}={v}" for k, v in sorted(injected.items())))
