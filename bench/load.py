"""Load on `canvas serve` as its clients see it: create and poll latency under 20 concurrent clients, runs that
end, runs answered with another run's data, memory and thread growth per run, and whether a burst of
simultaneous creates gets an answer for every request.

The service runs as a subprocess, so /proc describes the server alone; its output goes to a log file whose path
is printed. Every request goes to 127.0.0.1. `python -m bench load` runs the full benchmark;
`python -m bench.load --runs 20 --clients 5 --burst 20` is a quick check (bench/soak.py reuses the helpers here).
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import math
import os
import random
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self
from urllib.parse import urlencode

import httpx

from bench.growth import second_half, slope, slope_error

ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
SEED = 20261123

# 500 runs take 5 to 12 minutes on the 2-core reference machine; RSS is sampled every SAMPLE_EVERY runs ended,
# so the slope over the second half rests on about 45 samples (docs/benchmarks.md).
RUNS = 500
SAMPLE_EVERY = 5
CLIENTS = 20
ACCOUNTS = 3
# Five runs a client, at the load's concurrency: every template and block list several times, so each block's
# libraries are loaded and each function has as many execution environments as the load keeps busy before the
# baseline; a warm-up of 16 runs at 5 clients left the environments for 20 to be made during the load, as growth.
WARMUP_RUNS = 100
BURST = 200
RUN_DEADLINE_S = 300.0
POLL_INTERVAL_S = (0.5, 1.0)

REQUEST_TIMEOUT_S = 60.0
STARTUP_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 15.0
# A create answered 429 or 503 is tried again; this many times at most, and never past the run's deadline.
MAX_CREATE_ATTEMPTS = 100
MAX_RETRY_AFTER_S = 30.0

TERMINAL = frozenset({"completed", "partial", "failed"})
TEMPLATES = ("report", "memo", "excel", "slides", "app", "landing_page", "deep_research", "auto")
# Block types an explicit list draws from after its prompt-block: none fetches anything or needs a file.
LIST_BLOCKS = (
    "text-block",
    "table-block",
    "list-block",
    "document-block",
    "memo-block",
    "excel-block",
    "presentation-block",
    "app-block",
)
ASKS = {
    "report": "Write a short report on {topic}.",
    "memo": "Write a memo to the team about {topic}.",
    "excel": "Build a spreadsheet of figures about {topic}.",
    "slides": "Make a short slide deck on {topic}.",
    "app": "Build a small web app to explore {topic}.",
    "landing_page": "Design a landing page for a service about {topic}.",
    "deep_research": "Research {topic} in depth and summarize the findings.",
    "auto": "Explain {topic} for a general audience.",
    None: "Work through {topic}: outline it, tabulate it, list the key points and write it up.",
}
TOPICS = (
    "tide pools",
    "the four-day work week",
    "rooftop solar in small towns",
    "urban beekeeping",
    "night trains in Europe",
    "community libraries",
    "heat pumps in old houses",
    "river restoration",
)

# glibc gives every thread (each Python thread is one) a stack of RLIMIT_STACK, 8 MiB on a stock Linux, mapped
# anonymously with a 4 KiB guard page; /proc/PID/maps shows an 8192 KiB rw-p region beside a 4 KiB ---p one, or
# one 8196 KiB region where the two merge. Malloc arenas (64 MiB) and the main stack ([stack]) never match. A
# count that grows from run to run is thread stacks that are not given back, ended threads included.
THREAD_STACK_SIZES_KB = frozenset({8192, 8196})


# ---------------------------------------------------------------- the server under test


def free_port() -> int:
    """A port free on 127.0.0.1 now (`canvas serve --port 0` does not reliably say which port it took)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


def canvas_command() -> list[str]:
    script = Path(sys.executable).parent / "canvas"
    return [str(script)] if script.exists() else [sys.executable, "-m", "canvas_local.cli"]


def serve_options() -> str:
    """`canvas serve --help`, to pass only the options this version of the stack has."""
    shown = subprocess.run(
        [*canvas_command(), "serve", "--help"], capture_output=True, text=True, timeout=60, cwd=ROOT, check=False
    )
    return shown.stdout


