"""`canvas run --review`, `canvas approve` and `canvas cancel` against the embedded stack: the plan printed with
its blocks, types and estimated credits before anything runs, approved with --yes or by answering, declined (and so
cancelled), and a run approved or cancelled from the terminal."""

from __future__ import annotations

import io
import os
import re
import sys
import time
from unittest import mock

import httpx
import pytest

from bench.dags import Block, Dag, scripted
from tests.e2e.conftest import KEY_A, poll_until_finished
from tests.e2e.test_canvas_run import canvas, read_pty

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]


def awaiting(http: httpx.Client, run_id: str, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while not (run := http.get(f"/v1/run/{run_id}").json()["data"]).get("awaiting_approval"):
        assert time.monotonic() < deadline, f"run {run_id} never waited for approval: {run}"
        time.sleep(0.1)
    return run


def test_run_review_yes_on_a_terminal_prints_the_plan_then_runs_it(service, tmp_path):
    # Given a canvas of two blocks
    prompt = "canvas e2e: reviewed on a terminal"
    env = dict(os.environ, CANVAS_BASE_URL=service.base_url, CANVAS_API_KEY=KEY_A, TERM="xterm-256color")
    env.pop("COLUMNS", None)
    command = [sys.executable, "-m", "canvas_local.cli", "run", prompt, "--review", "--yes", "--out", str(tmp_path)]
    with scripted({prompt: Dag([Block(0.05, credits=15), Block(0.05, credits=25)], [(0, 1)])}):
        # When `canvas run --review --yes` runs on a terminal
        code, screen = read_pty(command, env)

    # Then it printed the plan (each block with its type and estimate, and the total), approved it, and the run
    # completed
    assert code == 0, screen
    rows = re.findall(r"^\s*(Block \d)\s*│\s*(text-block)\s*│\s*(\d+)\s*$", screen, re.MULTILINE)
    assert [(name, kind) for name, kind, _ in rows] == [("Block 0", "text-block"), ("Block 1", "text-block")], screen
    total = re.search(r"2 blocks · estimated (\d+) credits", screen)
    assert total, screen
    assert int(total.group(1)) == sum(int(credits) for _, _, credits in rows)
    assert re.search(r"Run [0-9a-f-]{36} approved", screen), screen
    assert re.search(r"Completed in \d:\d\d:\d\d · 40 credits", screen), screen


def test_run_review_declined_cancels_the_run_and_nothing_runs(service, tmp_path):
    # Given a canvas whose block would charge 50 credits
    prompt = "canvas e2e: review declined"
    with (
        scripted({prompt: Dag([Block(0.0, credits=50)])}),
        mock.patch("sys.stdin", io.StringIO("n\n")),
    ):
        # When `canvas run --review` is answered no
        result = canvas(service, "run", prompt, "--review", "--out", str(tmp_path))

    # Then the plan was shown and asked about, the run was cancelled before its block ran: failed, exit 4
    assert "Approve this plan and run it? [y/N]" in result.err, result.err
    assert re.search(r"Run [0-9a-f-]{36} cancelled", result.err), result.err
    assert "✗ Cancelled by the client" in result.err
    assert result.code == 4
    assert "Block 0" in result.err


def test_approve_and_cancel_from_the_terminal(service, http):
    # Given two runs waiting for approval
    prompt = "canvas e2e: approved by command"
    with scripted({prompt: Dag([Block(0.0, credits=5)])}):
        first = http.post("/v1/run", data={"prompt": prompt, "review": "true"}).json()["data"]
        second = http.post("/v1/run", data={"prompt": prompt, "review": "true"}).json()["data"]
        awaiting(http, first["run_id"])
        awaiting(http, second["run_id"])

        # (`canvas status` says so, with the plan's estimate)
        shown = canvas(service, "status", first["run_id"])
        assert shown.code == 0
        assert "waiting for approval" in shown.out
        assert re.search(r"estimate\s+\d+ credits", shown.out), shown.out

        # When the first is approved with new instructions for its block, and the second cancelled
        block_id = http.get(f"/v1/canvas/{first['canvas_id']}/dag").json()["data"]["nodes"][0]["id"]
        approved = canvas(service, "approve", first["run_id"], "--instructions", f'{block_id}={{"credits": 7}}')
        finished = poll_until_finished(http, first["run_id"])
        cancelled = canvas(service, "cancel", second["run_id"])

    # Then the first ran with its new instructions (the scripted block charges what they say), the second ended
    assert approved.code == 0, approved.err
    assert f"Run {first['run_id']} approved" in approved.err
    assert finished["status"] == "completed"
    assert finished["metadata"]["credits_consumed"] == 7
    assert cancelled.code == 0, cancelled.err
    assert "✗ Cancelled by the client" in cancelled.err
    assert http.get(f"/v1/run/{second['run_id']}").json()["data"]["status"] == "failed"
    # And what cannot be done is refused with the service's reason and exit 1
    again = canvas(service, "cancel", second["run_id"])
    assert again.code == 1
    assert "only a running run can be cancelled" in again.err
    with pytest.raises(SystemExit) as usage:
        canvas(service, "approve", first["run_id"], "--instructions", "no-equals-sign")
    assert usage.value.code == 2
