"""`canvas run` and the other client commands against the embedded stack: a run followed to its end with its
files saved, the exit code of each outcome, the live bar on a terminal, and GET /v1/runs behind `canvas runs`.

Failed and partial runs come from scripted canvases (bench/dags.py): the stack's handlers run in this process,
so the state machine runs exactly those blocks, some of which fail on purpose.
"""

from __future__ import annotations

import fcntl
import io
import json
import os
import re
import select
import struct
import subprocess
import sys
import termios
import time
import uuid
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from unittest import mock

import httpx
import pytest

from bench.dags import Block, Dag, Script, scripted
from canvas_core.blocks.context import BlockContext, BlockOutput
from canvas_local import cli
from tests.e2e.conftest import KEY_A, KEY_B, poll_until_finished

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

ANSI = re.compile(r"\x1b(\[[0-9;?]*[ -/]*[@-~]|\][^\x07]*\x07|[()][0-9A-B]|[=>])")


@dataclass
class Result:
    code: int
    out: str
    err: str


def canvas(service, *args: str, key: str = KEY_A) -> Result:
    """A `canvas` command run in this process, with what it printed. Its own buffers, not capsys: a handler of
    the stack that starts meanwhile keeps the standard output it found for its logs, and capsys closes its
    buffers after each test."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = cli.main([*args, "--base-url", service.base_url, "--api-key", key])
    return Result(code, out.getvalue(), err.getvalue())


def printed_json(out: str) -> dict:
    """The JSON document a command printed (indented), among the one-line logs of the stack's handlers, which run
    in this process and log to standard output."""
    lines = out.splitlines()
    start = lines.index("{")
    return json.loads("\n".join(lines[start : lines.index("}", start) + 1]))


def run_json(service, *args: str) -> tuple[int, dict]:
    result = canvas(service, "run", *args, "--json")
    return result.code, printed_json(result.out)


def test_a_run_completes_with_its_artifacts_saved_whole(service, tmp_path):
    # Given a folder that does not exist yet
    out = tmp_path / "files"

    # When a report run is started from the terminal and followed to its end
    code, run = run_json(service, "Write a short report on tide pools", "--template", "report", "--out", str(out))

    # Then it completed, and each artifact is in the folder with the size and bytes the service reports
    assert code == 0
    assert run["status"] == "completed"
    artifacts = run["result"]["artifacts"]
    assert artifacts, run
    for artifact in artifacts:
        saved = out / artifact["name"]
        assert saved.stat().st_size == artifact["size_bytes"]
        assert saved.read_bytes() == httpx.get(artifact["download_url"]).content
    assert not list(out.glob("*.part"))

    # And downloading again keeps the first files and numbers the new ones
    assert canvas(service, "download", run["run_id"], "--out", str(out)).code == 0
    stem, suffix = os.path.splitext(artifacts[0]["name"])
    assert (out / f"{stem}-2{suffix}").stat().st_size == artifacts[0]["size_bytes"]


def test_a_run_whose_blocks_all_fail_exits_4(service, tmp_path):
    # Given a canvas of one block that always fails
    with scripted({"canvas e2e: nothing works": Dag([Block(fail="always")])}):
        # When
        code, run = run_json(service, "canvas e2e: nothing works", "--out", str(tmp_path))

    # Then
    assert code == 4
    assert run["status"] == "failed"
    assert any("failed on purpose" in e["error"] for e in run["errors"])
    assert list(tmp_path.iterdir()) == []


def test_a_run_with_some_failed_blocks_exits_3(service, tmp_path):
    # Given two independent blocks, one of which always fails
    with scripted({"canvas e2e: half works": Dag([Block(0.05), Block(0.05, fail="always")])}):
        result = canvas(service, "run", "canvas e2e: half works", "--out", str(tmp_path))

    # Then the run ended partial, and the command says which block failed
    assert result.code == 3
    assert re.search(r"^✗ text-block: .*Block 1 failed on purpose$", result.err, re.MULTILINE), result.err
    assert "Partial in " in result.err


def read_pty(argv: list[str], env: dict[str, str], timeout: float = 120, columns: int = 120) -> tuple[int, str]:
    """Run `argv` on a pseudo-terminal `columns` wide; its exit code and all it wrote, escapes removed."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    process = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True)
    os.close(slave)
    chunks, deadline = [], time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the command has closed the terminal
                    break
                if not chunk:
                    break
                chunks.append(chunk)
            elif process.poll() is not None:
                break
        code = process.wait(timeout=10)
    finally:
        process.kill()
        os.close(master)
    return code, ANSI.sub("", b"".join(chunks).decode("utf-8", errors="replace"))


