"""`python -m bench [NAME ...]`: run the named benchmarks (all by default) and print one line per figure.

Standard output holds the figures alone; what the code under test logs goes to a log file, named on standard
error before the first benchmark starts."""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from bench.output import default_log_path, figures_only

# Imported when run, after the log file is in place (bench/output.py says why).
BENCHMARKS = (
    "cold_import",
    "makespan",
    "faults",
    "handoff",
    "archive_limits",
    "render",
    "analysis",
    "analysis_questions",
    "model_inputs",
    "estimates",
    "load",
)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("names", nargs="*", choices=[[], *BENCHMARKS], help="benchmarks to run (default: all)")
    parser.add_argument("--log", type=Path, help="the log file (default: canvas-bench-<UTC time>.log in the temp dir)")
    args = parser.parse_args()
    log_path = args.log or default_log_path()
    print(f"bench: logs in {log_path}", file=sys.stderr, flush=True)
    with figures_only(log_path):
        for name in args.names or BENCHMARKS:
            importlib.import_module(f"bench.{name}").main()


if __name__ == "__main__":
    main()
