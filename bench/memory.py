"""Where the embedded stack's memory goes, run after run: N offline runs on a LocalStack in this process, with
what each run leaves behind counted in moto's backends (DynamoDB items, S3 bodies, executions, SQS messages), in
the caches of moto_patch, and (with --tracemalloc) by the allocating line and file. Not part of `make bench`:

    .venv/bin/python -m bench.memory --runs 300 [--workers 4] [--tracemalloc] [--retention-days N] [--without PATCH]

RSS is sampled after the warm-up and every --sample-every runs; `memory_rss_growth_kb_per_run` is the least-squares
slope over the second half of the runs, as bench/soak.py reports it. The census and tracemalloc growth are between
the middle of the runs and their end, per run.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import gc
import json
import logging
import math
import os
import random
import re
import sys
import tempfile
import threading
import time
import tracemalloc
from collections import Counter
from collections.abc import Sequence
from typing import Any

from bench import STACK_PARAMETERS
from bench.growth import second_half, slope
from bench.load import SEED, workload
from bench.moto_patches import MEMORY_PATCHES, memory_patches_left_out
from canvas_core.models.api import CreateRunRequest
from canvas_core.runs import create_run
from canvas_local import moto_patch
from canvas_local.cli import fix_mmap_threshold, limit_malloc_arenas
from canvas_local.lambda_runtime import ACCOUNT_ID, REGION
from canvas_local.moto_patch import speed_dynamodb, transactions
from canvas_local.stack import LocalStack

RUNS = 300
WORKERS = 4
WARMUP_RUNS = 16
SAMPLE_EVERY = 25
RUNS_PER_ACCOUNT = 150  # an account holds 5,000 credits; a run of this mix costs about 12
TOP = 15


def rss_kb() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def heap() -> dict[str, float]:
    """Where RSS lies by allocator, in kB: glibc's heaps (in use and free) and its own mappings, and pymalloc's
    arenas (in use and free). A growth that tracemalloc does not see shows here: in use, a native allocation kept;
    free, fragmentation."""
    found: dict[str, float] = {}
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    if hasattr(libc, "mallinfo2"):
        libc.mallinfo2.restype = MallInfo2
        info = libc.mallinfo2()
        found["glibc heap in use kb"] = info.uordblks / 1024
        found["glibc heap free kb"] = info.fordblks / 1024
        found["glibc mmapped kb"] = info.hblkhd / 1024
    with tempfile.TemporaryFile() as captured:
        saved = os.dup(2)
        try:
            sys.stderr.flush()
            os.dup2(captured.fileno(), 2)
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        captured.seek(0)
        text = captured.read().decode("ascii", "replace")
    for label, pattern in (
        ("pymalloc arenas kb", r"bytes/arena\s*=\s*([\d,]+)"),
        ("pymalloc in use kb", r"# bytes in allocated blocks\s*=\s*([\d,]+)"),
        ("pymalloc free kb", r"# bytes in available blocks\s*=\s*([\d,]+)"),
    ):
        if match := re.search(pattern, text):
            value = int(match.group(1).replace(",", ""))
            found[label] = value / 1024
    return found


def census(stack: LocalStack) -> dict[str, float]:
    """What moto holds, by kind: counts and approximate bytes (items as JSON, object bodies as stored)."""
    from moto.dynamodb.models import dynamodb_backends
    from moto.s3.models import s3_backends
    from moto.sqs.models import sqs_backends
    from moto.stepfunctions.parser.models import stepfunctions_parser_backends

    counts: dict[str, float] = {}
    with moto_patch.service_lock("dynamodb"):
        for table in dynamodb_backends[ACCOUNT_ID][REGION].tables.values():
            items = list(table.all_items())
            name = table.name.split("-")[-1] if "-" in table.name else table.name
            counts[f"dynamodb {name} items"] = len(items)
            counts[f"dynamodb {name} kb"] = sum(len(json.dumps(i.to_json())) for i in items) / 1024
            if isinstance(table.items, moto_patch.PackedItems | moto_patch.PackedPartitions):
                counts[f"dynamodb {name} packed kb"] = table.items.packed_bytes() / 1024
    with moto_patch.service_lock("s3"):
        for bucket in s3_backends[ACCOUNT_ID]["aws"].buckets.values():
            in_memory = on_disk = 0
            prefixes: Counter[str] = Counter()
            for key in bucket.keys.values():
                buffer = getattr(key, "_value_buffer", None)
                size = key.size or 0
                if isinstance(buffer, moto_patch.DiskBody) or getattr(buffer, "_rolled", False):
                    on_disk += size
                else:
                    in_memory += size
                prefixes[key.name.split("/")[0]] += 1
            counts["s3 objects"] = len(bucket.keys)
            counts["s3 bodies in memory kb"] = in_memory / 1024
            counts["s3 bodies on disk kb"] = on_disk / 1024
            for prefix, count in prefixes.items():
                counts[f"s3 {prefix}/ objects"] = count
    with moto_patch.service_lock("stepfunctions"):
        backend = stepfunctions_parser_backends[ACCOUNT_ID][REGION]
        counts["sfn executions kept"] = sum(len(m.executions) for m in backend.state_machines)
        counts["sfn history events kept"] = sum(
            len(e.exec_worker.env.event_manager.get_event_history())
            for m in backend.state_machines
            for e in m.executions
            if e.exec_worker is not None and e.exec_worker.env is not None
        )
    with moto_patch.service_lock("sqs"):
        for queue in sqs_backends[ACCOUNT_ID][REGION].queues.values():
            counts[f"sqs {queue.name} messages"] = len(queue._messages)
    counts["transaction tokens kept"] = len(transactions._applied_tokens)
    counts["condition parses kept"] = len(speed_dynamodb._condition_parses)
    counts["threads"] = threading.active_count()
    return counts


def objects_by_type() -> Counter[str]:
    gc.collect()
    return Counter(type(o).__qualname__ for o in gc.get_objects())


class Driver:
    def __init__(self, stack: LocalStack, workers: int):
        self.stack = stack
        self.workers = workers
        self.accounts = list(stack.accounts.values())
        arn = stack.state_machine_arns["RunCanvasStateMachine"]
        self.prefix = arn.replace(":stateMachine:", ":execution:")
        self.done = 0
        self.statuses: Counter[str] = Counter()
        self._lock = threading.Lock()

    def run(self, specs: list[Any], on_each: Any = None) -> None:
        pending = list(enumerate(specs))
        lock = threading.Lock()

        def work() -> None:
            while True:
                with lock:
                    if not pending:
                        return
                    _, spec = pending.pop(0)
                account = self.accounts[(self.done // RUNS_PER_ACCOUNT) % len(self.accounts)]
                request = CreateRunRequest(
                    prompt=spec.prompt,
                    template=spec.template or "auto",
                    blocks=list(spec.blocks) if spec.blocks else None,
                )
                for _attempt in range(200):
                    try:
                        created = create_run(request, account)
                        break
                    except Exception as exc:  # 429 while the account has 10 runs running
                        if "concurrent" not in str(exc).lower() and "Too many" not in str(exc):
                            raise
                        time.sleep(0.2)
                ended = self.stack.wait_for_execution(f"{self.prefix}:{created.run_id}", timeout=300)
                with self._lock:
                    self.done += 1
                    self.statuses[ended["status"]] += 1
                    number = self.done
                if on_each is not None:
                    on_each(number)

        threads = [threading.Thread(target=work) for _ in range(self.workers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()


def print_growth(title: str, before: dict[str, float], after: dict[str, float], runs: int) -> None:
    print(f"{title} (per run, over the last {runs} runs)")
    for name in sorted(after, key=lambda n: -abs(after[n] - before.get(n, 0))):
        delta = (after[name] - before.get(name, 0)) / runs
        if delta:
            print(f"  {name:<45} {delta:10.2f}   (now {after[name]:.0f})")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.memory", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument("--workers", type=int, default=WORKERS)
    parser.add_argument("--warmup", type=int, default=WARMUP_RUNS)
    parser.add_argument("--sample-every", type=int, default=SAMPLE_EVERY)
    parser.add_argument("--tracemalloc", action="store_true", help="allocation growth by line and file (slower)")
    parser.add_argument(
        "--frames",
        type=int,
        default=1,
        help="with --tracemalloc: frames kept per allocation; above 1, the growth "
        "by whole traceback is printed too (slower still)",
    )
    parser.add_argument("--retention-days", type=int, default=None, help="the stack's local retention")
    parser.add_argument(
        "--without",
        action="append",
        default=[],
        choices=sorted(MEMORY_PATCHES),
        help="a memory patch of moto_patch left out, to measure what it keeps (repeatable)",
    )
    args = parser.parse_args(argv)
    for noisy in ("werkzeug", "botocore", "canvas_local", "moto"):
        logging.getLogger(noisy).setLevel(logging.ERROR)
    accounts = max(1, math.ceil((args.runs + args.warmup) / RUNS_PER_ACCOUNT))
    keys = [f"sk_canvas_bench_memory_{i:02d}_{'0' * 24}" for i in range(accounts)]
    rng = random.Random(SEED)
    limit_malloc_arenas()  # as `canvas serve` does
    fix_mmap_threshold()
    extra: dict[str, Any] = {}
    if args.retention_days is not None:
        extra["retention_days"] = args.retention_days
    with (
        memory_patches_left_out(args.without),
        LocalStack(api_keys=keys, parameter_overrides=STACK_PARAMETERS, **extra) as stack,
    ):
        driver = Driver(stack, args.workers)
        driver.run(workload("warmup", "mem", args.warmup, rng, max_blocks=4))
        gc.collect()
        if args.tracemalloc:
            tracemalloc.start(max(1, args.frames))
        samples: list[tuple[int, float]] = [(0, rss_kb())]
        middle: dict[str, Any] = {}
        half = args.runs // 2

        def on_each(done: int) -> None:
            number = done - args.warmup  # the driver counts the warm-up's runs too
            if number % args.sample_every == 0 or number == half:
                samples.append((number, rss_kb()))
            if number == half:
                middle["census"] = census(stack)
                middle["heap"] = heap()
                middle["types"] = objects_by_type()
                if args.tracemalloc:
                    middle["snapshot"] = tracemalloc.take_snapshot()
                print(f"  {number} runs: rss {rss_kb()} kB", flush=True)

        started = time.monotonic()
        driver.run(workload("memory", "mem", args.runs, rng, max_blocks=4), on_each)
        elapsed = time.monotonic() - started
        time.sleep(2)  # the watcher's tidy-up after the last endings
        gc.collect()
        samples.append((args.runs, rss_kb()))
        end_census = census(stack)
        end_heap = heap()
        end_types = objects_by_type()
        snapshot = tracemalloc.take_snapshot() if args.tracemalloc else None
        runs = args.runs - half
        print(f"runs {args.runs} in {elapsed:.0f}s, statuses {dict(driver.statuses)}")
        print_growth("census growth", middle["census"], end_census, runs)
        print_growth("heap growth, kB", middle["heap"], end_heap, runs)
        print(f"objects by type growth (per run, over the last {runs} runs)")
        grown = Counter({k: end_types[k] - middle["types"].get(k, 0) for k in end_types})
        for name, count in grown.most_common(TOP):
            print(f"  {name:<45} {count / runs:10.2f}   (now {end_types[name]})")
        if snapshot is not None:
            for group in ("filename", "lineno"):
                print(f"tracemalloc growth by {group} (KB per run)")
                stats = snapshot.filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)]).compare_to(
                    middle["snapshot"], group
                )
                for stat in stats[:TOP]:
                    frame = stat.traceback[0]
                    where = frame.filename if group == "filename" else f"{frame.filename}:{frame.lineno}"
                    print(f"  {stat.size_diff / 1024 / runs:8.1f}  {where[-90:]}")
                total = sum(s.size_diff for s in stats) / 1024 / runs
                print(f"  {total:8.1f}  total traced")
            if args.frames > 1:
                print("tracemalloc growth by traceback (KB per run, innermost frame last)")
                stats = snapshot.filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)]).compare_to(
                    middle["snapshot"], "traceback"
                )
                for stat in stats[:TOP]:
                    print(f"  {stat.size_diff / 1024 / runs:8.1f}")
                    for frame in stat.traceback:
                        print(f"            {frame.filename[-70:]}:{frame.lineno}")
    later = second_half(samples, args.runs)
    first, last = samples[0][1], samples[-1][1]
    # A step in RSS is a first use (a block's libraries imported, a cache filling), a slope is what runs keep.
    print("rss samples (runs: MB): " + ", ".join(f"{n}: {kb / 1024:.0f}" for n, kb in samples))
    print(f"memory_rss_growth_kb_per_run {slope(later):.1f} (second half; rss {first} -> {last} kB)")
    if any(status != "SUCCEEDED" for status in driver.statuses):
        sys.exit(1)


if __name__ == "__main__":
    main(sys.argv[1:])
