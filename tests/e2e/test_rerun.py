"""Re-running one block of a canvas over HTTP on the embedded stack (POST /v1/canvas/{canvas_id}/blocks/{block_id}/
rerun): the chosen block and what depends on it run again on a copy of the canvas, the rest is reused, unpaid."""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest

from bench.dags import Block, Dag, scripted
from canvas_core.gather import fetch
from canvas_core.models.items import EdgeItem, NodeItem, RunItem
from canvas_core.planner import Plan, task_tree
from canvas_core.validation import MAX_AGENT_INSTRUCTIONS_CHARS
from tests.e2e.conftest import KEY_B, poll_until_finished
from tests.e2e.reruns import dag, rerun_analysis_and_check, three_level_plan
from tests.fakes.servers import FakeWeb

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]


def test_rerunning_the_analysis_reuses_the_files_and_runs_what_depends_on_it_again(http, monkeypatch):
    monkeypatch.setattr("canvas_core.orchestration.plan_canvas", three_level_plan)
    rerun_analysis_and_check(http)


def test_a_rerun_is_charged_only_for_the_blocks_that_ran_and_runs_nothing_upstream(http):
    # Given a finished chain of three scripted blocks that charge 5, 3 and 2 credits
    prompt = "rerun e2e: credits"
    chain = Dag([Block(credits=5), Block(credits=3), Block(credits=2)], edges=[(0, 1), (1, 2)])
    with scripted({prompt: chain}) as script:
        source = poll_until_finished(http, http.post("/v1/run", data={"prompt": prompt}).json()["data"]["run_id"])
        assert (source["status"], source["metadata"]["credits_consumed"]) == ("completed", 10), source
        first, middle, last = dag(http, source["canvas_id"]).values()
        balance = http.get("/v1/account").json()["data"]["credits_balance"]

        # When the middle block is re-run with instructions that make it charge 4
        response = http.post(
            f"/v1/canvas/{source['canvas_id']}/blocks/{middle['id']}/rerun", json={"instructions": '{"credits": 4}'}
        )
        assert response.status_code == 200, response.text
        run = poll_until_finished(http, response.json()["data"]["run_id"])

    # Then the first block did not run again, the other two did, and only they are charged
    assert run["status"] == "completed", run
    assert [script.attempts[b["id"]] for b in (first, middle, last)] == [1, 2, 2]
    assert run["metadata"]["credits_consumed"] == 4 + 2
    assert http.get("/v1/account").json()["data"]["credits_balance"] == balance - 6
    # And the reused block keeps its output
    assert dag(http, run["canvas_id"])[first["name"]]["content"] == first["content"]


# ------------------------------------------------------------------------------- a failed page, re-run


@pytest.fixture
def web(monkeypatch) -> Iterator[FakeWeb]:
    """A site whose names resolve as public ones would; connections land on the fake server."""
    with FakeWeb() as server:
        server.page("/tides", "<html><title>Tides</title><main><p>Spring tides reach 14 metres here.</p></main></html>")
        monkeypatch.setattr(fetch, "resolve_host", lambda host, port: ["93.184.216.34"])
        monkeypatch.setattr(
            fetch,
            "open_connection",
            lambda address, port, timeout: socket.create_connection(("127.0.0.1", server.port)),
        )
        yield server


def two_pages_plan(run: RunItem, provider: object = None) -> Plan:
    """Two web-blocks (a page that is there, one that is not yet) -> an analysis of both."""
    urls = ["http://news.example/tides", "http://news.example/surge"]
    ids = [str(uuid.uuid5(uuid.UUID(run.canvas_id), f"node:{i}")) for i in range(3)]
    nodes = [
        NodeItem(
            canvas_id=run.canvas_id,
            block_id=ids[i],
            name=f"Page {i}",
            type="web-block",
            url=url,
            persona="Researcher",
            position=i,
        )
        for i, url in enumerate(urls)
    ]
    nodes.append(
        NodeItem(
            canvas_id=run.canvas_id,
            block_id=ids[2],
            name="Analysis",
            type="prompt-block",
            inputs=ids[:2],
            persona="Analyst",
            instructions="What do the pages say about tides and storm surges?",
            position=2,
        )
    )
    edges = [EdgeItem(source_id=i, target_id=ids[2]) for i in ids[:2]]
    return Plan(nodes=nodes, edges=edges, tasks=task_tree(run, nodes))


