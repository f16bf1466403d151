"""Control over spend, end to end: a run created with review=true waits after planning with its plan and estimates,
runs once approved (with new instructions for a block), or ends when cancelled; a run cancelled mid-way keeps and
pays for what finished only. Scripted canvases (bench/dags.py) give blocks their charges and their pace."""

from __future__ import annotations

import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from bench.dags import Block, Dag, scripted
from tests.e2e.conftest import KEY_B, poll_until_finished

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]


def wait_for(http: httpx.Client, run_id: str, check, timeout: float = 60) -> dict:
    """The run's status once `check(status)` holds."""
    deadline = time.monotonic() + timeout
    while True:
        data = http.get(f"/v1/run/{run_id}").json()["data"]
        if check(data):
            return data
        assert time.monotonic() < deadline, f"run {run_id} never got there: {data}"
        time.sleep(0.1)


def dag_of(http: httpx.Client, canvas_id: str) -> dict:
    return http.get(f"/v1/canvas/{canvas_id}/dag").json()["data"]


def balance(http: httpx.Client) -> int:
    return http.get("/v1/account").json()["data"]["credits_balance"]


def test_a_review_run_waits_with_its_estimates_and_runs_approved_with_new_instructions(http):
    # Given a run created with review
    created = http.post(
        "/v1/run", data={"prompt": "Explain how a write-ahead log makes a database durable", "review": "true"}
    ).json()["data"]

    # When it has been planned
    waiting = wait_for(http, created["run_id"], lambda d: d.get("awaiting_approval"))

    # Then it is running and waiting, its DAG shows every planned block with its estimate, summed by the run; no
    # block has started
    assert waiting["status"] == "running"
    nodes = dag_of(http, created["canvas_id"])["nodes"]
    assert nodes
    assert all(isinstance(n["estimated_credits"], int) for n in nodes)
    assert waiting["estimated_credits"] == sum(n["estimated_credits"] for n in nodes)
    assert {n["status"] for n in nodes} == {"idle"}
    time.sleep(1)
    assert {n["status"] for n in dag_of(http, created["canvas_id"])["nodes"]} == {"idle"}

    # When it is approved with new instructions for its first prompt-block
    block = next(n for n in nodes if n["type"] == "prompt-block")
    asked = "Compare the fsync costs of group commit against per-transaction commit"
    approved = http.post(f"/v1/run/{created['run_id']}/approve", json={"instructions": {block["id"]: asked}})

    # Then it goes on as any run, and that block worked on its new instructions
    assert approved.status_code == 200, approved.text
    assert approved.json()["data"].get("awaiting_approval") is None
    final = poll_until_finished(http, created["run_id"])
    assert final["status"] == "completed", final
    ran = next(n for n in dag_of(http, created["canvas_id"])["nodes"] if n["id"] == block["id"])
    assert asked in ran["content"]
    # And approving again is refused: it is no longer waiting
    again = http.post(f"/v1/run/{created['run_id']}/approve")
    assert again.status_code == 409
    assert again.json() == {"success": False, "error": "The run is not waiting for approval: it has ended (completed)"}


def test_a_review_run_cancelled_while_waiting_fails_charged_for_planning_only(http):
    # Given a run created with review, whose blocks would charge 300 credits, waiting for approval
    before = balance(http)
    prompt = "review e2e: cancelled while waiting"
    with scripted({prompt: Dag([Block(0.0, credits=100), Block(0.0, credits=200)], [(0, 1)])}):
        created = http.post("/v1/run", data={"prompt": prompt, "review": "true"}).json()["data"]
        wait_for(http, created["run_id"], lambda d: d.get("awaiting_approval"))

        # When it is cancelled
        cancelled = http.post(f"/v1/run/{created['run_id']}/cancel")

        # Then it ended failed with the reason, its blocks never ran, and only planning was charged
        assert cancelled.status_code == 200, cancelled.text
        final = cancelled.json()["data"]
        assert final["status"] == "failed"
        assert final["errors"][0]["error"] == "Cancelled by the client"
        time.sleep(1)
        nodes = dag_of(http, created["canvas_id"])["nodes"]
        assert [n["status"] for n in nodes] == ["error", "error"]
    final = http.get(f"/v1/run/{created['run_id']}").json()["data"]
    assert final["status"] == "failed"
    planning = final["metadata"]["credits_consumed"]
    assert before - balance(http) == planning
    # And neither approve nor a second cancel can move it
    assert http.post(f"/v1/run/{created['run_id']}/approve").status_code == 409
    assert http.post(f"/v1/run/{created['run_id']}/cancel").status_code == 409


def test_a_run_cancelled_mid_way_ends_partial_paying_for_its_finished_blocks_only(http):
    # Given a -> b -> c, where a charges 30, b (60) is still working when the run is cancelled and c (90) waits
    before = balance(http)
    prompt = "cancel e2e: mid-way"
    with scripted(
        {prompt: Dag([Block(0.0, credits=30), Block(hang=True, credits=60), Block(0.0, credits=90)], [(0, 1), (1, 2)])}
    ):
        created = http.post("/v1/run", data={"prompt": prompt}).json()["data"]
        deadline = time.monotonic() + 60
        while [n["status"] for n in dag_of(http, created["canvas_id"])["nodes"]][:2] != ["completed", "running"]:
            assert time.monotonic() < deadline, "the run never got to its second block"
            time.sleep(0.1)

        # When it is cancelled
        cancelled = http.post(f"/v1/run/{created['run_id']}/cancel")

        # Then it ended partial at once, with the reason first among its errors and a's output as its answer
        assert cancelled.status_code == 200, cancelled.text
        final = cancelled.json()["data"]
        assert final["status"] == "partial"
        assert final["errors"][0]["error"] == "Cancelled by the client"
        assert final["result"]["final_output"]
    # And once b's work came back (its script released), it was dropped: only a was charged
    time.sleep(1)
    nodes = dag_of(http, created["canvas_id"])["nodes"]
    assert [n["status"] for n in nodes] == ["completed", "error", "error"]
    final = http.get(f"/v1/run/{created['run_id']}").json()["data"]
    assert final["status"] == "partial"
    assert final["metadata"]["credits_consumed"] == 30
    assert before - balance(http) == 30


