"""`canvas rerun` against the embedded stack: on a terminal it shows the new run's progress as `canvas run` does and
ends with the run's outcome as its exit code. Scripted canvases (bench/dags.py) give the blocks their behaviour; a
re-run block's new instructions are its script."""

from __future__ import annotations

import os
import re
import sys

import pytest

from bench.dags import Block, Dag, scripted
from tests.e2e.conftest import KEY_A, KEY_B, poll_until_finished
from tests.e2e.test_canvas_run import canvas, printed_json, read_pty

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]


def finished_chain(http, prompt: str) -> tuple[dict, list[dict]]:
    """A finished run of the prompt's scripted canvas, and its blocks."""
    run = poll_until_finished(http, http.post("/v1/run", data={"prompt": prompt}).json()["data"]["run_id"])
    assert run["status"] == "completed", run
    return run, http.get(f"/v1/canvas/{run['canvas_id']}/dag").json()["data"]["nodes"]


def test_on_a_terminal_rerun_shows_the_new_runs_progress_and_exits_0(service, http, tmp_path):
    # Given a finished chain of two quick blocks
    prompt = "canvas e2e: rerun on a terminal"
    with scripted({prompt: Dag([Block(0.05), Block(0.05)], [(0, 1)])}) as script:
        source, (first, second) = finished_chain(http, prompt)

        # When `canvas rerun` runs the second again on a terminal, with instructions that make it take 6 s (longer
        # than the longest wait between polls, so the bar shows it running)
        env = dict(os.environ, CANVAS_BASE_URL=service.base_url, CANVAS_API_KEY=KEY_A, TERM="xterm-256color")
        env.pop("COLUMNS", None)
        command = [sys.executable, "-m", "canvas_local.cli", "rerun", source["canvas_id"], second["id"]]
        code, screen = read_pty([*command, "--instructions", '{"seconds": 6}', "--out", str(tmp_path)], env)

    # Then the bar showed the re-run block running among the canvas's two blocks, and the run completed
    assert code == 0, screen
    assert "Running: Block 1" in screen, screen
    assert re.search(r"\d/2 blocks", screen), screen
    assert re.search(r"Completed in \d:\d\d:\d\d", screen), screen
    # And only the re-run block ran again
    assert (script.attempts[first["id"]], script.attempts[second["id"]]) == (1, 2)


def test_rerun_exits_with_the_new_runs_outcome_and_prints_it_as_json(service, http, tmp_path):
    # Given a finished chain of three blocks
    prompt = "canvas e2e: rerun outcome"
    with scripted({prompt: Dag([Block(), Block(), Block()], [(0, 1), (1, 2)])}):
        source, (_, middle, last) = finished_chain(http, prompt)

        # When the middle one is re-run with instructions that make it fail
        failing = canvas(
            service, "rerun", source["canvas_id"], middle["id"], "--instructions", '{"fail": "always"}', "--json",
            "--out", str(tmp_path),
        )  # fmt: skip
        # And again with its own instructions
        again = canvas(service, "rerun", source["canvas_id"], middle["id"], "--json", "--out", str(tmp_path))

    # Then the first ends partial (its first block reused, the last skipped): exit 3; the second completes: exit 0
    partial = printed_json(failing.out)
    assert (failing.code, partial["status"]) == (3, "partial"), failing.err
    assert [e["block_id"] for e in partial["errors"]] == [middle["id"], last["id"]]
    assert partial["metadata"]["rerun_of"]["block_id"] == middle["id"]
    assert (again.code, printed_json(again.out)["status"]) == (0, "completed"), again.err
    # And another account's canvas is exit 1 with the service's one line
    refused = canvas(service, "rerun", source["canvas_id"], middle["id"], "--out", str(tmp_path), key=KEY_B)
    assert (refused.code, refused.err) == (1, f"canvas rerun: Run not found: {source['canvas_id']} (404)\n")
