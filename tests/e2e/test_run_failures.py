"""A block that does not end by its own hand: it keeps failing with a passing error until the state machine's retries
run out, and Release Dependents records it. Scripted canvases (bench/dags.py) give the blocks their behaviour."""

from __future__ import annotations

import pytest

from bench.dags import Block, Dag, scripted
from tests.e2e.conftest import poll_until_finished

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


def dag_of(http, run_id: str) -> dict:
    canvas_id = http.get(f"/v1/run/{run_id}").json()["data"]["canvas_id"]
    return http.get(f"/v1/canvas/{canvas_id}/dag").json()["data"]


def test_a_block_that_keeps_failing_with_a_passing_error_is_failed_after_its_retries(http):
    # Given a canvas whose second block fails with a passing error on every attempt
    prompt = "failures e2e: retried"
    with scripted({prompt: Dag([Block(0.05), Block(fail="retried")])}) as script:
        run_id = http.post("/v1/run", data={"prompt": prompt}).json()["data"]["run_id"]

        # When the run ends
        final = poll_until_finished(http, run_id, timeout=90)

    # Then the block was tried as often as the state machine retries, and is failed with the last error's reason
    assert final["status"] == "partial", final
    first, second = dag_of(http, run_id)["nodes"]
    assert script.attempts[second["id"]] == 4
    assert (first["status"], second["status"]) == ("completed", "error")
    reason = f"{second['name']} failed again on purpose (attempt 4)"
    assert [e["error"] for e in final["errors"]] == [f"{second['name']}: {reason}"], final
