"""What each of moto_patch's speed patches buys: chains of 20 zero-latency blocks through the embedded stack, each
patch in turn taken out and put back between chains, so that runs with and without it alternate (A B A B) in one
process and in one window of the machine's load. Not part of `make bench`:

    .venv/bin/python -m bench.moto_patches [--rounds 3] [--stored 0] [--log PATH] [PATCH ...]

Prints, for each patch, the medians over `--rounds` chains with it and without it of the process's CPU per block
over the whole run (planning, the blocks, finishing: every thread, the stack being one process), and the gain.
`--stored N` first writes N filler items into the stack's tables, as a stack that has stored many runs holds them:
the patches whose moto code reads every item of a table show there. As in `python -m bench`, what the code under
test logs goes to a log file and Powertools' metrics are off.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from bench.output import default_log_path, figures_only
from canvas_local import moto_patch

if TYPE_CHECKING:
    from bench.makespan import Runner

CHAIN = 20
ITEMS_PER_PARTITION = 20
# The memory patches by name, each the install function the embedded stack calls for it.
MEMORY_PATCHES = {
    "untracked_models": "install_untracked_models",
    "disk_bodies": "install_disk_bodies",
    "packed_items": "install_packed_items",
}


@contextlib.contextmanager
def memory_patches_left_out(names: Sequence[str]) -> Iterator[None]:
    """Within, a LocalStack started installs none of the memory patches named (bench/memory.py's `--without`)."""
    originals = {MEMORY_PATCHES[name]: getattr(moto_patch, MEMORY_PATCHES[name]) for name in names}
    for install in originals:
        setattr(moto_patch, install, lambda *_: None)
    try:
        yield
    finally:
        for install, original in originals.items():
            setattr(moto_patch, install, original)


def cpu_ms_per_block(runner: Runner, name: str) -> float:
    from bench.dags import Block, Dag

    chain = Dag([Block(0.0) for _ in range(CHAIN)], [(i, i + 1) for i in range(CHAIN - 1)])
    cpu = time.process_time()
    runner.run(name, chain)
    return (time.process_time() - cpu) * 1000 / CHAIN


def store_fillers(count: int) -> None:
    """`count` items of about 0.5 kB spread over the stack's tables, under keys no run uses."""
    from moto.dynamodb.models import dynamodb_backends

    from canvas_local.lambda_runtime import ACCOUNT_ID, REGION

    backend = dynamodb_backends[ACCOUNT_ID][REGION]
    tables = list(backend.tables.values())
    with moto_patch.service_lock("dynamodb"):
        for i in range(count):
            table = tables[i % len(tables)]
            item = {"filler": {"S": "x" * 500}}
            for position, attribute in enumerate((table.hash_key_attr, table.range_key_attr)):
                if not attribute:
                    continue
                kind = next((d["AttributeType"] for d in table.attr if d["AttributeName"] == attribute), "S")
                # Items share a partition by twenties, as a run's tasks and canvas nodes do.
                number = i // ITEMS_PER_PARTITION if position == 0 and table.range_key_attr else i
                item[attribute] = {"N": str(number)} if kind == "N" else {kind: f"filler-{number}"}
            backend.put_item(table.name, item)


def measure(runner: Runner, name: str, patch: moto_patch.SpeedPatch, rounds: int) -> tuple[list[float], list[float]]:
    """The CPU per block of each chain with the patch and of each without it, alternating."""
    with_: list[float] = []
    without: list[float] = []
    for round_ in range(rounds):
        with_.append(cpu_ms_per_block(runner, f"{name}-with-{round_}"))
        patch.uninstall()
        try:
            without.append(cpu_ms_per_block(runner, f"{name}-without-{round_}"))
        finally:
            patch.install()
    return with_, without


def run(names: Sequence[str], rounds: int, stored: int) -> None:
    from bench import STACK_PARAMETERS
    from bench.makespan import API_KEY, Runner
    from canvas_local.stack import LocalStack

    patches = moto_patch.speed_patches()
    with LocalStack(api_keys=[API_KEY], parameter_overrides=STACK_PARAMETERS) as stack:
        runner = Runner(stack)
        store_fillers(stored)
        for warm_up in range(2):
            cpu_ms_per_block(runner, f"warm-up-{warm_up}")
        for name in names:
            with_, without = measure(runner, name, patches[name], rounds)
            with_ms, without_ms = statistics.median(with_), statistics.median(without)
            gain = (without_ms - with_ms) / without_ms * 100
            # Each round's pair, taken one after the other, shows the noise the medians are read against.
            pairs = " ".join(f"{a:.1f}/{b:.1f}" for a, b in zip(with_, without, strict=True))
            print(
                f"moto_patch_{name}_cpu_ms_per_block with {with_ms:.1f} without {without_ms:.1f} gain_pct {gain:.1f} "
                f"(pairs with/without: {pairs})"
            )


def main(argv: Sequence[str] | None = None) -> None:
    names = list(moto_patch.speed_patches())
    parser = argparse.ArgumentParser(prog="python -m bench.moto_patches", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--stored", type=int, default=0, help="filler items stored before measuring")
    parser.add_argument("--log", type=Path, default=None, help="the log file (default: as python -m bench)")
    parser.add_argument("patches", nargs="*", choices=[[], *names], default=[], help="default: every one")
    args = parser.parse_args(argv)
    log_path = args.log or default_log_path()
    print(f"logging to {log_path}", file=sys.stderr)
    with figures_only(log_path):
        for noisy in ("werkzeug", "botocore", "canvas_local"):
            logging.getLogger(noisy).setLevel(logging.WARNING)
        run(args.patches or names, args.rounds, args.stored)


if __name__ == "__main__":
    main()