def test_rerunning_the_failed_block_of_a_partial_run_completes_it(http, monkeypatch, web):
    # Given a run that ended partial: one of its pages could not be read (not there yet)
    monkeypatch.setattr("canvas_core.orchestration.plan_canvas", two_pages_plan)
    created = http.post("/v1/run", data={"prompt": "Tides and surges", "blocks": '["web-block","prompt-block"]'})
    source = poll_until_finished(http, created.json()["data"]["run_id"])
    assert source["status"] == "partial", source
    before = dag(http, source["canvas_id"])
    assert (before["Page 0"]["status"], before["Page 1"]["status"]) == ("completed", "error")
    assert [e["block_id"] for e in source["errors"]] == [before["Page 1"]["id"]]

    # When the page is there, and its block is re-run
    web.page("/surge", "<html><title>Surges</title><main><p>Storm surges add two metres in winter.</p></main></html>")
    response = http.post(f"/v1/canvas/{source['canvas_id']}/blocks/{before['Page 1']['id']}/rerun", json={})
    assert response.status_code == 200, response.text
    run = poll_until_finished(http, response.json()["data"]["run_id"])

    # Then the run completes: the page read, the analysis run again on both pages, the other page reused
    assert run["status"] == "completed", run
    assert run["errors"] == []
    after = dag(http, run["canvas_id"])
    assert after["Page 0"]["reused"] is True and "reused" not in after["Page 1"]
    assert "Storm surges add two metres" in after["Page 1"]["content"]
    assert "Storm surges add two metres" in after["Analysis"]["content"]
    assert "Spring tides reach 14 metres" in after["Analysis"]["content"]
    assert sorted(r.path for r in web.requests) == ["/surge", "/surge", "/tides"]


# ------------------------------------------------------------------------------------------------- refusals


@pytest.fixture(scope="module")
def ended(http) -> dict:
    """A finished run of the account, and its canvas's nodes."""
    run = poll_until_finished(
        http, http.post("/v1/run", data={"prompt": "What is a neap tide?"}).json()["data"]["run_id"]
    )
    return {"run": run, "nodes": list(dag(http, run["canvas_id"]).values())}


def rerun_url(canvas_id: str, block_id: str) -> str:
    return f"/v1/canvas/{canvas_id}/blocks/{block_id}/rerun"


def assert_error(response: httpx.Response, status: int, text: str) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["success"] is False and text in body["error"], body


def test_another_accounts_canvas_and_an_unknown_block_are_not_found(service, http, ended):
    canvas_id, block_id = ended["run"]["canvas_id"], ended["nodes"][0]["id"]
    # Another account's canvas answers as a missing one, and starts nothing
    with httpx.Client(base_url=service.base_url, headers={"X-API-KEY": KEY_B}) as other:
        runs_before = run_ids(other)
        assert_error(other.post(rerun_url(canvas_id, block_id), json={}), 404, f"Run not found: {canvas_id}")
        assert run_ids(other) == runs_before
    missing_canvas = str(uuid.uuid4())
    assert_error(http.post(rerun_url(missing_canvas, block_id), json={}), 404, f"Run not found: {missing_canvas}")
    missing_block = str(uuid.uuid4())
    assert_error(http.post(rerun_url(canvas_id, missing_block), json={}), 404, f"Block not found: {missing_block}")
    assert_error(http.post(rerun_url(canvas_id, "b-1"), json={}), 400, "Invalid block_id: 'b-1' is not a UUID")