def account_keys(name: str, count: int) -> list[str]:
    return [f"sk_canvas_bench_{name}_account_{i:02d}_{'0' * 24}" for i in range(count)]


@contextlib.contextmanager
def terminated_gracefully() -> Iterator[None]:
    """SIGTERM (a CI timeout, `kill PID`) ends the benchmark through its `finally` blocks, as Ctrl-C does, so the
    server is stopped too; Python's default would end the process at once and leave the server running."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminate(signum: int, _: Any) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class Server:
    """`canvas serve` as a subprocess on a free loopback port, one account per key; stopped with SIGTERM, killed
    if it has not exited after STOP_TIMEOUT_S. `with Server(keys, "load") as server:` always stops it."""

    def __init__(self, api_keys: Sequence[str], name: str, options: Sequence[str] = ()):
        self.api_keys = list(api_keys)
        self.name = name
        self.options = list(options)  # more `canvas serve` options (`--state-dir DIR`)
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        descriptor, path = tempfile.mkstemp(prefix=f"canvas-{name}-", suffix=".log")
        os.close(descriptor)
        self.log_path = Path(path)

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def pid(self) -> int:
        if self.process is None:
            raise RuntimeError("the server is not started")
        return self.process.pid

    def exit_code(self) -> int | None:
        """None while the server runs."""
        return None if self.process is None else self.process.poll()

    def __enter__(self) -> Self:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self) -> Self:
        options = serve_options()
        env = {
            **os.environ,
            # Nothing leaves the machine: no search provider, and loopback never goes through a proxy.
            "SEARCH_PROVIDER": "none",
            "NO_PROXY": f"{HOST},localhost",
            "no_proxy": f"{HOST},localhost",
            # The per-account limit on concurrent runs must not throttle the benchmark: raised through the option
            # where `canvas serve` has it (below), and here for a stack that reads it from the environment.
            "MAX_CONCURRENT_RUNS": "1000",
        }
        # A port picked free can be taken before the server binds it; a few tries, each on a new port.
        for _ in range(3):
            self.port = free_port()
            command = [*canvas_command(), "serve", "--host", HOST, "--port", str(self.port), "--provider", "offline"]
            command += [arg for key in self.api_keys for arg in ("--api-key", key)]
            if "--max-concurrent-runs" in options:
                command += ["--max-concurrent-runs", "1000"]
            if "--max-runs-per-minute" in options:
                command += ["--max-runs-per-minute", "100000"]
            command += self.options
            with self.log_path.open("ab") as log:
                # Its own session: a Ctrl-C in the terminal reaches the benchmark, which stops the server itself.
                self.process = subprocess.Popen(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    cwd=ROOT,
                    start_new_session=True,
                )
            if self._wait_until_ready():
                return self
            if self.exit_code() is None:
                self.stop()
                raise RuntimeError(f"canvas serve did not answer within {STARTUP_TIMEOUT_S:.0f}s; log {self.log_path}")
        raise RuntimeError(f"canvas serve exited at startup (code {self.exit_code()}); log {self.log_path}")

    def _wait_until_ready(self) -> bool:
        """True once the server answers an authenticated request as it should (404 for an unknown run): the port
        is ours, the accounts are seeded and the tables are there."""
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        probe = f"{self.base_url}/v1/run/{uuid.UUID(int=0)}"
        with httpx.Client(timeout=5, trust_env=False) as client:
            while time.monotonic() < deadline:
                if self.exit_code() is not None:
                    return False
                with contextlib.suppress(httpx.HTTPError):
                    if client.get(probe, headers={"X-API-KEY": self.api_keys[0]}).status_code == 404:
                        return True
                time.sleep(0.25)
        return False

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            # The session holds only what this benchmark started: the server and whatever it started.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=STOP_TIMEOUT_S)

    def watch(self, stop: threading.Event) -> threading.Thread:
        """Sets `stop` if the server exits, so clients give up at once instead of polling a dead port."""

        def watch() -> None:
            while not stop.wait(0.5):
                if self.exit_code() is not None:
                    stop.set()

        watcher = threading.Thread(target=watch, name=f"{self.name}-watch", daemon=True)
        watcher.start()
        return watcher


# ---------------------------------------------------------------- /proc


@dataclass(frozen=True)
class Footprint:
    """What the server's process tree holds: resident memory, threads and thread-stack-sized mappings."""

    rss_kb: int
    threads: int
    thread_maps: int
    processes: int

    def __str__(self) -> str:
        return f"rss={self.rss_kb} kB threads={self.threads} thread_maps={self.thread_maps} processes={self.processes}"


