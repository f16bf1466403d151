"""Where `python -m bench` writes: the figures the benchmarks print on standard output, and everything the code
under test logs (Powertools' JSON lines, moto's errors, the embedded stack's records) in a log file.

Powertools builds each Logger's handler over whatever `sys.stdout` is when the Logger is created, often at
import: so the log file is `sys.stdout` for the whole run, the benchmarks' `print` writes to the real standard
output, and the benchmark modules are imported only once both are in place.
"""

from __future__ import annotations

import builtins
import datetime as dt
import logging
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def default_log_path() -> Path:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return Path(tempfile.gettempdir()) / f"canvas-bench-{stamp}.log"


@contextmanager
def figures_only(log_path: Path) -> Iterator[Path]:
    """Within: `print` writes to the standard output of the moment, logging and other writes to `sys.stdout`
    (loggers made before or within) go to `log_path`, appended to."""
    figures = sys.stdout
    builtin_print = builtins.print

    def print_figure(*values: Any, file: Any = None, **options: Any) -> None:
        builtin_print(*values, file=figures if file is None else file, **options)

    # Powertools writes embedded metrics with `print`, which is the figures' own here: the code under test counts
    # nothing while the benchmarks run.
    metrics_disabled = os.environ.get("POWERTOOLS_METRICS_DISABLED")
    os.environ["POWERTOOLS_METRICS_DISABLED"] = "true"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("a", encoding="utf-8", buffering=1) as log:
        # Records of loggers without a handler of their own (moto's, werkzeug's) would otherwise reach stderr.
        handler = logging.StreamHandler(log)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root = logging.getLogger()
        root.addHandler(handler)
        sys.stdout, builtins.print = log, print_figure
        try:
            yield log_path
        finally:
            sys.stdout, builtins.print = figures, builtin_print
            root.removeHandler(handler)
            if metrics_disabled is None:
                os.environ.pop("POWERTOOLS_METRICS_DISABLED", None)
            else:
                os.environ["POWERTOOLS_METRICS_DISABLED"] = metrics_disabled
