"""`canvas serve` as an operator runs it: SIGTERM with runs in flight ends them and the process within 10 s,
and `--state-dir` brings accounts, runs and artifacts back on the next start."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.support import ROOT

pytestmark = [pytest.mark.e2e, pytest.mark.serial, pytest.mark.timeout(180)]

KEY = "sk_canvas_lifecycle_test_key"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def serve(state_dir: Path, log: Path) -> Iterator[tuple[subprocess.Popen, str]]:
    port = free_port()
    command = [sys.executable, "-m", "canvas_local.cli", "serve", "--port", str(port), "--api-key", KEY]
    with open(log, "ab") as output:
        process = subprocess.Popen(
            [*command, "--state-dir", str(state_dir)], cwd=ROOT, stdout=output, stderr=subprocess.STDOUT
        )
    base_url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{base_url}/v1/run/{'0' * 8}-0000-4000-8000-{'0' * 12}", timeout=2)
                break
            except httpx.TransportError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"canvas serve did not start: {log.read_text()[-2000:]}") from None
                time.sleep(0.2)
        yield process, base_url
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)


def create(base_url: str, prompt: str, template: str) -> str:
    response = httpx.post(
        f"{base_url}/v1/run", headers={"X-API-KEY": KEY}, data={"prompt": prompt, "template": template}, timeout=30
    )
    assert response.status_code == 200, response.text
    return response.json()["data"]["run_id"]


def status_of(base_url: str, run_id: str) -> dict:
    response = httpx.get(f"{base_url}/v1/run/{run_id}", headers={"X-API-KEY": KEY}, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()["data"]


def wait_for_end(base_url: str, run_id: str, timeout: float = 90) -> dict:
    deadline = time.monotonic() + timeout
    while (data := status_of(base_url, run_id))["status"] == "running":
        assert time.monotonic() < deadline, f"{run_id} still running"
        time.sleep(0.3)
    return data


def test_sigterm_ends_runs_in_flight_and_the_state_dir_brings_everything_back(tmp_path):
    state_dir, log = tmp_path / "state", tmp_path / "serve.log"

    # Given a stack with a state directory, one finished run and several still running
    with serve(state_dir, log) as (process, base_url):
        finished = create(base_url, "A short report on tide pools", "report")
        finished_data = wait_for_end(base_url, finished)
        in_flight = [create(base_url, f"Deep research {i} on coastal erosion", "deep_research") for i in range(4)]

        # When the operator sends SIGTERM
        started = time.monotonic()
        process.send_signal(signal.SIGTERM)
        process.wait(30)
        stopped_after = time.monotonic() - started

    # Then the process ended within 10 s, cleanly
    assert stopped_after < 10, f"stopping took {stopped_after:.1f}s"
    assert process.returncode == 0, log.read_text()[-2000:]

    # When it starts again on the same state directory
    with serve(state_dir, log) as (_, base_url):
        # Then the finished run is as it was, its artifact downloadable
        again = status_of(base_url, finished)
        assert again["status"] == finished_data["status"] == "completed"
        [artifact] = again["result"]["artifacts"]
        assert len(httpx.get(artifact["download_url"], timeout=30).content) == artifact["size_bytes"]
        # And no run is left running: each in flight ended, saying why
        for run_id in in_flight:
            data = status_of(base_url, run_id)
            assert data["status"] in ("failed", "partial", "completed"), data
            if data["status"] != "completed":
                # stopped by the shutdown, or ended before it without a search provider for its web research
                reasons = ("stopped", "set SEARCH_PROVIDER")
                assert any(r in error["error"] for error in data.get("errors", []) for r in reasons), data.get("errors")
        # And the account is the same one: the key still works and its runs are its own
        assert create(base_url, "One more after the restart", "memo")


def test_the_stack_says_its_state_is_in_memory_without_a_state_dir(tmp_path):
    port = free_port()
    command = [sys.executable, "-m", "canvas_local.cli", "serve", "--port", str(port), "--api-key", KEY]
    process = subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env={**os.environ}, text=True
    )
    try:
        lines = []
        assert process.stdout is not None
        while len(lines) < 2:
            line = process.stdout.readline()
            assert line, "canvas serve exited before it was listening"
            if not line.startswith("{") and " INFO " not in line:
                lines.append(line.strip())
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(30)
    assert lines[0] == f"Canvas Run Service listening on http://127.0.0.1:{port}"
    assert "in memory" in lines[1] and "--state-dir" in lines[1]


@contextmanager
def serving(tmp_path: Path, *options: str) -> Iterator[tuple[str, Path]]:
    """`canvas serve` with `options` on a free port, once it listens: its URL and the file of its output; stopped with
    SIGTERM when the block ends."""
    port = free_port()
    command = [sys.executable, "-m", "canvas_local.cli", "serve", "--port", str(port), "--api-key", KEY, *options]
    out = tmp_path / "out.txt"
    with open(out, "wb") as output:
        process = subprocess.Popen(command, cwd=ROOT, stdout=output, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while "listening on" not in out.read_text():
            assert process.poll() is None and time.monotonic() < deadline, out.read_text()[-2000:]
            time.sleep(0.2)
        yield f"http://127.0.0.1:{port}", out
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(30)


def run_one_and_stop(tmp_path: Path, *options: str) -> tuple[str, str]:
    """Start `canvas serve` with `options`, run one report to its end, stop it; its output and the run id."""
    with serving(tmp_path, *options) as (base_url, out):
        run_id = create(base_url, "A short report on tide pools", "report")
        wait_for_end(base_url, run_id)
        time.sleep(1)  # the console's end line follows the run's, once the execution's ending is delivered
    return out.read_text(), run_id


def test_the_console_shows_one_line_per_run_start_and_end_and_the_log_file_the_json(tmp_path):
    # Given canvas serve with its default console and a log file
    log_file = tmp_path / "json.log"
    # When one run goes from start to end
    output, run_id = run_one_and_stop(tmp_path, "--log-file", str(log_file))
    # Then the console holds no JSON line, one line for its start and one for its end, with credits
    lines = output.splitlines()
    assert not [line for line in lines if line.startswith("{")], output
    assert any(line.startswith(f"Logs (JSON) and metrics: {log_file}") for line in lines), output
    assert len([line for line in lines if f"run {run_id} started" in line]) == 1, output
    [end] = [line for line in lines if f"run {run_id} completed in " in line]
    assert end.endswith(" credits")
    # And the log file has the functions' JSON lines and the embedded metrics
    logged = [json.loads(line) for line in log_file.read_text().splitlines() if line.startswith("{")]
    assert any(entry.get("run_id") == run_id for entry in logged)
    assert any("_aws" in entry for entry in logged)


def test_a_review_run_parked_for_approval_puts_no_error_on_the_console(tmp_path):
    # Given canvas serve with its default console
    with serving(tmp_path) as (base_url, out):
        # When a run created with review=true is planned and parks, waiting for approval
        response = httpx.post(
            f"{base_url}/v1/run",
            headers={"X-API-KEY": KEY},
            data={"prompt": "A short report on tide pools", "review": "true"},
            timeout=30,
        )
        assert response.status_code == 200, response.text
        run_id = response.json()["data"]["run_id"]
        deadline = time.monotonic() + 60
        while not status_of(base_url, run_id).get("awaiting_approval"):
            assert time.monotonic() < deadline, out.read_text()[-2000:]
            time.sleep(0.3)
    # Then the console says the run started and holds no ERROR line: parking is the outcome review asked for
    output = out.read_text()
    assert f"run {run_id} started" in output
    assert not [line for line in output.splitlines() if " ERROR " in line], output


def test_log_format_json_keeps_the_json_lines_on_standard_output(tmp_path):
    # When canvas serve runs one run with --log-format json
    output, run_id = run_one_and_stop(tmp_path, "--log-format", "json")
    # Then its output has the functions' JSON lines and the metrics, and no console line for the run
    logged = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    assert any(entry.get("run_id") == run_id for entry in logged)
    assert any("_aws" in entry for entry in logged)
    assert f"run {run_id} started" not in output


def test_a_bad_setting_stops_the_stack_at_start_naming_the_variable():
    # Given an operator's setting (given to every function) with a value it cannot take
    command = [sys.executable, "-m", "canvas_local.cli", "serve", "--port", str(free_port()), "--api-key", KEY]
    # When the stack starts
    result = subprocess.run(
        command, cwd=ROOT, env={**os.environ, "MAX_PROMPT_CHARS": "abc"}, capture_output=True, text=True, timeout=60
    )
    # Then it refuses, naming the first function that reads it and the variable, without a traceback
    assert result.returncode == 2, result.stdout + result.stderr
    message = "canvas serve: CreateRunFunction: Invalid settings in the environment: MAX_PROMPT_CHARS='abc'"
    assert message in result.stderr
    assert "Traceback" not in result.stderr
