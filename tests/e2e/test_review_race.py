"""An approval and a cancel of a run waiting for review, sent at the same moment, 50 times (with the tier's injected
faults: conflicts, throttling, Lambda errors): each race ends one way, the loser answers 409, the run's status says
what ran and what it was charged, and the account's balance moved by exactly what its runs were charged.
A scripted canvas (bench/dags.py) gives the blocks their charges."""

from __future__ import annotations

import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from bench.dags import Block, Dag, scripted
from tests.e2e.conftest import KEY_A, KEY_B, poll_until_finished

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

PROMPT = "review race e2e: approve and cancel at once"
# a -> b, charged 3 and 4: an approved run that completes is charged 7 besides planning.
DAG = Dag([Block(0.0, credits=3), Block(0.0, credits=4)], [(0, 1)])
TRIALS = 50
AT_ONCE = 5
# Two accounts share the trials: each starts fewer runs a minute than an account may.
KEYS = (KEY_A, KEY_B)
CANCELLED = "Cancelled by the client"
# What the loser answers: the other came first (or had already ended the run, when the loser read it).
CANCEL_LOST = "The run was approved as it was cancelled: it runs on; cancel it again to stop it"
APPROVE_LOST = (
    "The run is not waiting for approval: it is being cancelled",
    "The run is not waiting for approval: it has ended (failed)",
)


def race(base_url: str, key: str) -> dict:
    """One trial: a review run, once waiting, approved and cancelled at once; its answers and its end."""
    headers = {"X-API-KEY": key}
    with (
        httpx.Client(base_url=base_url, headers=headers, timeout=60) as http,
        httpx.Client(base_url=base_url, headers=headers, timeout=60) as other,
    ):
        created = http.post("/v1/run", data={"prompt": PROMPT, "review": "true"})
        assert created.status_code == 200, created.text
        run_id = created.json()["data"]["run_id"]
        deadline = time.monotonic() + 60
        while not http.get(f"/v1/run/{run_id}").json()["data"].get("awaiting_approval"):
            assert time.monotonic() < deadline, f"run {run_id} never waited for approval"
            time.sleep(0.05)
        barrier = threading.Barrier(2)
        answers: dict[str, httpx.Response] = {}

        def send(client: httpx.Client, action: str) -> None:
            barrier.wait()
            answers[action] = client.post(f"/v1/run/{run_id}/{action}")

        threads = [threading.Thread(target=send, args=pair) for pair in ((http, "approve"), (other, "cancel"))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        final = poll_until_finished(http, run_id)
        nodes = http.get(f"/v1/canvas/{final['canvas_id']}/dag").json()["data"]["nodes"]
    return {"key": key, "run_id": run_id, "answers": answers, "final": final, "nodes": nodes}


def final_planning(trial: dict) -> int:
    """What planning the run cost: the scripted planner calls no model."""
    return 0


def check(trial: dict) -> str:
    """Which way the race ended, after checking that it ended one way only and that the run tells the truth."""
    answers, final, nodes = trial["answers"], trial["final"], trial["nodes"]
    codes = (answers["approve"].status_code, answers["cancel"].status_code)
    errors = [e["error"] for e in final["errors"]]
    completed = [n for n in nodes if n["status"] == "completed"]
    charged = final["metadata"]["credits_consumed"]
    # What the completed blocks charge, by the scripted canvas's block ids (bench/dags.py, plan_for)
    prices = {str(uuid.uuid5(uuid.UUID(final["canvas_id"]), f"bench:{i}")): b.credits for i, b in enumerate(DAG.blocks)}
    blocks_charged = sum(prices[n["id"]] for n in completed)
    where = f"{trial['run_id']}: {codes} {final['status']} {errors} {[n['status'] for n in nodes]} charged {charged}"
    if codes == (200, 409):
        # The approval won: the cancel lost, the run ran as its blocks did, nothing says it was cancelled
        lost = answers["cancel"].json()
        assert lost["success"] is False, where
        assert lost["error"] in (
            CANCEL_LOST,
            f"The run has ended ({final['status']}); only a running run can be cancelled",
        )
        assert CANCELLED not in errors, where
        expected = "completed" if len(completed) == len(nodes) else ("partial" if completed else "failed")
        assert final["status"] == expected, where
        assert charged == final_planning(trial) + blocks_charged, where
        return "approved"
    if codes == (409, 200):
        # The cancel won: the approval lost, no block ran, only planning was charged
        lost = answers["approve"].json()
        assert lost["success"] is False and lost["error"] in APPROVE_LOST, where
        assert final["status"] == "failed" and errors[0] == CANCELLED, where
        assert answers["cancel"].json()["data"]["status"] == "failed", where
        assert not completed and blocks_charged == 0 and charged == final_planning(trial), where
        assert all(n["status"] == "error" for n in nodes), where
        return "cancelled"
    if codes == (200, 200):
        # The cancel reached the service after the approval had handed the run on (no overlap there, no race): it
        # ended the executing run, which says so and was charged for the blocks that completed before it only
        # (the approval's answer reads the run as it answers: still running, or already ended by the cancel)
        assert answers["approve"].json()["data"]["status"] in ("running", final["status"]), where
        assert answers["cancel"].json()["data"]["status"] == final["status"], where
        assert errors[0] == CANCELLED and len(completed) < len(nodes), where
        assert final["status"] == ("partial" if completed else "failed"), where
        assert charged == final_planning(trial) + blocks_charged, where
        return "cancelled after approval"
    raise AssertionError(f"the race did not end one way: {where} {[a.text for a in answers.values()]}")


def balances(service) -> dict[str, int]:
    with httpx.Client(base_url=service.base_url, timeout=30) as http:
        return {k: http.get("/v1/account", headers={"X-API-KEY": k}).json()["data"]["credits_balance"] for k in KEYS}


def test_an_approval_and_a_cancel_sent_at_once_end_one_way_fifty_times(service):
    # Given the accounts' balances
    before = balances(service)

    # When 50 review runs are each approved and cancelled at the same moment, a few runs at a time
    started = time.monotonic()
    with scripted({PROMPT: DAG}), ThreadPoolExecutor(AT_ONCE) as pool:
        trials = list(pool.map(lambda i: race(service.base_url, KEYS[i % len(KEYS)]), range(TRIALS)))
    took = time.monotonic() - started

    # Then each ended one way, the loser answering 409, with the run saying what ran and what it was charged
    outcomes = [check(trial) for trial in trials]
    counts = {o: outcomes.count(o) for o in sorted(set(outcomes))}
    print(f"{TRIALS} races in {took:.0f}s: {counts}")
    # Every race that overlapped at the service had a loser; a cancel arriving once the approval was done is rare
    assert counts.get("cancelled after approval", 0) <= TRIALS // 5, counts
    # And each account paid exactly what its runs say they were charged
    after = balances(service)
    for key in KEYS:
        charged = sum(t["final"]["metadata"]["credits_consumed"] for t in trials if t["key"] == key)
        assert before[key] - after[key] == charged
