"""Cold-import time of the poll handler (functions/api/get_run) against importing boto3 alone.

Each sample is a fresh interpreter that imports the module and reports how long the import took, as a Lambda
cold start would; the figure is the median over the samples. Target: the handler within 2x of boto3.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = 15

_TIMED_IMPORT = """
import sys, time
sys.path.insert(0, {path!r})
start = time.perf_counter()
import {module}
print((time.perf_counter() - start) * 1000)
"""


def import_ms(module: str, path: str = "") -> float:
    # The environment the poll function has on AWS: tracing off (template.yaml), no endpoint override.
    env = {**os.environ, "POWERTOOLS_TRACE_DISABLED": "true", "POWERTOOLS_SERVICE_NAME": "canvas-run-service"}
    samples = []
    for _ in range(SAMPLES):
        out = subprocess.run(
            [sys.executable, "-c", _TIMED_IMPORT.format(path=path, module=module)],
            capture_output=True,
            text=True,
            check=True,
            env=env,
        )
        samples.append(float(out.stdout.strip()))
    return statistics.median(samples)


def main() -> None:
    boto3_ms = import_ms("boto3")
    handler_ms = import_ms("app", str(ROOT / "functions" / "api" / "get_run"))
    print(f"cold_import_boto3_ms {boto3_ms:.0f}")
    print(f"cold_import_poll_handler_ms {handler_ms:.0f}")
    print(f"cold_import_ratio {handler_ms / boto3_ms:.2f}")
