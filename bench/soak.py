"""Soak: runs one after another on one `canvas serve`, to see whether its memory, threads and thread stacks level
off. Not part of `make bench` (2,000 runs take about 40 minutes):

    .venv/bin/python -m bench.soak [--runs 2000] [--sample-every 100]

One client creates each run, polls it to its end and checks it reads back as its own (bench/load.py's checks),
over a mix of templates and block lists of 2 to 4 types. The server's RSS, threads and thread-stack maps are
sampled every `--sample-every` runs. Exit status 1 when a run does not end completed or partial (or reads back
wrong), or when RSS or thread maps still grow over the second half of the runs (slope above the limits).
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
    Server,
    account_keys,
    footprint,
    stack_rlimit_note,
    terminated_gracefully,
    workload,
)

RUNS = 2000
SAMPLE_EVERY = 100
WARMUP_RUNS = 16  # every template once and 8 block lists: each block's libraries loaded before the baseline
MAX_BLOCKS = 4
# Offline runs cost only their artifacts (10 credits each); a run of this mix averages about 12 credits and an
# account holds 5,000, so one account per 150 runs keeps every run funded.
RUNS_PER_ACCOUNT = 150
# Stop early rather than spend hours confirming a broken stack.
MAX_FAILURES = 20
# moto keeps every run's items, execution history and artifacts in memory, so RSS grows with the runs even
# without a leak: about 300 kB a run over the second half of a 400-run soak (docs/benchmarks.md). The limit
# sits above that.
MAX_RSS_SLOPE_KB = 512.0
MAX_THREAD_MAPS_SLOPE = 0.01  # one thread stack kept per 100 runs


def good(outcome: RunOutcome) -> bool:
    return outcome.status in ("completed", "partial") and not outcome.violations and not outcome.unverified


def describe(outcome: RunOutcome) -> str:
    why = [outcome.create_error or f"status {outcome.status}", *outcome.violations, *outcome.unverified]
    return f"{outcome.spec.marker} run {outcome.run_id}: {'; '.join(w for w in why if w)}"


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument("--sample-every", type=int, default=SAMPLE_EVERY, help="runs between footprint samples")
    parser.add_argument("--warmup", type=int, default=WARMUP_RUNS)
    parser.add_argument("--run-deadline", type=float, default=RUN_DEADLINE_S, help="seconds a run may take")
    parser.add_argument("--max-rss-slope-kb", type=float, default=MAX_RSS_SLOPE_KB, help="per run, second half")
    parser.add_argument("--max-thread-maps-slope", type=float, default=MAX_THREAD_MAPS_SLOPE, help="per run")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.sample_every < 1 or args.warmup < 0 or args.run_deadline <= 0:
        parser.error("--runs and --sample-every must be at least 1, --warmup not negative")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    keys = account_keys("soak", max(3, math.ceil((args.runs + args.warmup) / RUNS_PER_ACCOUNT)))
    session = uuid.uuid4().hex[:6]
    rng = random.Random(SEED)
    stop = threading.Event()
    samples: list[tuple[int, Footprint]] = []
    failures: list[RunOutcome] = []
    done = 0
    started = time.monotonic()
    with terminated_gracefully(), Server(keys, "soak") as server:
        print(f"  canvas serve pid {server.pid} on {server.base_url}; log {server.log_path}", flush=True)
        if note := stack_rlimit_note():
            print(f"  {note}", flush=True)
        server.watch(stop)
        client = Client(server.base_url, random.Random(SEED), stop, args.run_deadline)
        try:
            for spec in workload("warmup", session, args.warmup, rng, MAX_BLOCKS):
                client.execute(spec, keys[spec.index % len(keys)], keys[(spec.index + 1) % len(keys)])
            samples.append((0, footprint(server.pid)))
            print(f"  after warm-up: {samples[-1][1]}", flush=True)
            for spec in workload("soak", session, args.runs, rng, MAX_BLOCKS):
                outcome = client.execute(spec, keys[spec.index % len(keys)], keys[(spec.index + 1) % len(keys)])
                done += 1
                if not good(outcome):
                    failures.append(outcome)
                    print(f"  failed: {describe(outcome)}", flush=True)
                if done % args.sample_every == 0 or done == args.runs:
                    samples.append((done, footprint(server.pid)))
                    print(f"  {done} runs ({time.monotonic() - started:.0f}s): {samples[-1][1]}", flush=True)
                if stop.is_set() or len(failures) >= MAX_FAILURES:
                    print(f"  stopping after {done} runs: {len(failures)} failed", flush=True)
                    break
        finally:
            stop.set()
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
    print(f"soak: {'FAIL: ' + '; '.join(problems) if problems else 'PASS'}", flush=True)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
