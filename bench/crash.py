"""`canvas serve --state-dir` killed with SIGKILL under load at random moments, and started again on the same folder.

`.venv/bin/python -m bench.crash [--kills 10] [--clients 6] [--seed N]` (not part of `make bench`: a few minutes).
Each cycle starts `canvas serve --state-dir DIR` (bench/load.py's Server, three accounts), lets clients create runs
(bench/load.py's mix, each with its own `Idempotency-Key`, each client polling its run to its end before the next),
and kills the server with SIGKILL after a random 2 to 8 s. After each restart, and once more after a last SIGTERM:

- every run whose create was answered 200 answers `GET /v1/run/{id}` to its key with itself, and has ended (a run
  whose execution died with the process is ended at start, not left `running`);
- the runs created in the cycle just killed answer their `Idempotency-Key` replayed with the same run, and the
  artifacts of those that completed download with the size they list;
- the state directory reads whole: `PRAGMA integrity_check`, every item's JSON, every object's body file there with
  the bytes its name hashes to;
- the ledger adds up (docs/architecture.md, "The ledger"): once every run has ended, for each account the credits
  it lost (5,000 at sign-up minus `credits_balance`) and its `credits_used_<month>` counters both equal the sum of its
  runs' `credits_consumed`.

Prints `crash_*` figures and exits 1 when anything acknowledged is missing, a run is left running, the state does not
read or the ledger does not add up. With CANVAS_INJECT_FAULTS set, the server injects those faults too.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import shutil
import signal
import sqlite3
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.load import (
    TERMINAL,
    RunSpec,
    Server,
    account_keys,
    json_data,
    retry_after_s,
    terminated_gracefully,
    workload,
)

STARTING_CREDITS = 5000  # canvas_core.auth.STARTING_CREDITS: every account here is seeded with it, never granted more
KILL_AFTER_S = (2.0, 8.0)
REQUEST_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Acknowledged:
    """A run whose create was answered 200, and what it was created with."""

    run_id: str
    api_key: str
    idempotency_key: str
    spec: RunSpec
    cycle: int


@dataclass
class Findings:
    problems: list[str] = field(default_factory=list)
    runs_checked: int = 0
    replays_checked: int = 0
    artifacts_checked: int = 0
    ledger_mismatch: int = 0
    left_running: int = 0

    def problem(self, text: str) -> None:
        self.problems.append(text)


class Load:
    """Clients creating runs until told to stop (or the server is gone), each polling its run to its end."""

    def __init__(self, server: Server, specs: Iterator[RunSpec], cycle: int, clients: int, seed: int) -> None:
        self.server, self.cycle = server, cycle
        self._specs = specs
        self._lock = threading.Lock()
        self.acknowledged: list[Acknowledged] = []
        self.stop = threading.Event()
        self._rng = random.Random(seed)
        self._threads = [threading.Thread(target=self._client, args=(i,), daemon=True) for i in range(clients)]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def join(self) -> None:
        self.stop.set()
        for thread in self._threads:
            thread.join(REQUEST_TIMEOUT_S + 5)

    def _next(self) -> RunSpec | None:
        with self._lock:
            return next(self._specs, None)

    def _client(self, index: int) -> None:
        keys = self.server.api_keys
        with httpx.Client(base_url=self.server.base_url, timeout=REQUEST_TIMEOUT_S, trust_env=False) as http:
            while not self.stop.is_set() and (spec := self._next()) is not None:
                api_key = keys[spec.index % len(keys)]
                idempotency_key = f"{spec.marker}-{uuid.uuid4()}"
                headers = {"X-API-KEY": api_key, "Idempotency-Key": idempotency_key}
                try:
                    response = http.post("/v1/run", data=spec.form(), headers=headers)
                    while response.status_code in (409, 429, 503) and not self.stop.is_set():
                        time.sleep(min(retry_after_s(response.headers.get("retry-after")), 2.0))
                        response = http.post("/v1/run", data=spec.form(), headers=headers)
                except httpx.HTTPError:
                    return  # the server was killed: what it did not answer was not acknowledged
                data = json_data(response)
                if response.status_code != 200 or data is None:
                    continue
                run_id = str(data["run_id"])
                with self._lock:
                    self.acknowledged.append(Acknowledged(run_id, api_key, idempotency_key, spec, self.cycle))
                try:
                    while not self.stop.is_set():
                        polled = json_data(http.get(f"/v1/run/{run_id}", headers={"X-API-KEY": api_key}))
                        if polled is not None and polled.get("status") in TERMINAL:
                            break
                        time.sleep(self._rng.uniform(0.2, 0.5))
                except httpx.HTTPError:
                    return


def check_runs(server: Server, runs: Sequence[Acknowledged], last_cycle: int, findings: Findings) -> None:
    """Every acknowledged run is there and has ended; the last cycle's replay their key and download their files."""
    with httpx.Client(base_url=server.base_url, timeout=REQUEST_TIMEOUT_S, trust_env=False) as http:
        for run in runs:
            response = http.get(f"/v1/run/{run.run_id}", headers={"X-API-KEY": run.api_key})
            data = json_data(response)
            findings.runs_checked += 1
            if response.status_code != 200 or data is None or data.get("run_id") != run.run_id:
                findings.problem(f"run {run.run_id} (cycle {run.cycle}) answered {response.status_code} after restart")
                continue
            if data.get("status") not in TERMINAL:
                findings.left_running += 1
                findings.problem(f"run {run.run_id} (cycle {run.cycle}) is still {data.get('status')} after restart")
            if run.cycle != last_cycle:
                continue
            headers = {"X-API-KEY": run.api_key, "Idempotency-Key": run.idempotency_key}
            replay = http.post("/v1/run", data=run.spec.form(), headers=headers)
            replayed = json_data(replay)
            findings.replays_checked += 1
            if replay.status_code != 200 or replayed is None or replayed.get("run_id") != run.run_id:
                findings.problem(
                    f"Idempotency-Key of run {run.run_id} answered {replay.status_code} "
                    f"{(replayed or {}).get('run_id')} after restart"
                )
            for artifact in (data.get("result") or {}).get("artifacts") or []:
                download = http.get(artifact["download_url"])
                findings.artifacts_checked += 1
                if download.status_code != 200 or len(download.content) != artifact["size_bytes"]:
                    findings.problem(
                        f"artifact {artifact['name']} of run {run.run_id} answered {download.status_code} "
                        f"with {len(download.content)} of {artifact['size_bytes']} bytes"
                    )


