"""Re-running one block of a canvas over HTTP on the embedded stack (POST /v1/canvas/{canvas_id}/blocks/{block_id}/
rerun): the chosen block and what depends on it run again on a copy of the canvas, the rest is reused, unpaid."""

from __future__ import annotations

import pytest

from tests.e2e.reruns import rerun_analysis_and_check, three_level_plan

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]


def test_rerunning_the_analysis_reuses_the_files_and_runs_what_depends_on_it_again(http, monkeypatch):
    monkeypatch.setattr("canvas_core.orchestration.plan_canvas", three_level_plan)
    rerun_analysis_and_check(http)
