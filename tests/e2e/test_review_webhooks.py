"""A cancelled run's webhooks fire as for any end: run.failed for a run cancelled while it waited for approval,
run.partial for one cancelled after a block finished, each with the run as GET /v1/run/{run_id} shows it."""

from __future__ import annotations

import time

import pytest

from bench.dags import Block, Dag, scripted
from tests.e2e.test_webhooks import add_endpoint, http, receiver, run_events, service

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

__all__ = ["add_endpoint", "http", "receiver", "service"]  # the webhook tests' stack, receiver and endpoints


@pytest.mark.parametrize("review, outcome", [(True, "failed"), (False, "partial")])
def test_a_cancelled_runs_end_is_delivered_as_any_end(http, receiver, add_endpoint, review, outcome):
    # Given an endpoint for every run event, and a run waiting for approval, or one whose first block finished
    # and whose second still works
    path = f"/cancelled-{outcome}"
    endpoint = add_endpoint(path, ["run.started", "run.completed", "run.partial", "run.failed"])
    prompt = f"webhooks e2e: cancelled {outcome}"
    with scripted({prompt: Dag([Block(0.0, credits=4), Block(hang=True)], [(0, 1)])}):
        form = {"prompt": prompt, **({"review": "true"} if review else {})}
        created = http.post("/v1/run", data=form).json()["data"]
        deadline = time.monotonic() + 60
        while True:
            run = http.get(f"/v1/run/{created['run_id']}").json()["data"]
            nodes = http.get(f"/v1/canvas/{created['canvas_id']}/dag").json()["data"]["nodes"]
            if run.get("awaiting_approval") if review else [n["status"] for n in nodes] == ["completed", "running"]:
                break
            assert time.monotonic() < deadline, f"the run never got there: {run}"
            time.sleep(0.1)

        # When it is cancelled
        cancelled = http.post(f"/v1/run/{created['run_id']}/cancel")
        assert cancelled.status_code == 200, cancelled.text

    # Then the receiver got run.started and run.<outcome>, the latter with the cancel's reason first
    events = run_events(receiver, path, endpoint["secret"], created["run_id"], 2)
    assert sorted(e.type for e in events) == sorted(["run.started", f"run.{outcome}"])
    ended = next(e for e in events if e.type == f"run.{outcome}")
    assert ended.data["object"]["status"] == outcome
    assert ended.data["object"]["errors"][0]["error"] == "Cancelled by the client"