def check_state(state_dir: Path, findings: Findings) -> dict[str, int]:
    """The state directory reads whole, and the ledger adds up in it; returns counts of what it holds."""
    if not (state_dir / "state.db").is_file():
        findings.problem(f"{state_dir} holds no state.db")
        return {}
    db = sqlite3.connect(f"file:{state_dir / 'state.db'}?mode=ro", uri=True)
    try:
        (integrity,) = db.execute("PRAGMA integrity_check").fetchone()
        if integrity != "ok":
            findings.problem(f"state.db integrity_check: {integrity}")
        items: dict[str, list[dict[str, Any]]] = {}
        for table, key, text in db.execute("SELECT tbl, key, item FROM items"):
            try:
                items.setdefault(table, []).append(json.loads(text))
                json.loads(key)
            except ValueError as exc:
                findings.problem(f"an item of {table} does not read: {exc}")
        objects = 0
        for bucket, key, body, size in db.execute("SELECT bucket, key, body, size FROM objects"):
            objects += 1
            path = state_dir / "bodies" / body
            data = path.read_bytes() if path.is_file() else None
            if data is None or hashlib.sha256(data).hexdigest() != body or len(data) != size:
                findings.problem(f"object {bucket}/{key}: its body {body} is missing or not its bytes")
    finally:
        db.close()
    runs = items.get("RunsTable", [])
    spent: dict[str, int] = {}
    for run in runs:
        if run["status"]["S"] == "running":
            findings.left_running += 1
            findings.problem(f"run {run['run_id']['S']} is stored as running after restart")
        account = run["account_id"]["S"]
        spent[account] = spent.get(account, 0) + int(run.get("credits_consumed", {}).get("N", "0"))
    for account in items.get("AccountsTable", []):
        account_id = account["account_id"]["S"]
        lost = STARTING_CREDITS - int(account["credits_balance"]["N"])
        counted = sum(int(value["N"]) for name, value in account.items() if name.startswith("credits_used_"))
        for what, amount in (("lost from its balance", lost), ("counted as used", counted)):
            if amount != spent.get(account_id, 0):
                findings.ledger_mismatch += abs(amount - spent.get(account_id, 0))
                findings.problem(
                    f"account {account_id}: {amount} credits {what}, its runs' credits_consumed add up to "
                    f"{spent.get(account_id, 0)}"
                )
    return {"items": sum(len(rows) for rows in items.values()), "runs": len(runs), "objects": objects}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.crash", description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=10, help="SIGKILLs, each followed by a restart (default 10)")
    parser.add_argument("--clients", type=int, default=6, help="concurrent clients creating runs (default 6)")
    parser.add_argument("--seed", type=int, default=20261126)
    parser.add_argument("--keep", action="store_true", help="keep the state directory (its path is printed)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    rng = random.Random(args.seed)
    state_dir = Path(tempfile.mkdtemp(prefix="canvas-crash-"))
    keys = account_keys("crash", 3)
    specs = iter(workload("crash", uuid.uuid4().hex[:8], 100_000, rng, max_blocks=4))
    acknowledged: list[Acknowledged] = []
    findings = Findings()
    started = time.monotonic()
    kill_moments: list[float] = []
    held: dict[str, int] = {}
    print(f"crash: state directory {state_dir}", file=sys.stderr, flush=True)
    try:
        with terminated_gracefully():
            for cycle in range(args.kills + 1):
                server = Server(keys, "crash", ["--state-dir", str(state_dir)])
                with server:
                    check_runs(server, acknowledged, cycle - 1, findings)
                    held = check_state(state_dir, findings)
                    if cycle == args.kills:
                        break
                    load = Load(server, specs, cycle, args.clients, rng.randrange(2**32))
                    load.start()
                    moment = rng.uniform(*KILL_AFTER_S)
                    time.sleep(moment)
                    assert server.process is not None
                    server.process.send_signal(signal.SIGKILL)
                    server.process.wait(30)
                    kill_moments.append(moment)
                    load.join()
                    acknowledged += load.acknowledged
                    print(
                        f"crash: cycle {cycle}: killed after {moment:.1f} s, {len(load.acknowledged)} runs created",
                        file=sys.stderr,
                        flush=True,
                    )
            # Stopped with SIGTERM by the `with` above: the state once more, as the last start left it.
            held = check_state(state_dir, findings)
    finally:
        if not args.keep:
            shutil.rmtree(state_dir, ignore_errors=True)
    print(f"crash_kills {len(kill_moments)}")
    print(f"crash_kill_moments_s {' '.join(f'{m:.1f}' for m in kill_moments)}")
    print(f"crash_runs_acknowledged {len(acknowledged)}")
    print(f"crash_run_checks {findings.runs_checked}")
    print(f"crash_idempotency_replays {findings.replays_checked}")
    print(f"crash_artifacts_downloaded {findings.artifacts_checked}")
    print(f"crash_state_items {held.get('items', 0)}")
    print(f"crash_state_runs {held.get('runs', 0)}")
    print(f"crash_state_objects {held.get('objects', 0)}")
    print(f"crash_runs_left_running {findings.left_running}")
    print(f"crash_ledger_mismatch_credits {findings.ledger_mismatch}")
    print(f"crash_problems {len(findings.problems)}")
    print(f"crash_seconds {time.monotonic() - started:.0f}")
    for problem in findings.problems[:20]:
        print(f"crash: {problem}", file=sys.stderr)
    return 1 if findings.problems else 0


if __name__ == "__main__":
    sys.exit(main())