def test_cancel_and_approve_refuse_what_they_cannot_do(http, service):
    # Given a finished run of account A, and one waiting for approval
    finished = http.post("/v1/run", data={"prompt": "A short note on idempotency keys"}).json()["data"]
    poll_until_finished(http, finished["run_id"])
    waiting = http.post("/v1/run", data={"prompt": "A short note on retries", "review": "true"}).json()["data"]
    wait_for(http, waiting["run_id"], lambda d: d.get("awaiting_approval"))

    # Then a finished run cannot be cancelled, nor approved
    ended = http.post(f"/v1/run/{finished['run_id']}/cancel")
    assert ended.status_code == 409
    assert ended.json() == {
        "success": False,
        "error": "The run has ended (completed); only a running run can be cancelled",
    }
    assert http.post(f"/v1/run/{finished['run_id']}/approve").status_code == 409
    # And another account's run is not found, to approve or to cancel
    with httpx.Client(base_url=service.base_url, headers={"X-API-KEY": KEY_B}, timeout=30) as other:
        for action in ("cancel", "approve"):
            refused = other.post(f"/v1/run/{waiting['run_id']}/{action}")
            assert refused.status_code == 404
            assert refused.json() == {"success": False, "error": f"Run not found: {waiting['run_id']}"}
    # And an unknown run, or a malformed id, is refused as GET /v1/run/{run_id} refuses it
    unknown = str(uuid.uuid4())
    assert http.post(f"/v1/run/{unknown}/cancel").json() == {"success": False, "error": f"Run not found: {unknown}"}
    malformed = http.post("/v1/run/not-a-run/approve")
    assert malformed.status_code == 400
    assert malformed.json()["error"] == "Invalid run_id: 'not-a-run' is not a UUID"
    # And instructions for a block the plan does not have, or of the wrong shape, are refused without approving
    stranger = str(uuid.uuid4())
    bad_block = http.post(f"/v1/run/{waiting['run_id']}/approve", json={"instructions": {stranger: "x"}})
    assert bad_block.status_code == 400
    assert stranger in bad_block.json()["error"]
    bad_shape = http.post(f"/v1/run/{waiting['run_id']}/approve", json={"instructions": ["not", "an", "object"]})
    assert bad_shape.status_code == 400
    assert bad_shape.json()["error"].startswith("Invalid instructions")
    assert http.get(f"/v1/run/{waiting['run_id']}").json()["data"]["awaiting_approval"] is True
    # And a review value other than true or false is refused
    refused = http.post("/v1/run", data={"prompt": "x", "review": "maybe"})
    assert refused.status_code == 400
    assert refused.json()["error"] == "Invalid review: expected true or false"
    # And a run without review is not waiting: approving it is refused
    plain = http.post("/v1/run", data={"prompt": "A short note on backoff"}).json()["data"]
    not_review = http.post(f"/v1/run/{plain['run_id']}/approve")
    assert not_review.status_code == 409
    poll_until_finished(http, plain["run_id"])
    assert http.post(f"/v1/run/{waiting['run_id']}/cancel").status_code == 200


def test_of_many_cancels_at_once_one_ends_the_run_and_the_others_find_it_ended(service, http):
    # Given a -> b, where a charges 20 and b is still working
    before = balance(http)
    prompt = "cancel e2e: many at once"
    with scripted({prompt: Dag([Block(0.0, credits=20), Block(hang=True, credits=40)], [(0, 1)])}):
        created = http.post("/v1/run", data={"prompt": prompt}).json()["data"]
        deadline = time.monotonic() + 60
        while [n["status"] for n in dag_of(http, created["canvas_id"])["nodes"]] != ["completed", "running"]:
            assert time.monotonic() < deadline, "the run never got to its second block"
            time.sleep(0.1)

        # When twelve cancels of it are sent at once
        def cancel(_: int) -> httpx.Response:
            with httpx.Client(base_url=service.base_url, headers=http.headers, timeout=60) as client:
                return client.post(f"/v1/run/{created['run_id']}/cancel")

        with ThreadPoolExecutor(max_workers=12) as pool:
            answers = list(pool.map(cancel, range(12)))

    # Then exactly one answers the cancelled run, the others that it has ended, and it was charged once, for a only
    ended = [a for a in answers if a.status_code == 200]
    assert len(ended) == 1, [a.text for a in answers]
    assert ended[0].json()["data"]["errors"][0]["error"] == "Cancelled by the client"
    assert {(a.status_code, a.json()["error"]) for a in answers if a.status_code != 200} == {
        (409, "The run has ended (partial); only a running run can be cancelled")
    }
    final = poll_until_finished(http, created["run_id"])
    assert final["status"] == "partial" and final["metadata"]["credits_consumed"] == 20
    assert before - balance(http) == 20
