"""The analysis of a large table (canvas_core/analysis/): DuckDB's import time and installed size, loading and
analysing an 84,323-row sales CSV, writing its workbook with every row, and whole runs of the templates over it
on the embedded stack with the offline provider (upload to final answer).

Figures: `analysis_duckdb_import_ms` (a fresh interpreter, median of 5), `analysis_duckdb_installed_mb` (the
package's files on this machine), `analysis_84k_rows_analyse_s` and `analysis_84k_rows_workbook_s` (median of 3
after a warm-up), and `analysis_84k_rows_run_<template>_s` (one run each, from the request to the execution's
end). Target: every run under 10 s. `python -m bench analysis` runs it.
"""

from __future__ import annotations

import importlib.metadata
import logging
import random
import statistics
import subprocess
import sys
import time

from bench import STACK_PARAMETERS
from bench.render import median_seconds

ROWS = 84_323
API_KEY = "sk_canvas_bench_analysis_key_0000000000000"
RUN_TIMEOUT_S = 300
PROMPTS = {
    "excel": "Monthly revenue by region and product",
    "slides": "Make slides on monthly revenue by region and product",
    "auto": "Which product or region did best?",
    "report": "Write a report on revenue by region and product",
}


def sales_csv(rows: int = ROWS, seed: int = 84323) -> bytes:
    rnd = random.Random(seed)
    months = [f"2025-{m:02d}" for m in range(1, 13)]
    lines = ["month,region,product,units,revenue"]
    for _ in range(rows):
        region, product = rnd.choice(("North", "South", "East", "West")), rnd.choice(("Widget", "Gadget", "Gizmo"))
        lines.append(f"{rnd.choice(months)},{region},{product},{rnd.randint(1, 40)},{rnd.randint(100, 500_000) / 100}")
    return ("\n".join(lines) + "\n").encode()


def import_ms(samples: int = 5) -> float:
    code = "import time; t = time.perf_counter(); import duckdb; print((time.perf_counter() - t) * 1000)"
    times = [float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
             for _ in range(samples)]  # fmt: skip
    return statistics.median(times)


def installed_mb() -> float:
    files = importlib.metadata.files("duckdb") or []
    return sum(f.locate().stat().st_size for f in files if f.locate().is_file()) / 1e6


def main() -> None:
    from canvas_core.analysis.analyse import analyse
    from canvas_core.analysis.engine import load_file
    from canvas_core.blocks.excel import analysed_workbook
    from canvas_core.render import xlsx

    print(f"analysis_duckdb_import_ms {import_ms():.0f}")
    print(f"analysis_duckdb_installed_mb {installed_mb():.1f}")
    data = sales_csv()

    def analysed() -> object:
        [dataset] = load_file("sales.csv", "csv", data)
        return analyse(dataset, PROMPTS["excel"])

    print(f"analysis_84k_rows_analyse_s {median_seconds(analysed):.2f}")

    def workbook() -> bytes:
        [dataset] = load_file("sales.csv", "csv", data)
        analysis = analyse(dataset, PROMPTS["excel"])
        assert analysis is not None
        out = xlsx.render_workbook(analysed_workbook("Sales", [analysis]))
        xlsx.check_xlsx(out)
        return out

    print(f"analysis_84k_rows_workbook_s {median_seconds(workbook):.2f}")
    for template, seconds in runs(data).items():
        print(f"analysis_84k_rows_run_{template}_s {seconds:.1f}")


def runs(data: bytes) -> dict[str, float]:
    """Each template once over the table, timed from the request to the execution's end."""
    from canvas_core.auth import authenticate
    from canvas_core.models.api import CreateRunRequest, UploadedFile
    from canvas_core.models.catalog import Template
    from canvas_core.runs import create_run
    from canvas_local.stack import LocalStack

    for noisy in ("werkzeug", "botocore", "canvas_local"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    upload = UploadedFile(name="sales.csv", extension="csv", content_type="text/csv", data=data)
    found = {}
    with LocalStack(api_keys=[API_KEY], parameter_overrides=STACK_PARAMETERS) as stack:
        account_id = authenticate({"X-API-KEY": API_KEY})
        prefix = stack.state_machine_arns["RunCanvasStateMachine"].replace(":stateMachine:", ":execution:")
        for template, prompt in PROMPTS.items():
            started = time.monotonic()
            created = create_run(
                CreateRunRequest(prompt=prompt, template=Template(template), files=[upload]), account_id
            )
            ended = stack.wait_for_execution(f"{prefix}:{created.run_id}", timeout=RUN_TIMEOUT_S)
            if ended["status"] != "SUCCEEDED":
                raise RuntimeError(f"{template}: execution {ended['status']}")
            found[template] = time.monotonic() - started
    return found


if __name__ == "__main__":
    main()