def test_malformed_bodies_and_instructions_too_long_are_400(http, ended):
    url = rerun_url(ended["run"]["canvas_id"], ended["nodes"][0]["id"])
    runs_before = run_ids(http)
    json_body = {"Content-Type": "application/json"}
    assert_error(http.post(url, content=b"{not json", headers=json_body), 400, "Request body is not valid JSON")
    assert_error(http.post(url, content=b"[1, 2]", headers=json_body), 400, "Request body must be a JSON object")
    assert_error(http.post(url, json={"instructions": 42}), 400, "instructions must be a string")
    assert_error(
        http.post(url, json={"instruction": "typo"}),
        400,
        "Unknown field 'instruction': the body takes only instructions",
    )
    limit = MAX_AGENT_INSTRUCTIONS_CHARS
    too_long = http.post(url, json={"instructions": "x" * (limit + 1)})
    assert_error(too_long, 400, f"instructions is too long: {limit + 1} characters (maximum {limit})")
    # And a refused re-run started no run
    assert run_ids(http) == runs_before


def run_ids(client: httpx.Client) -> list[str]:
    return [r["run_id"] for r in client.get("/v1/runs", params={"limit": 100}).json()["data"]["runs"]]


def test_a_canvas_whose_run_is_still_running_is_409(http):
    # Given a run whose block is still at work
    prompt = "rerun e2e: still running"
    with scripted({prompt: Dag([Block(hang=True)])}) as script:
        run_id = http.post("/v1/run", data={"prompt": prompt}).json()["data"]["run_id"]
        canvas_id = http.get(f"/v1/run/{run_id}").json()["data"]["canvas_id"]
        nodes = []
        while not nodes:  # planned a moment after the create answers
            time.sleep(0.05)
            nodes = list(dag(http, canvas_id).values())
        # When one of its blocks is re-run
        response = http.post(rerun_url(canvas_id, nodes[0]["id"]), json={"instructions": "again"})
        # Then it is refused until the run has ended
        assert_error(response, 409, f"The run {run_id} of this canvas is still running")
        script.release()
        assert poll_until_finished(http, run_id)["status"] == "completed"
    assert http.post(rerun_url(canvas_id, nodes[0]["id"]), json={}).status_code == 200


def test_a_rerun_with_an_idempotency_key_starts_once_and_a_refused_one_can_be_tried_again(http):
    # Given a canvas whose run is still at work
    prompt = "rerun e2e: idempotent"
    with scripted({prompt: Dag([Block(hang=True)])}) as script:
        run_id = http.post("/v1/run", data={"prompt": prompt}).json()["data"]["run_id"]
        canvas_id = http.get(f"/v1/run/{run_id}").json()["data"]["canvas_id"]
        nodes = []
        while not nodes:  # planned a moment after the create answers
            time.sleep(0.05)
            nodes = list(dag(http, canvas_id).values())
        url, key = rerun_url(canvas_id, nodes[0]["id"]), {"Idempotency-Key": str(uuid.uuid4())}
        # When a keyed re-run is refused while the run goes on (409: its key is not kept)
        assert_error(http.post(url, json={}, headers=key), 409, "is still running")
        script.release()
        assert poll_until_finished(http, run_id)["status"] == "completed"
        # And sent again with that key once the run has ended, then once more, as a client retrying would
        runs_before = set(run_ids(http))
        first = http.post(url, json={}, headers=key)
        again = http.post(url, json={}, headers=key)

    # Then the key started one re-run, and the retry got its answer
    assert first.status_code == again.status_code == 200, (first.text, again.text)
    assert first.json()["data"] == again.json()["data"]
    assert set(run_ids(http)) - runs_before == {first.json()["data"]["run_id"]}
    rerun = poll_until_finished(http, first.json()["data"]["run_id"])
    assert rerun["metadata"]["rerun_of"]["block_id"] == nodes[0]["id"]