def process_tree(root: int) -> list[int]:
    """`root` and its descendants (the stack may run workers as child processes)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry.name}/stat").read_text()
        except OSError:
            continue  # ended while we looked
        # The command name, in parentheses, may hold spaces: the fields after it are state, then ppid.
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, ()))
    return tree


def rss_kb(pid: int) -> int:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def thread_count(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return 0


def thread_stack_maps(pid: int) -> int:
    """Anonymous mappings the size of a thread stack (THREAD_STACK_SIZES_KB explains the heuristic)."""
    try:
        lines = Path(f"/proc/{pid}/maps").read_text().splitlines()
    except OSError:
        return 0
    count = 0
    for line in lines:
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and fields[5].strip():
            continue  # a file, or a named region such as [heap] or [stack]
        start, end = (int(bound, 16) for bound in fields[0].split("-"))
        count += (end - start) // 1024 in THREAD_STACK_SIZES_KB
    return count


def footprint(pid: int) -> Footprint:
    pids = process_tree(pid)
    return Footprint(
        rss_kb=sum(rss_kb(p) for p in pids),
        threads=sum(thread_count(p) for p in pids),
        thread_maps=sum(thread_stack_maps(p) for p in pids),
        processes=len(pids),
    )


def settled_footprint(pid: int, timeout_s: float = 15.0) -> Footprint:
    """The footprint once the thread count has stopped moving: the server's connection threads end shortly after
    their clients close, and are not what is measured."""
    previous = footprint(pid)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        time.sleep(1.0)
        current = footprint(pid)
        if current.threads == previous.threads:
            return current
        previous = current
    return previous


def stack_rlimit_note() -> str | None:
    soft, _ = resource.getrlimit(resource.RLIMIT_STACK)
    if soft == 8192 * 1024:
        return None
    return f"note: RLIMIT_STACK is {soft} bytes, not 8 MiB; thread stacks have another size and thread_maps misses them"


# ---------------------------------------------------------------- the runs


@dataclass(frozen=True)
class RunSpec:
    """One run to create. `marker` is unique and starts the prompt, so the canvas name (the prompt's first line,
    cut at 80 characters) carries it."""

    index: int
    marker: str
    prompt: str
    template: str | None = None
    blocks: tuple[str, ...] | None = None

    def form(self) -> dict[str, str]:
        form = {"prompt": self.prompt}
        if self.template is not None:
            form["template"] = self.template
        if self.blocks is not None:
            form["blocks"] = json.dumps(list(self.blocks))
        return form

    def expected_template_used(self) -> frozenset[str]:
        if self.blocks is None:
            return frozenset({self.template or "auto"})
        # docs/api.md: `blocks` overrides `template`, which is still checked; the run keeps the template it was
        # sent ("auto" without one). Whether template_used then says that template or "auto" is not written
        # down, so either is accepted.
        return frozenset({"auto", self.template or "auto"})


def workload(prefix: str, session: str, count: int, rng: random.Random, max_blocks: int = 8) -> list[RunSpec]:
    """Every other run names a template (all eight in turn); the others send a `blocks` list of 2 to
    `max_blocks` types, a prompt-block and types drawn from LIST_BLOCKS, every second one with a template too."""
    specs = []
    for index in range(count):
        marker = f"{prefix}-{session}-{index:05d}"
        topic = TOPICS[index % len(TOPICS)]
        template: str | None
        blocks: tuple[str, ...] | None = None
        if index % 2 == 0:
            template = TEMPLATES[(index // 2) % len(TEMPLATES)]
            ask = ASKS[template]
        else:
            template = rng.choice(TEMPLATES) if index % 4 == 3 else None
            blocks = ("prompt-block", *rng.sample(LIST_BLOCKS, rng.randint(1, max_blocks - 1)))
            ask = ASKS[None]
        prompt = f"{marker}: {ask.format(topic=topic)}\nThis is run {index} of the {prefix} benchmark."
        specs.append(RunSpec(index, marker, prompt, template, blocks))
    return specs


@dataclass
class RunOutcome:
    spec: RunSpec
    api_key: str
    run_id: str | None = None
    canvas_id: str | None = None
    status: str | None = None  # the last status seen; None if the run was never created
    create_error: str | None = None
    credits: int = 0
    create_ms: float | None = None  # the accepted create's latency
    violations: list[str] = field(default_factory=list)  # evidence that the service mixed runs or accounts
    unverified: list[str] = field(default_factory=list)  # checks that could not be made (5xx, transport errors)

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL


@dataclass
class Tally:
    create_ms: list[float] = field(default_factory=list)
    poll_ms: list[float] = field(default_factory=list)
    throttled: int = 0  # 429 answers to a create, each tried again after its Retry-After
    unavailable: int = 0  # 503 answers to a create, likewise
    poll_errors: Counter[str] = field(default_factory=Counter)
    outcomes: list[RunOutcome] = field(default_factory=list)

    def add(self, other: Tally) -> None:
        self.create_ms += other.create_ms
        self.poll_ms += other.poll_ms
        self.throttled += other.throttled
        self.unavailable += other.unavailable
        self.poll_errors += other.poll_errors
        self.outcomes += other.outcomes

    def statuses(self) -> Counter[str]:
        return Counter(o.status if o.terminal else "not terminal" if o.run_id else "not created" for o in self.outcomes)


def retry_after_s(value: str | None) -> float:
    try:
        seconds = float(value) if value else 1.0
    except ValueError:
        seconds = 1.0  # an HTTP date, which this service does not send
    return min(max(seconds, 0.1), MAX_RETRY_AFTER_S)


def json_data(response: httpx.Response) -> dict[str, Any] | None:
    try:
        data = response.json().get("data")
    except (ValueError, AttributeError):
        return None
    return data if isinstance(data, dict) else None


class Client:
    """One client with its own connection pool: creates a run, polls it until it ends, then checks that what the
    service says about it is this run's and no other account's."""

    def __init__(
        self,
        base_url: str,
        rng: random.Random,
        stop: threading.Event,
        run_deadline_s: float = RUN_DEADLINE_S,
        poll_interval_s: tuple[float, float] = POLL_INTERVAL_S,
    ):
        self.http = httpx.Client(base_url=base_url, timeout=REQUEST_TIMEOUT_S, trust_env=False)
        self.rng = rng
        self.stop = stop
        self.run_deadline_s = run_deadline_s
        self.poll_interval_s = poll_interval_s
        self.tally = Tally()

    def close(self) -> None:
        self.http.close()

    def execute(self, spec: RunSpec, api_key: str, other_key: str) -> RunOutcome:
        outcome = RunOutcome(spec, api_key)
        self.tally.outcomes.append(outcome)
        deadline = time.monotonic() + self.run_deadline_s
        try:
            if self.create(outcome, deadline):
                self.poll(outcome, deadline)
                self.verify(outcome, other_key)
        except Exception as exc:  # a bug in the benchmark must not hide the other runs' figures
            outcome.unverified.append(f"client error: {exc!r}")
        return outcome

    def create(self, outcome: RunOutcome, deadline: float) -> bool:
        headers = {"X-API-KEY": outcome.api_key}
        for _ in range(MAX_CREATE_ATTEMPTS):
            if self.stop.is_set():
                outcome.create_error = "the benchmark stopped"
                return False
            started = time.perf_counter()
            try:
                response = self.http.post("/v1/run", data=outcome.spec.form(), headers=headers)
            except httpx.HTTPError as exc:
                # Not retried: the run may exist, and a second create would be a second run.
                outcome.create_error = type(exc).__name__
                return False
            elapsed_ms = (time.perf_counter() - started) * 1000
            if response.status_code in (429, 503):
                # Throttled: not a create, so its latency is left out; tried again when the server says.
                if response.status_code == 429:
                    self.tally.throttled += 1
                else:
                    self.tally.unavailable += 1
                wait = retry_after_s(response.headers.get("retry-after"))
                if time.monotonic() + wait > deadline:
                    outcome.create_error = f"HTTP {response.status_code} until the run's deadline"
                    return False
                self.stop.wait(wait)
                continue
            data = json_data(response)
            if response.status_code != 200 or data is None or not data.get("run_id"):
                outcome.create_error = f"HTTP {response.status_code} {response.text[:160]!r}"
                return False
            self.tally.create_ms.append(elapsed_ms)
            outcome.create_ms = elapsed_ms
            outcome.run_id, outcome.canvas_id = data["run_id"], data.get("canvas_id")
            outcome.status = data.get("status")
            return True
        outcome.create_error = f"throttled {MAX_CREATE_ATTEMPTS} times"
        return False

    def poll(self, outcome: RunOutcome, deadline: float) -> None:
        headers = {"X-API-KEY": outcome.api_key}
        while not outcome.terminal and time.monotonic() < deadline and not self.stop.is_set():
            self.stop.wait(self.rng.uniform(*self.poll_interval_s))
            started = time.perf_counter()
            try:
                response = self.http.get(f"/v1/run/{outcome.run_id}", headers=headers)
            except httpx.HTTPError as exc:
                self.tally.poll_errors[type(exc).__name__] += 1
                continue
            self.tally.poll_ms.append((time.perf_counter() - started) * 1000)
            data = json_data(response)
            if response.status_code != 200 or data is None:
                self.tally.poll_errors[f"HTTP {response.status_code}"] += 1
                continue
            outcome.status = data.get("status")

    def verify(self, outcome: RunOutcome, other_key: str) -> None:
        """The run reads back as the one created: its own prompt, canvas and template, its canvas named from its
        own prompt, visible to its account and not found for another."""
        if self.stop.is_set():
            outcome.unverified.append("the benchmark stopped")
            return
        spec, run_id = outcome.spec, outcome.run_id
        own, other = outcome.api_key, other_key
        run = self.read(outcome, f"/v1/run/{run_id}", own, expect=200, who="its own account")
        canvas_id = outcome.canvas_id
        if run is not None:
            if run.get("run_id") != run_id:
                outcome.violations.append(f"GET /v1/run/{run_id} answered run {run.get('run_id')}")
            if run.get("prompt") != spec.prompt:
                outcome.violations.append(f"prompt is {str(run.get('prompt'))[:60]!r}")
            if canvas_id and run.get("canvas_id") != canvas_id:
                outcome.violations.append(f"canvas_id {run.get('canvas_id')}, created with {canvas_id}")
            canvas_id = canvas_id or run.get("canvas_id")
            outcome.credits = int((run.get("metadata") or {}).get("credits_consumed") or 0)
            if run.get("status") in TERMINAL:
                used = (run.get("metadata") or {}).get("template_used")
                if used not in spec.expected_template_used():
                    sent = "blocks" if spec.blocks else spec.template
                    outcome.violations.append(f"template_used {used!r}, sent {sent!r}")
        if not canvas_id:
            outcome.unverified.append("no canvas_id to check")
        else:
            dag = self.read(outcome, f"/v1/canvas/{canvas_id}/dag", own, expect=200, who="its own account")
            if dag is not None:
                if spec.marker not in str(dag.get("canvas_name")):
                    outcome.violations.append(f"canvas_name {str(dag.get('canvas_name'))[:60]!r}")
                if dag.get("canvas_id") != canvas_id:
                    outcome.violations.append(f"DAG of canvas {dag.get('canvas_id')}, asked for {canvas_id}")
            self.read(outcome, f"/v1/canvas/{canvas_id}/dag", other, expect=404, who="another account")
        self.read(outcome, f"/v1/run/{run_id}", other, expect=404, who="another account")

    def read(self, outcome: RunOutcome, path: str, api_key: str, expect: int, who: str) -> dict[str, Any] | None:
        """GET `path` as `api_key`; a status other than `expect` is a violation, unless the server failed (5xx,
        no answer), which leaves the check unmade."""
        try:
            response = self.http.get(path, headers={"X-API-KEY": api_key})
        except httpx.HTTPError as exc:
            outcome.unverified.append(f"GET {path}: {type(exc).__name__}")
            return None
        if response.status_code >= 500:
            outcome.unverified.append(f"GET {path}: HTTP {response.status_code}")
            return None
        if response.status_code != expect:
            outcome.violations.append(f"GET {path} as {who}: HTTP {response.status_code}, expected {expect}")
            return None
        if expect != 200:
            return None
        data = json_data(response)
        if data is None:
            outcome.unverified.append(f"GET {path}: not a JSON success body")
        return data


def drive(
    base_url: str,
    keys: Sequence[str],
    specs: Sequence[RunSpec],
    clients: int,
    stop: threading.Event,
    *,
    label: str,
    run_deadline_s: float = RUN_DEADLINE_S,
    seed: int = SEED,
    on_ended: Callable[[int], None] | None = None,
) -> Tally:
    """Runs `specs` from `clients` concurrent clients, each one run at a time; run i uses account i mod 3 (round
    robin) and checks its isolation against the next account. `on_ended(n)` is called, outside the clients'
    lock, as the n-th run ends."""
    pending = iter(specs)
    lock = threading.Lock()
    ended: list[RunOutcome] = []
    tallies: list[Tally] = []
    started = time.monotonic()
    report_every = max(1, len(specs) // 10)

    def work(number: int) -> None:
        client = Client(base_url, random.Random(seed + number), stop, run_deadline_s)
        try:
            while not stop.is_set():
                with lock:
                    spec = next(pending, None)
                if spec is None:
                    return
                api_key = keys[spec.index % len(keys)]
                other_key = keys[(spec.index + 1) % len(keys)]
                outcome = client.execute(spec, api_key, other_key)
                with lock:
                    ended.append(outcome)
                    count = len(ended)
                    if count % report_every == 0 or count == len(specs):
                        terminal = sum(o.terminal for o in ended)
                        print(
                            f"  {label}: {count}/{len(specs)} runs ended, {terminal} terminal "
                            f"({time.monotonic() - started:.0f}s)",
                            flush=True,
                        )
                if on_ended is not None:
                    on_ended(count)
        finally:
            client.close()
            with lock:
                tallies.append(client.tally)

    threads = [
        threading.Thread(target=work, args=(n,), name=f"{label}-client-{n}", daemon=True)
        for n in range(min(clients, len(specs)))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    total = Tally()
    for tally in tallies:
        total.add(tally)
    return total


# ---------------------------------------------------------------- the burst


def burst_create(port: int, api_key: str, prompt: str) -> str:
    """One create on a fresh connection: its status ("200", "429", ...), or why there was no answer."""
    body = urlencode({"prompt": prompt, "blocks": json.dumps(["prompt-block", "text-block"])})
    headers = {
        "X-API-KEY": api_key,
        "Content-Type": "application/x-www-form-urlencoded",
        "Connection": "close",
    }
    connection = http.client.HTTPConnection(HOST, port, timeout=REQUEST_TIMEOUT_S)
    try:
        connection.request("POST", "/v1/run", body=body, headers=headers)
        response = connection.getresponse()
        response.read()
    except (OSError, http.client.HTTPException) as exc:  # reset, closed without an answer, timed out, refused
        return f"unanswered: {type(exc).__name__}"
    finally:
        connection.close()
    if response.status == 429 and not response.getheader("Retry-After"):
        return "429 without Retry-After"
    return str(response.status)


def burst(port: int, keys: Sequence[str], count: int, session: str) -> Counter[str]:
    """`count` creates at once: threads released together by a barrier, each opening its own connection."""
    barrier = threading.Barrier(count, timeout=30)
    answers: list[str | None] = [None] * count

    def one(index: int) -> None:
        with contextlib.suppress(threading.BrokenBarrierError):  # a thread that could not start: go anyway
            barrier.wait()
        answers[index] = burst_create(port, keys[index % len(keys)], f"burst-{session}-{index:05d}: tide pools")

    threads = [threading.Thread(target=one, args=(i,), name=f"burst-{i}", daemon=True) for i in range(count)]
    for thread in threads:
        thread.start()
    # The barrier, then a connect and a read of up to REQUEST_TIMEOUT_S each.
    deadline = time.monotonic() + 30 + 2 * REQUEST_TIMEOUT_S + 10
    for thread in threads:
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
    return Counter(answer or "unanswered: no answer in time" for answer in answers)


# ---------------------------------------------------------------- figures


def percentile(values: Sequence[float], p: float) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    k = (len(ordered) - 1) * p
    low, high = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (k - low)


def number(value: float, digits: int = 0) -> str:
    return "n/a" if math.isnan(value) else f"{value:.{digits}f}"


def histogram(counts: Counter[str]) -> str:
    return " ".join(f"{name.replace(' ', '_')}={count}" for name, count in sorted(counts.items())) or "none"


def print_problems(tally: Tally, limit: int = 5) -> None:
    """A few examples of each kind of problem, for the reader of the output; the log has the server's side."""
    shown = [
        ("not created", [o for o in tally.outcomes if o.create_error], lambda o: o.create_error),
        ("wrong", [o for o in tally.outcomes if o.violations], lambda o: "; ".join(o.violations)),
        ("unverified", [o for o in tally.outcomes if o.unverified], lambda o: "; ".join(o.unverified)),
    ]
    for kind, outcomes, why in shown:
        for outcome in outcomes[:limit]:
            print(f"  {kind}: {outcome.spec.marker} run {outcome.run_id}: {why(outcome)}", flush=True)
        if len(outcomes) > limit:
            print(f"  {kind}: ... and {len(outcomes) - limit} more", flush=True)


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    env = os.environ.get
    parser = argparse.ArgumentParser(prog="python -m bench.load", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=int(env("BENCH_LOAD_RUNS", RUNS)), help="runs under load")
    parser.add_argument("--clients", type=int, default=int(env("BENCH_LOAD_CLIENTS", CLIENTS)))
    parser.add_argument(
        "--burst", type=int, default=int(env("BENCH_LOAD_BURST", BURST)), help="simultaneous creates; 0 skips it"
    )
    parser.add_argument("--warmup", type=int, default=int(env("BENCH_LOAD_WARMUP", WARMUP_RUNS)))
    parser.add_argument(
        "--sample-every",
        type=int,
        default=int(env("BENCH_LOAD_SAMPLE_EVERY", SAMPLE_EVERY)),
        help="runs ended between samples of the server's footprint",
    )
    parser.add_argument("--run-deadline", type=float, default=RUN_DEADLINE_S, help="seconds a run may take")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.clients < 1 or args.sample_every < 1:
        parser.error("--runs, --clients and --sample-every must be at least 1")
    if args.burst < 0 or args.warmup < 0 or args.run_deadline <= 0:
        parser.error("--burst and --warmup must not be negative, --run-deadline must be positive")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    # From `python -m bench`, argv is None: the defaults, or the BENCH_LOAD_* environment variables.
    args = parse_args([] if argv is None else argv)
    keys = account_keys("load", ACCOUNTS)
    # The burst creates on accounts of its own: the load's accounts have spent much of their credits by then, and a
    # burst answered 402 would measure the ledger, not whether every create is answered.
    burst_keys = account_keys("burst", ACCOUNTS)
    session = uuid.uuid4().hex[:6]
    rng = random.Random(SEED)
    stop = threading.Event()
    burst_counts: Counter[str] = Counter()
    samples: list[tuple[int, Footprint]] = []  # (runs ended, the server's footprint then), as runs end
    with terminated_gracefully(), Server([*keys, *burst_keys], "load") as server:
        try:
            print(f"  canvas serve pid {server.pid} on {server.base_url}; log {server.log_path}", flush=True)
            if note := stack_rlimit_note():
                print(f"  {note}", flush=True)
            server.watch(stop)

            def run(
                specs: list[RunSpec], label: str, clients: int, on_ended: Callable[[int], None] | None = None
            ) -> Tally:
                return drive(
                    server.base_url,
                    keys,
                    specs,
                    clients,
                    stop,
                    label=label,
                    run_deadline_s=args.run_deadline,
                    on_ended=on_ended,
                )

            def sample(ended: int) -> None:
                if ended % args.sample_every == 0 and server.exit_code() is None:
                    samples.append((ended, footprint(server.pid)))

            if args.warmup:
                warm = run(workload("warmup", session, args.warmup, rng), "warm-up", min(args.clients, args.warmup))
                print(f"  warm-up statuses: {histogram(warm.statuses())}", flush=True)
            baseline = settled_footprint(server.pid)
            print(f"  baseline: {baseline}", flush=True)
            started = time.monotonic()
            load = run(workload("load", session, args.runs, rng), "load", args.clients, sample)
            elapsed = time.monotonic() - started
            after = settled_footprint(server.pid) if server.exit_code() is None else None
            print(f"  after {args.runs} runs ({elapsed:.0f}s): {after or 'server gone'}", flush=True)
            if args.burst and server.exit_code() is None:
                burst_counts = burst(server.port, burst_keys, args.burst, session)
            exit_code = server.exit_code()
        finally:
            stop.set()  # clients still running (an error, Ctrl-C) give up before the server goes
    print(f"  canvas serve stopped; log {server.log_path}", flush=True)

    print_problems(load)
    created = sum(1 for o in load.outcomes if o.run_id)
    credits: Counter[str] = Counter()
    for outcome in load.outcomes:
        credits[f"account_{keys.index(outcome.api_key)}"] += outcome.credits
    print(f"  statuses: {histogram(load.statuses())}", flush=True)
    print(f"  poll errors: {histogram(load.poll_errors)}", flush=True)
    print(f"  credits consumed (each account starts with 5000): {histogram(credits)}", flush=True)
    print(f"load_create_p50_ms {number(percentile(load.create_ms, 0.5))}")
    print(f"load_create_p95_ms {number(percentile(load.create_ms, 0.95))}")
    print(f"load_poll_p50_ms {number(percentile(load.poll_ms, 0.5))}")
    print(f"load_poll_p95_ms {number(percentile(load.poll_ms, 0.95))}")
    print(f"load_runs_terminal {sum(o.terminal for o in load.outcomes)} (of {args.runs})")
    print(f"load_create_throttled {load.throttled}")
    print(f"load_create_unavailable {load.unavailable}")
    print(f"load_wrong_runs {sum(1 for o in load.outcomes if o.violations)}")
    print(f"load_runs_unverified {sum(1 for o in load.outcomes if o.unverified and not o.violations)}")
    # Growth is the slope over the second half of the runs, while every client still has a run going: the start
    # fills caches and pools once, and the last runs, fewer at a time, hold less memory (bench/growth.py).
    later = second_half(samples, args.runs, last=args.runs - args.clients)
    shown = sorted(samples, key=lambda s: s[0])[:: max(1, len(samples) // 20)]
    print("  rss samples (runs ended: MB): " + ", ".join(f"{n}: {f.rss_kb / 1024:.0f}" for n, f in shown), flush=True)
    span = f"runs {later[0][0]}-{later[-1][0]}, {len(later)} samples" if later else "no samples"
    rss = [(n, f.rss_kb) for n, f in later]
    print(f"load_rss_growth_kb_per_run {number(slope(rss), 1)} (± {number(slope_error(rss), 1)} std. error, {span})")
    print(f"load_thread_maps_growth_per_run {number(slope([(n, f.thread_maps) for n, f in later]), 3)} ({span})")
    if after is not None and created:
        print(f"load_rss_after_minus_baseline_kb_per_run {(after.rss_kb - baseline.rss_kb) / created:.1f}")
        maps_per_run = (after.thread_maps - baseline.thread_maps) / created
        print(f"load_thread_maps_after_minus_baseline_per_run {maps_per_run:.3f}")
    else:
        print("load_rss_after_minus_baseline_kb_per_run n/a")
        print("load_thread_maps_after_minus_baseline_per_run n/a")
    if burst_counts:
        unanswered = sum(count for answer, count in burst_counts.items() if answer.startswith("unanswered"))
        answered = sum(burst_counts[status] for status in ("200", "429", "503"))
        print(f"load_burst_unanswered {unanswered} (of {args.burst})")
        print(f"load_burst_unexpected {args.burst - answered - unanswered}")
        print(f"load_burst_statuses {histogram(burst_counts)}")
    else:
        print("load_burst_unanswered n/a (no burst)")
    if exit_code is not None:
        raise RuntimeError(f"canvas serve exited with code {exit_code} during the benchmark; log {server.log_path}")


if __name__ == "__main__":
    main(sys.argv[1:])