ANSWER = "## Tide pools\n\nWhat lives there:\n\n- **Anemones**, holding on\n- Crabs, hiding\n"


def answering_in_markdown(script: Script):
    """The scripted blocks' behaviour, but the last block (the canvas's answer) writes ANSWER."""

    def run(ctx: BlockContext) -> BlockOutput:
        output = script.run(ctx)
        return BlockOutput(content=ANSWER) if ctx.node.name == "Block 1" else output

    return lambda _block_type: run


def test_on_a_terminal_the_bar_shows_progress_then_the_answer_is_rendered(service, tmp_path):
    # Given a canvas whose blocks run for 6 s together, longer than the longest wait between polls (5 s), so the
    # bar shows one of them running however long planning takes; the last answers in markdown
    prompt = "canvas e2e: on a terminal"
    env = dict(os.environ, CANVAS_BASE_URL=service.base_url, CANVAS_API_KEY=KEY_A, TERM="xterm-256color")
    env.pop("COLUMNS", None)
    command = [sys.executable, "-m", "canvas_local.cli", "run", prompt, "--out", str(tmp_path)]
    with (
        scripted({prompt: Dag([Block(3.0), Block(3.0)], [(0, 1)])}) as script,
        mock.patch("canvas_core.blocks.runner.implementation", answering_in_markdown(script)),
    ):
        # When `canvas run` runs on a terminal
        code, screen = read_pty(command, env)

    # Then the bar showed the block running, the task and block counts, the clock and the estimate
    assert code == 0, screen
    assert re.search(r"Running: Block [01]", screen), screen
    assert re.search(r"\d+/\d+ tasks", screen), screen
    assert re.search(r"\d/2 blocks", screen), screen
    assert re.search(r"0:00:\d\d est\. \d:\d\d:\d\d", screen), screen
    assert "Completed" in screen
    # And the answer was rendered as markdown: its text is there, its markup is not
    assert "Tide pools" in screen and "## Tide pools" not in screen
    assert re.search(r"• Anemones, holding on", screen), screen
    assert "**" not in screen
    assert re.search(r"Completed in \d:\d\d:\d\d", screen)


def test_runs_lists_the_callers_runs_page_by_page(service):
    # Given three runs of account B (and the runs of account A made above)
    created = []
    with httpx.Client(base_url=service.base_url, headers={"X-API-KEY": KEY_B}, timeout=30) as http_b:
        for i in range(3):
            response = http_b.post("/v1/run", data={"prompt": f"canvas e2e: listed {i}", "blocks": '["prompt-block"]'})
            assert response.status_code == 200, response.text
            created.append(response.json()["data"]["run_id"])
        # (their handlers log to this process's standard output: let them end before reading what was printed)
        for run_id in created:
            poll_until_finished(http_b, run_id)
        bad_limit = http_b.get("/v1/runs", params={"limit": "0"})

    # When B lists them two at a time
    first = printed_json(canvas(service, "runs", "--limit", "2", "--json", key=KEY_B).out)
    second = printed_json(
        canvas(service, "runs", "--limit", "2", "--cursor", first["next_cursor"], "--json", key=KEY_B).out
    )

    # Then they come newest first, only B's, and the second page is the last
    assert [r["run_id"] for r in first["runs"] + second["runs"]] == created[::-1]
    assert second["next_cursor"] is None
    assert [r["prompt"] for r in second["runs"]] == ["canvas e2e: listed 0"]
    # And the table shows them too
    table = canvas(service, "runs", key=KEY_B)
    assert table.code == 0
    assert all(run_id in table.out for run_id in created), table.out
    # And a page size out of range is a 400 in the contract's error shape
    assert (bad_limit.status_code, bad_limit.json()["success"]) == (400, False)


