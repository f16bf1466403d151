"""e2e tier: a real HTTP client against one embedded stack (`canvas serve`'s LocalStack) per module, or against
`canvas serve` in a process of its own."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from canvas_local.stack import LocalStack

CANVAS = Path(sys.executable).with_name("canvas")

KEY_A = "sk_canvas_e2e_account_a_" + "a" * 24
KEY_B = "sk_canvas_e2e_account_b_" + "b" * 24


@pytest.fixture(scope="module")
def service() -> Iterator[LocalStack]:
    with LocalStack(api_keys=[KEY_A, KEY_B]) as stack:
        yield stack


@pytest.fixture(scope="module")
def http(service: LocalStack) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=service.base_url, headers={"X-API-KEY": KEY_A}, timeout=30) as client:
        yield client


def poll_until_finished(client: httpx.Client, run_id: str, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        data = client.get(f"/v1/run/{run_id}").json()["data"]
        if data["status"] != "running":
            return data
        if time.monotonic() > deadline:
            raise AssertionError(f"run {run_id} still running after {timeout}s: {data}")
        time.sleep(0.2)


@dataclass
class Served:
    """A `canvas serve` in its own process, and the lines it printed when it started."""

    process: subprocess.Popen[str]
    lines: list[str]

    @property
    def base_url(self) -> str:
        return self.lines[0].removeprefix("Canvas Run Service listening on ")

    @property
    def endpoint_url(self) -> str:
        """The AWS endpoint, for the admin commands' `--endpoint-url` (the last line it prints on starting)."""
        return self.lines[-1].rsplit(" ", 1)[1]


@contextmanager
def canvas_serve() -> Iterator[Served]:
    """`canvas serve --port 0`, once it has printed everything it says on starting (the AWS endpoint comes last);
    stopped with Ctrl-C at the end unless the test stopped it."""
    process = subprocess.Popen(
        [str(CANVAS), "serve", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert process.stdout is not None
        lines: list[str] = []
        while not lines or not lines[-1].startswith("AWS endpoint"):
            line = process.stdout.readline()
            assert line, "canvas serve exited before it was listening"
            lines.append(line.strip())
        yield Served(process, lines)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
