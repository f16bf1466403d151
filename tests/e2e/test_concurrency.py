"""Many clients at once against the embedded stack: concurrent runs of different accounts and templates each
keep to their own data, a burst of connections is answered (never reset), and the per-account limit of runs
holds when creates race each other."""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx
import pytest

from canvas_local.lambda_runtime import LocalFunction
from canvas_local.stack import LocalStack

pytestmark = [pytest.mark.e2e, pytest.mark.serial, pytest.mark.timeout(180)]

KEYS = [f"sk_canvas_e2e_concurrency_{n}_" + n * 24 for n in ("a", "b", "c")]
BURST_KEY = "sk_canvas_e2e_concurrency_burst_" + "d" * 24
LIMITED_KEY = "sk_canvas_e2e_concurrency_limit_" + "e" * 24
TEMPLATES = [
    "report",
    "memo",
    "excel",
    "slides",
    "app",
    "landing_page",
    "deep_research",
    "auto",
    "report",
    "memo",
    "excel",
    "slides",
]
BURST = 60


class Calls:
    """Every status the API answered, from any thread, with what was asked."""

    def __init__(self, client: httpx.Client):
        self.client = client
        self.answered: list[tuple[int, str]] = []
        self._lock = threading.Lock()

    def request(
        self, method: str, path: str, key: str, headers: dict[str, str] | None = None, **options: Any
    ) -> httpx.Response:
        response = self.client.request(method, path, headers={"X-API-KEY": key, **(headers or {})}, **options)
        with self._lock:
            self.answered.append((response.status_code, f"{method} {path}"))
        return response

    def server_errors(self) -> list[tuple[int, str]]:
        with self._lock:
            return [answer for answer in self.answered if answer[0] >= 500]