def test_status_dag_and_tasks_of_a_finished_run(service, tmp_path):
    # Given a finished prompt -> text run
    code, run = run_json(service, "Compare tide tables", "--blocks", "prompt,text", "--out", str(tmp_path))
    assert code == 0

    # When / Then its status, its DAG in each format and its task tree are printed
    status = canvas(service, "status", run["run_id"])
    assert status.code == 0 and "completed" in status.out
    mermaid = canvas(service, "dag", run["canvas_id"], "--format", "mermaid").out
    assert mermaid.startswith("flowchart LR\n") and "  n0 --> n1\n" in mermaid
    assert "prompt-block · completed" in mermaid and "text-block · completed" in mermaid
    assert canvas(service, "dag", run["canvas_id"], "--format", "dot").out.count(" -> ") == 1
    tree = canvas(service, "tasks", run["canvas_id"]).out
    assert "parent-task" in tree and "persona-task" in tree and "tool-call-task" in tree
    # And another account's key finds none of it
    other = canvas(service, "status", run["run_id"], key=KEY_B)
    assert (other.code, other.err) == (1, f"canvas status: Run not found: {run['run_id']} (404)\n")
    assert canvas(service, "wait", str(uuid.uuid4()), "--out", str(tmp_path)).code == 1


def test_on_an_80_column_terminal_the_answer_and_the_runs_fit_and_sources_go_one_per_line(service, tmp_path):
    # Given a terminal 80 columns wide and notes to summarize (the offline Writer cites the file as a source)
    notes = tmp_path / "tide-notes.txt"
    notes.write_text("Spring tides follow the new and full moon.\nNeap tides follow the quarter moons.\n", "utf-8")
    env = dict(os.environ, CANVAS_BASE_URL=service.base_url, CANVAS_API_KEY=KEY_A, TERM="xterm-256color")
    env.pop("COLUMNS", None)
    run = [sys.executable, "-m", "canvas_local.cli", "run", "Summarize my tide notes", "--file", str(notes)]
    runs = [sys.executable, "-m", "canvas_local.cli", "runs", "--limit", "5"]

    # When `canvas run`, then `canvas runs`, print there
    code, screen = read_pty([*run, "--out", str(tmp_path / "out")], env, columns=80)
    listed_code, listed = read_pty(runs, env, columns=80)

    # Then no line is wider than the terminal, and each source of the answer has a line of its own
    assert code == 0, screen
    assert max(len(line) for line in screen.splitlines()) <= 80, screen
    lines = [line.rstrip() for line in screen.replace("\r", "").splitlines()]
    assert "Sources" in lines, screen
    legend = lines[len(lines) - 1 - lines[::-1].index("Sources") + 1 :]
    cited = [line for line in legend if re.match(r"\[\d+\] ", line)]
    assert cited and legend[0] == cited[0], screen
    assert "tide-notes.txt" in "\n".join(cited)
    # And the runs fit: each whole run id, its status and template readable
    assert listed_code == 0, listed
    assert max(len(line) for line in listed.splitlines()) <= 80, listed
    header, first = [line.rstrip() for line in listed.replace("\r", "").splitlines()[:2]]
    assert header.split() == ["created", "(UTC)", "status", "template", "run"]
    row = r"\d{4}-\d\d-\d\d \d\d:\d\d  (completed|partial|failed|running) +\w+ +[0-9a-f-]{36}$"
    assert re.match(row, first), listed
