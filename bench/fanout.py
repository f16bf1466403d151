"""Canvases whose blocks release several dependents at once, with the running mark's wait set in turn to each value
given: where the functions share one interpreter (the embedded stack), what the first released blocks write
delays the start of those released after them.

`python -m bench.fanout --mark-after 0,0.05` runs the makespan suite's fan and three of its layered DAGs that fan
out (`--dags`), once per value and round, the values alternating in order and in reverse, so that each value sees
the same machine; it prints, per value, the median over the rounds of the DAGs' summed overhead (makespan minus
critical path). Not part of `make bench`.
"""

from __future__ import annotations

import argparse
import logging
import statistics

from bench import STACK_PARAMETERS
from bench.makespan import API_KEY, Runner, suite
from canvas_core.blocks import runner
from canvas_local.stack import LocalStack

DAGS = "fan,layered-6,layered-29,layered-13"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mark-after", default=f"0,{runner.MARK_AFTER_SECONDS}", help="seconds, comma-separated")
    parser.add_argument("--dags", default=DAGS, help="names of the makespan suite's DAGs, comma-separated")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    values = [float(value) for value in args.mark_after.split(",")]
    dags = dict(suite())
    names = args.dags.split(",")
    for noisy in ("werkzeug", "botocore", "canvas_local"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    overheads: dict[float, list[float]] = {value: [] for value in values}
    with LocalStack(api_keys=[API_KEY], parameter_overrides=STACK_PARAMETERS) as stack:
        runs = Runner(stack)
        runs.run("fanout-warm-up", dags["chain"])
        for round_ in range(args.rounds):
            for value in values if round_ % 2 == 0 else values[::-1]:
                runner.MARK_AFTER_SECONDS = value
                total = 0.0
                for name in names:
                    makespan, _ = runs.run(f"fanout-{name}-{round_}-{value}", dags[name])
                    total += (makespan - dags[name].critical_path()) * 1000
                overheads[value].append(total)
    for value, seen in overheads.items():
        rounds = ", ".join(f"{total:.0f}" for total in seen)
        print(f"fanout_overhead_ms_p50_mark_after_{value:g} {statistics.median(seen):.0f} (rounds: {rounds})")


if __name__ == "__main__":
    main()
