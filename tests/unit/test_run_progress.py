"""The live progress line of `canvas run`: its estimate, rounded up, and what it says once a run is past it."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from canvas_local.client.progress import RunProgress

pytestmark = pytest.mark.unit


def line_after(estimate_ms: int | None, run: dict) -> str:
    console = Console(file=io.StringIO(), width=160, color_system=None)
    bar = RunProgress(console, estimate_ms)
    bar.update(run, {"nodes": [{"name": "Outline", "status": "running"}]})
    console.print(bar._progress.get_renderable())
    return console.file.getvalue()


def running(elapsed_ms: int) -> dict:
    return {"status": "running", "progress": {"tasks_total": 3, "tasks_completed": 1, "elapsed_ms": elapsed_ms}}


def test_the_estimate_is_rounded_up_to_the_second():
    # Given the offline estimate of a report (1.6 s), when the run has just started
    line = line_after(1_600, running(200))

    # Then the line shows two seconds, not the one a floor would show
    assert "est. 0:00:02" in line
    assert "over est." not in line


def test_a_run_past_its_estimate_says_so():
    # Given a run whose elapsed time has passed its 1.6 s estimate, as a run retried after a conflict does
    line = line_after(1_600, running(4_000))

    # Then the line says the run is over the estimate, next to its elapsed time
    assert "0:00:04 over est. 0:00:02" in line


def test_an_ended_run_keeps_its_estimate_beside_its_duration():
    # Given a run that ended in 4 s against an estimate of 1.6 s
    line = line_after(1_600, {"status": "completed", "duration_ms": 4_000})

    # Then the finished line shows its duration and the estimate, not a run still going over it
    assert "0:00:04 est. 0:00:02" in line


def test_no_estimate_shows_none():
    assert "est." not in line_after(None, running(200))
