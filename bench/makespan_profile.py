"""The workload profiled in docs/benchmarks.md ("Where a block's time went"): one wide canvas (a block, 36 blocks
reading it, one block reading all 36) and one chain of 20, all zero-latency, through the embedded stack.

`py-spy record --gil --format raw -r 100 -o profile.txt -- .venv/bin/python -m bench.makespan_profile` samples
the thread holding the interpreter lock: the stack is one process, so a block's overhead is the CPU spent on it.
"""

from __future__ import annotations

import argparse
import logging
import time

from bench import STACK_PARAMETERS
from bench.dags import Block, Dag
from bench.makespan import API_KEY, Runner
from canvas_local.stack import LocalStack


def wide(width: int) -> Dag:
    blocks = [Block(0.0) for _ in range(width + 2)]
    edges = [(0, i) for i in range(1, width + 1)] + [(i, width + 1) for i in range(1, width + 1)]
    return Dag(blocks, edges)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--width", type=int, default=36)
    parser.add_argument("--chains-only", action="store_true", help="only the chain, to time the overhead per block")
    args = parser.parse_args()
    for noisy in ("werkzeug", "botocore", "canvas_local"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    with LocalStack(api_keys=[API_KEY], parameter_overrides=STACK_PARAMETERS) as stack:
        runner = Runner(stack)
        runner.run("warm-up", Dag([Block(0.0) for _ in range(3)], [(0, 1), (1, 2)]))
        chain = Dag([Block(0.0) for _ in range(20)], [(i, i + 1) for i in range(19)])
        for round_ in range(args.rounds):
            if not args.chains_only:
                cpu = time.process_time()
                makespan, _ = runner.run(f"wide-{round_}", wide(args.width))
                cpu_ms = (time.process_time() - cpu) * 1000
                print(f"wide_{args.width + 2}_makespan_ms {makespan * 1000:.0f} cpu_ms {cpu_ms:.0f}")
            cpu = time.process_time()
            makespan, _ = runner.run(f"chain-{round_}", chain)
            # The whole run's CPU (planning, parking, finalizing, reading its history), per block.
            cpu_ms = (time.process_time() - cpu) * 1000 / 20
            # The CPU over the chain's makespan alone, which other load on the machine disturbs less than wall time.
            chain_cpu_ms = runner.makespan_cpu * 1000 / 20
            print(
                f"chain_20_ms_per_block {makespan / 20 * 1000:.1f} cpu_ms_per_block {chain_cpu_ms:.1f} "
                f"cpu_ms_per_block_of_the_run {cpu_ms:.0f}"
            )


if __name__ == "__main__":
    main()
