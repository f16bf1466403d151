"""`python -m bench [NAME ...]`: run the named benchmarks (all by default) and print one line per figure."""

from __future__ import annotations

import argparse

from bench import archive_limits, cold_import, load, makespan, render

BENCHMARKS = {
    "cold_import": cold_import.main,
    "makespan": makespan.main,
    "archive_limits": archive_limits.main,
    "render": render.main,
    "load": load.main,
}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("names", nargs="*", choices=[[], *BENCHMARKS], help="benchmarks to run (default: all)")
    args = parser.parse_args()
    for name in args.names or BENCHMARKS:
        BENCHMARKS[name]()


if __name__ == "__main__":
    main()
