"""e2e tier: a real HTTP client against one embedded stack (`canvas serve`'s LocalStack) per module, or against
`canvas serve` in a process of its own. Every AWS call the functions of template.yaml make, in this process or a
`canvas serve` it starts, is recorded, and must be one tests/iam_observed.yaml lists (CANVAS_RECORD_IAM=1 writes
that file anew)."""

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
from typing import Any

import httpx
import pytest

from canvas_local import iam_calls
from canvas_local.faults import ENV_VAR as FAULTS_VARIABLE
from canvas_local.stack import DEFAULT_TEMPLATE, LocalStack
from tests.e2e import browser
from tests.iam_record import RECORD, RECORD_VARIABLE, IamRecord

CANVAS = Path(sys.executable).with_name("canvas")

KEY_A = "sk_canvas_e2e_account_a_" + "a" * 24
KEY_B = "sk_canvas_e2e_account_b_" + "b" * 24


@pytest.fixture(scope="session", autouse=True)
def observed_calls(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[iam_calls.CallRecorder]:
    """The AWS calls the functions of template.yaml make while the tier runs: at its end, each must be one the
    record lists, or (CANVAS_RECORD_IAM=1, the whole tier run and passed) they become the record."""
    served_calls = tmp_path_factory.mktemp("iam") / "calls.txt"
    recording = os.environ.get(RECORD_VARIABLE) == "1"
    # The processes the tests start inherit the file to record into. A recording is of what the code calls when
    # AWS answers: without injected faults, whose rarer paths (a retried block's look for its kept completion) the
    # record keeps by hand for the functions that take them.
    changes = {iam_calls.CALLS_FILE_VARIABLE: str(served_calls)} | ({FAULTS_VARIABLE: None} if recording else {})
    saved = {name: os.environ.get(name) for name in changes}
    _set_environ(changes)
    try:
        with iam_calls.recording(DEFAULT_TEMPLATE) as recorder:
            yield recorder
    finally:
        _set_environ(saved)
    calls = recorder.calls | iam_calls.read_calls(served_calls)
    record = IamRecord.read(RECORD)
    if recording:
        _write_record(request.session, record, calls)
        return
    unlisted = sorted(str(call) for call in calls if not record.lists(call))
    assert not unlisted, (
        f"functions made AWS calls {RECORD.name} does not list: grant them in template.yaml if they are meant, "
        f"then run `{RECORD_VARIABLE}=1 .venv/bin/pytest tests/e2e`:\n  " + "\n  ".join(unlisted)
    )


def _set_environ(values: dict[str, str | None]) -> None:
    for name, value in values.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def _write_record(session: pytest.Session, record: IamRecord, calls: set[iam_calls.Call]) -> None:
    """The record is what the whole tier did: a run of part of it, or one that failed, writes nothing."""
    tier = Path(__file__).parent
    collected = {Path(item.path) for item in session.items}
    missing = sorted(p.name for p in tier.glob("test_*.py") if p not in collected)
    deselected = session.config.option.keyword or session.config.option.markexpr or session.config.option.deselect
    if session.testsfailed or missing or deselected or session.shouldstop:
        raise AssertionError(
            f"{RECORD.name} is written only by a whole e2e tier that passes "
            f"(failed: {session.testsfailed}, files not run: {missing}, deselected: {bool(deselected)})"
        )
    RECORD.write_text(record.with_observed(calls), "utf-8")


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
def canvas_serve(*args: str) -> Iterator[Served]:
    """`canvas serve --port 0` (and `args`), once it has printed everything it says on starting (the AWS endpoint
    comes last); stopped with Ctrl-C at the end unless the test stopped it."""
    process = subprocess.Popen(
        [str(CANVAS), "serve", "--port", "0", *args],
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


@pytest.fixture(scope="module")
def driver() -> Iterator[Any]:
    """One headless Chromium for a browser test module (tests/e2e/browser.py); the test fails, saying why, when the
    browser cannot start."""
    if reason := browser.missing():
        pytest.fail(reason)
    with browser.chromium() as started:
        yield started
