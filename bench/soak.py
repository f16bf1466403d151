"""Soak: many runs on one `canvas serve`, to see whether its memory, threads, thread stacks and latency level off.
Not part of `make bench` (10,000 runs take about an hour at four clients):

    .venv/bin/python -m bench.soak [--runs 10000] [--clients 4] [--sample-every 100]

Each client creates a run, polls it to its end and checks it reads back as its own (bench/load.py's checks), then
takes the next, over a mix of templates and block lists of 2 to 4 types. The server's RSS, threads and
thread-stack maps are sampled every `--sample-every` runs ended. Exit status 1 when a run does not end completed or
partial (or reads back wrong), when RSS or thread maps still grow over the second half of the runs (slope above the
limits), or when creates got slower: the 95th percentile of the last thousand creates more than 20 % above the
first thousand's (a tenth of the runs each when there are fewer than 10,000).
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import threading
import time
import uuid
from collections.abc import Sequence

from bench.growth import second_half, slope
from bench.load import (
    RUN_DEADLINE_S,
    SEED,
    Client,
    Footprint,
    RunOutcome,
    RunSpec,
    Server,
    account_keys,
    footprint,
    number,
    percentile,
    stack_rlimit_note,
    terminated_gracefully,
    workload,
)

RUNS = 10_000
CLIENTS = 4  # concurrent clients, each with one run at a time
SAMPLE_EVERY = 100
WARMUP_RUNS = 16  # every template once and 8 block lists: each block's libraries loaded before the baseline
MAX_BLOCKS = 4
# Offline runs cost only their artifacts (10 credits each); a run of this mix averages about 12 credits and an
# account holds 5,000, so one account per 150 runs keeps every run funded.
RUNS_PER_ACCOUNT = 150
# Stop early rather than spend hours confirming a broken stack.
MAX_FAILURES = 20
# What a run leaves in memory (its items, packed; its files are on disk) is a few kB; the goal is at most 50 kB a
# run over the second half (docs/benchmarks.md, "Soak").
MAX_RSS_SLOPE_KB = 50.0
MAX_THREAD_MAPS_SLOPE = 0.01  # one thread stack kept per 100 runs
# Creates must not slow down as the stored runs pile up: the last window's p95 at most this much above the first's.
MAX_CREATE_P95_RATIO = 1.2
CREATE_WINDOW = 1000  # runs in the first and the last window, or a tenth of the runs when fewer


def good(outcome: RunOutcome) -> bool:
    return outcome.status in ("completed", "partial") and not outcome.violations and not outcome.unverified


def describe(outcome: RunOutcome) -> str:
    why = [outcome.create_error or f"status {outcome.status}", *outcome.violations, *outcome.unverified]
    return f"{outcome.spec.marker} run {outcome.run_id}: {'; '.join(w for w in why if w)}"


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument("--clients", type=int, default=CLIENTS, help="concurrent clients, one run at a time each")
    parser.add_argument("--sample-every", type=int, default=SAMPLE_EVERY, help="runs between footprint samples")
    parser.add_argument("--warmup", type=int, default=WARMUP_RUNS)
    parser.add_argument("--run-deadline", type=float, default=RUN_DEADLINE_S, help="seconds a run may take")
    parser.add_argument("--max-rss-slope-kb", type=float, default=MAX_RSS_SLOPE_KB, help="per run, second half")
    parser.add_argument("--max-thread-maps-slope", type=float, default=MAX_THREAD_MAPS_SLOPE, help="per run")
    parser.add_argument(
        "--max-create-p95-ratio", type=float, default=MAX_CREATE_P95_RATIO, help="last window's p95 / first's"
    )
    args = parser.parse_args(argv)
    if args.runs < 1 or args.clients < 1 or args.sample_every < 1 or args.warmup < 0 or args.run_deadline <= 0:
        parser.error("--runs, --clients and --sample-every must be at least 1, --warmup not negative")
    return args


def create_windows(outcomes: Sequence[RunOutcome], runs: int) -> tuple[list[float], list[float]]:
    """The accepted creates' latencies of the first and the last window of runs, in the order the runs were made."""
    window = max(1, min(CREATE_WINDOW, runs // 10))
    ordered = sorted((o for o in outcomes if o.create_ms is not None), key=lambda o: o.spec.index)
    latencies = [o.create_ms for o in ordered if o.create_ms is not None]
    return latencies[:window], latencies[-window:]


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    keys = account_keys("soak", max(3, math.ceil((args.runs + args.warmup) / RUNS_PER_ACCOUNT)))
    session = uuid.uuid4().hex[:6]
    rng = random.Random(SEED)
    stop = threading.Event()
    lock = threading.Lock()
    samples: list[tuple[int, Footprint]] = []
    failures: list[RunOutcome] = []
    outcomes: list[RunOutcome] = []
    done = 0
    started = time.monotonic()

    def run_all(specs: list[RunSpec], server: Server, clients: list[Client], record: bool) -> None:
        nonlocal done
        queue = iter(specs)
        take = threading.Lock()

        def work(client: Client) -> None:
            nonlocal done
            while not stop.is_set():
                with take:
                    spec = next(queue, None)
                if spec is None:
                    return
                outcome = client.execute(spec, keys[spec.index % len(keys)], keys[(spec.index + 1) % len(keys)])
                if not record:
                    continue
                with lock:
                    done += 1
                    outcomes.append(outcome)
                    if not good(outcome):
                        failures.append(outcome)
                        print(f"  failed: {describe(outcome)}", flush=True)
                    if done % args.sample_every == 0 or done == args.runs:
                        samples.append((done, footprint(server.pid)))
                        print(f"  {done} runs ({time.monotonic() - started:.0f}s): {samples[-1][1]}", flush=True)
                    if len(failures) >= MAX_FAILURES and not stop.is_set():
                        print(f"  stopping after {done} runs: {len(failures)} failed", flush=True)
                        stop.set()

        threads = [threading.Thread(target=work, args=(client,), daemon=True) for client in clients]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    with terminated_gracefully(), Server(keys, "soak") as server:
        print(f"  canvas serve pid {server.pid} on {server.base_url}; log {server.log_path}", flush=True)
        if note := stack_rlimit_note():
            print(f"  {note}", flush=True)
        server.watch(stop)
        clients = [
            Client(server.base_url, random.Random(SEED + number_), stop, args.run_deadline)
            for number_ in range(args.clients)
        ]
        try:
            run_all(workload("warmup", session, args.warmup, rng, MAX_BLOCKS), server, clients, record=False)
            samples.append((0, footprint(server.pid)))
            print(f"  after warm-up: {samples[-1][1]}", flush=True)
            run_all(workload("soak", session, args.runs, rng, MAX_BLOCKS), server, clients, record=True)
        finally:
            stop.set()
            for client in clients:
                client.close()
        exit_code = server.exit_code()
    print(f"  canvas serve stopped; log {server.log_path}", flush=True)

    later = second_half(samples, done)
    rss_slope = slope([(n, f.rss_kb) for n, f in later])
    maps_slope = slope([(n, f.thread_maps) for n, f in later])
    threads_slope = slope([(n, f.threads) for n, f in later])
    span = f"runs {later[0][0]}-{later[-1][0]}" if later else "no samples"
    print(f"soak_runs {done} (of {args.runs})")
    print(f"soak_runs_failed {len(failures)}")
    print(f"soak_rss_slope_kb_per_run {rss_slope:.1f} ({span})")
    print(f"soak_thread_maps_slope_per_run {maps_slope:.4f} ({span})")
    print(f"soak_threads_slope_per_run {threads_slope:.4f} ({span})")
    if len(samples) > 1:
        first, last = samples[0], samples[-1]
        print(f"soak_rss_growth_kb_per_run {(last[1].rss_kb - first[1].rss_kb) / max(1, last[0]):.1f} (all runs)")
    early, late = create_windows(outcomes, done)
    early_p95, late_p95 = percentile(early, 0.95), percentile(late, 0.95)
    ratio = late_p95 / early_p95 if early and late and early_p95 > 0 else math.nan
    print(f"soak_create_p95_ms_first {number(early_p95)} ({len(early)} creates)")
    print(f"soak_create_p95_ms_last {number(late_p95)} ({len(late)} creates)")
    print(f"soak_create_p95_last_over_first {number(ratio, 2)}")
    print(f"soak_seconds {time.monotonic() - started:.0f} ({args.clients} clients)")

    problems = []
    if exit_code is not None:
        problems.append(f"canvas serve exited with code {exit_code}")
    if failures or done < args.runs:
        problems.append(f"{len(failures)} runs failed, {done} of {args.runs} ran")
    if math.isnan(rss_slope):
        problems.append("too few samples in the second half to judge growth (lower --sample-every)")
    else:
        if rss_slope > args.max_rss_slope_kb:
            problems.append(f"RSS still grows {rss_slope:.1f} kB per run (limit {args.max_rss_slope_kb})")
        if maps_slope > args.max_thread_maps_slope:
            problems.append(f"thread maps still grow {maps_slope:.4f} per run (limit {args.max_thread_maps_slope})")
    if math.isnan(ratio):
        problems.append("no creates to compare")
    elif ratio > args.max_create_p95_ratio:
        problems.append(f"creates slowed: p95 {late_p95:.0f} ms last against {early_p95:.0f} ms first")
    print(f"soak: {'FAIL: ' + '; '.join(problems) if problems else 'PASS'}", flush=True)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