def poll_to_the_end(calls: Calls, run_id: str, key: str, timeout: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        response = calls.request("GET", f"/v1/run/{run_id}", key)
        assert response.status_code == 200, response.text
        data = response.json()["data"]
        if data["status"] != "running":
            return data
        assert time.monotonic() < deadline, f"run {run_id} still running after {timeout}s"
        time.sleep(0.25)


# ---------------------------------------------------------------- many accounts and templates at once


# One embedded stack at a time per process: each class starts its own and stops it when its tests are done.


@pytest.fixture(scope="class")
def stack() -> Iterator[LocalStack]:
    with LocalStack(api_keys=[*KEYS, BURST_KEY]) as started:
        yield started


@pytest.fixture
def calls(stack: LocalStack) -> Iterator[Calls]:
    limits = httpx.Limits(max_connections=len(TEMPLATES) * 2)
    with httpx.Client(base_url=stack.base_url, timeout=60, limits=limits) as client:
        yield Calls(client)


class TestManyClientsAtOnce:
    def test_concurrent_runs_of_different_accounts_and_templates_each_keep_to_their_own(self, calls):
        # Given twelve creates over three accounts, each with its own template and a marker in its prompt
        asked = [
            {"key": KEYS[i % len(KEYS)], "template": template, "marker": f"marker-{i:02d}-{uuid.uuid4().hex[:8]}"}
            for i, template in enumerate(TEMPLATES)
        ]
        start = threading.Barrier(len(asked), timeout=30)

        def create_and_follow(run: dict[str, Any]) -> dict[str, Any]:
            prompt = f"{run['marker']} tide pools of the north shore\nWrite about the tide pools for volunteers."
            start.wait()
            created = calls.request("POST", "/v1/run", run["key"], data={"prompt": prompt, "template": run["template"]})
            assert created.status_code == 200, created.text
            data = created.json()["data"]
            finished = poll_to_the_end(calls, data["run_id"], run["key"])
            dag = calls.request("GET", f"/v1/canvas/{data['canvas_id']}/dag", run["key"])
            return {**run, **data, "finished": finished, "dag": dag}

        # When all are created at once and each is polled to its end
        with ThreadPoolExecutor(max_workers=len(asked)) as pool:
            runs = [future.result(timeout=150) for future in [pool.submit(create_and_follow, r) for r in asked]]

        # Then each run reports its own template, and its canvas is named from its own prompt
        for run in runs:
            # (a web research block has no search provider here: it fails naming the setting, and the run is partial)
            errors = run["finished"].get("errors", [])
            expected = "partial" if any("set SEARCH_PROVIDER" in e["error"] for e in errors) else "completed"
            assert run["finished"]["status"] == expected, errors
            assert all("set SEARCH_PROVIDER" in e["error"] for e in errors), errors
            assert run["finished"]["run_id"] == run["run_id"]
            assert run["finished"]["metadata"]["template_used"] == run["template"], run["finished"]
            assert run["finished"]["prompt"].startswith(run["marker"])
            assert run["dag"].status_code == 200, run["dag"].text
            assert run["marker"] in run["dag"].json()["data"]["canvas_name"]
        assert len({run["run_id"] for run in runs}) == len(runs)
        assert len({run["canvas_id"] for run in runs}) == len(runs)
        # And each is its own account's only: the other accounts get 404, as for a run that does not exist
        for run in runs:
            assert calls.request("GET", f"/v1/run/{run['run_id']}", run["key"]).status_code == 200
            for other in (key for key in KEYS if key != run["key"]):
                assert calls.request("GET", f"/v1/run/{run['run_id']}", other).status_code == 404
                assert calls.request("GET", f"/v1/canvas/{run['canvas_id']}/dag", other).status_code == 404
        # And no create or poll was answered with a server error
        assert calls.server_errors() == []

    def test_a_burst_of_connections_is_answered_every_one(self, stack):
        # Given sixty clients, each with a create request ready on a connection of its own
        host, port = urlsplit(stack.base_url).hostname, urlsplit(stack.base_url).port
        body = urlencode({"prompt": "Burst: the tide pools of the north shore", "template": "memo"}).encode()
        request = (
            "POST /v1/run HTTP/1.1\r\n"
            f"Host: {host}:{port}\r\n"
            f"X-API-KEY: {BURST_KEY}\r\n"
            "Content-Type: application/x-www-form-urlencoded\r\n"
            f"Content-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n"
        ).encode() + body
        start = threading.Barrier(BURST, timeout=30)

        def post_at_once() -> tuple[int, dict[str, str]] | str:
            try:
                with socket.create_connection((host, port), timeout=60) as connection:
                    start.wait()
                    connection.sendall(request)
                    return parse_response(read_to_end(connection))
            except OSError as exc:  # a reset, a refused connection, a timeout: what a client must never see
                return f"{type(exc).__name__}: {exc}"

        # When all send at the same moment
        with ThreadPoolExecutor(max_workers=BURST) as pool:
            answers = [future.result(timeout=120) for future in [pool.submit(post_at_once) for _ in range(BURST)]]

        # Then every one got an HTTP answer: created, or asked to retry later, with Retry-After
        failures = [answer for answer in answers if isinstance(answer, str)]
        assert failures == []
        statuses = sorted(status for status, _ in answers)
        assert set(statuses) <= {200, 429, 503}, statuses
        assert 200 in statuses
        for status, headers in answers:
            if status in (429, 503):
                assert int(headers["retry-after"]) >= 1


def read_to_end(connection: socket.socket) -> bytes:
    chunks = []
    while chunk := connection.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def parse_response(raw: bytes) -> tuple[int, dict[str, str]] | str:
    head, _, _ = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    if not lines or not lines[0].startswith("HTTP/1."):
        return f"not an HTTP response: {raw[:80]!r}"
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(lines[0].split()[1]), headers


# ---------------------------------------------------------------- the per-account limit under racing creates


LIMIT = 2


class Held:
    """Plan Canvas held until released: the runs it would plan stay `running` for as long as the test needs."""

    def __init__(self, stack: LocalStack, logical_id: str = "PlanCanvasFunction"):
        self.stack, self.logical_id = stack, logical_id
        self.original = stack.functions[logical_id]
        self.released = threading.Event()

    def __enter__(self) -> Held:
        def held(event: Any, context: Any) -> Any:
            self.released.wait(timeout=60)
            return self.original.call(event)

        self.stack.functions[self.logical_id] = LocalFunction.of(
            self.logical_id, held, timeout_seconds=self.original.timeout_seconds
        )
        return self

    def __exit__(self, *_: Any) -> None:
        self.released.set()
        self.stack.functions[self.logical_id] = self.original


@pytest.fixture(scope="class")
def limited_stack() -> Iterator[LocalStack]:
    overrides = {"MaxConcurrentRunsPerAccount": str(LIMIT)}
    with LocalStack(api_keys=[LIMITED_KEY], parameter_overrides=overrides) as started:
        yield started


@pytest.fixture
def limited_calls(limited_stack: LocalStack) -> Iterator[Calls]:
    with httpx.Client(base_url=limited_stack.base_url, timeout=60) as client:
        yield Calls(client)


@pytest.fixture
def planning_held(limited_stack: LocalStack) -> Iterator[Held]:
    with Held(limited_stack) as held:
        yield held


class TestPerAccountLimit:
    def test_creates_racing_past_the_limit_are_refused_with_429_and_a_slot_comes_back_when_a_run_ends(
        self, limited_calls, planning_held
    ):
        # Given an account allowed two runs at once, whose runs stay running until planning is released
        start = threading.Barrier(5, timeout=30)

        def create(headers: dict[str, str] | None = None) -> httpx.Response:
            return limited_calls.request(
                "POST",
                "/v1/run",
                LIMITED_KEY,
                headers,
                data={"prompt": "Limits: the tide pools", "template": "memo"},
            )

        def create_at_once() -> httpx.Response:
            start.wait()
            return create()

        # When five creates race each other
        with ThreadPoolExecutor(max_workers=5) as pool:
            responses = [future.result(timeout=60) for future in [pool.submit(create_at_once) for _ in range(5)]]

        # Then exactly two are admitted, and the others are refused as the contract says
        assert sorted(r.status_code for r in responses) == [200, 200, 429, 429, 429]
        for refused in (r for r in responses if r.status_code == 429):
            assert refused.headers["retry-after"] == "10"
            assert refused.headers["content-type"] == "application/json"
            assert refused.headers.get("x-request-id")
            assert refused.json() == {
                "success": False,
                "error": f"Too many concurrent runs: the limit is {LIMIT} per account",
            }
        # And a create while both still run is refused too, with an Idempotency-Key as without
        retried = {"Idempotency-Key": "limits-retry-1"}
        assert create().status_code == 429
        assert create(retried).status_code == 429

        # When planning is released and the admitted runs end
        planning_held.released.set()
        admitted = [r.json()["data"]["run_id"] for r in responses if r.status_code == 200]
        ended = [poll_to_the_end(limited_calls, run_id, LIMITED_KEY)["status"] for run_id in admitted]

        # Then their slots are back: the refused keyed create, retried with its key, is admitted (a refusal is not
        # what the key answers), and repeated, answers the same run
        assert "running" not in ended
        admitted_again = create(retried)
        assert admitted_again.status_code == 200, admitted_again.text
        assert create(retried).json()["data"]["run_id"] == admitted_again.json()["data"]["run_id"]
        assert limited_calls.server_errors() == []
