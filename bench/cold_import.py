"""Cold-import time of the poll handler (functions/api/get_run) against importing boto3 alone.

Each sample is a fresh interpreter that imports the module and reports how long the import took, as a Lambda
cold start would; the figure is the median over the samples. canvas_core is imported as the layer ships it
(layers/shared/Makefile): a copy with its bytecode compiled. Target: the handler within 2x of boto3.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = 25

_TIMED_IMPORT = """
import sys, time
sys.path[:0] = {paths!r}
start = time.perf_counter()
import {module}
print((time.perf_counter() - start) * 1000)
"""


def import_ms(module: str, paths: list[str] | None = None) -> float:
    """One cold import of `module`, in milliseconds, in a fresh interpreter."""
    # The environment the poll function has on AWS: tracing off (template.yaml), no endpoint override.
    env = {**os.environ, "POWERTOOLS_TRACE_DISABLED": "true", "POWERTOOLS_SERVICE_NAME": "canvas-run-service"}
    out = subprocess.run(
        [sys.executable, "-c", _TIMED_IMPORT.format(paths=paths or [], module=module)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    return float(out.stdout.strip())


def main() -> None:
    boto3_samples, handler_samples = [], []
    with tempfile.TemporaryDirectory() as layer:
        shutil.copytree(ROOT / "layers" / "shared" / "canvas_core", Path(layer) / "canvas_core")
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", "--invalidation-mode", "unchecked-hash", layer], check=True
        )
        handler_paths = [str(ROOT / "functions" / "api" / "get_run"), layer]
        # Interleaved, so that the machine's drift weighs on both alike.
        for _ in range(SAMPLES):
            boto3_samples.append(import_ms("boto3"))
            handler_samples.append(import_ms("app", handler_paths))
    boto3_ms, handler_ms = statistics.median(boto3_samples), statistics.median(handler_samples)
    print(f"cold_import_boto3_ms {boto3_ms:.0f}")
    print(f"cold_import_poll_handler_ms {handler_ms:.0f}")
    print(f"cold_import_ratio {handler_ms / boto3_ms:.2f}")
