"""`canvas serve` as an operator runs it: SIGTERM with runs in flight ends them and the process within 10 s,
and `--state-dir` brings accounts, runs and artifacts back on the next start."""

from __future__ import annotations

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

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

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
                assert any("stopped" in error["error"] for error in data.get("errors", [])), data.get("errors")
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
