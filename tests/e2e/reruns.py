"""What the re-run tests share (tests/e2e/test_rerun*.py): a three-level canvas (two uploaded files -> an analysis
-> a deliverable) given to Plan Canvas in place of the planner's, and the whole re-run of its analysis with new
instructions, checked as a user sees it over HTTP."""

from __future__ import annotations

import uuid

import httpx

from canvas_core.models.items import EdgeItem, NodeItem, RunItem
from canvas_core.planner import Plan, task_tree
from canvas_core.pricing import usage_credits
from tests.e2e.conftest import poll_until_finished

# Sentences on two subjects: an analysis keeps those bearing on its instructions, so new instructions change it.
SALES = (
    "Revenue in the north region grew 12 percent on new contracts. "
    "Revenue in the south region fell 3 percent after a price cut. "
    "Revenue from online orders doubled in the west region. "
    "Quarterly revenue per customer rose to 410 dollars. "
    "Revenue forecasts for the east region were raised twice. "
    "Revenue growth in the north region came mostly from repeat customers. "
    "Revenue from the central region stayed flat. "
    "Revenue targets for each region rise next year."
)
STAFF = (
    "Staff turnover in the south team reached 9 percent. "
    "The north team hired four engineers in March. "
    "Staff training hours per team doubled this year. "
    "The west team lost two staff to a competitor. "
    "Hiring for the east team paused until autumn. "
    "Staff surveys rated team morale 7 out of 10. "
    "The central team hired a new staff manager. "
    "Staff turnover in the west team halved."
)
FILES = [
    ("files", ("sales.txt", SALES.encode(), "text/plain")),
    ("files", ("staff.txt", STAFF.encode(), "text/plain")),
]
PROMPT = "Brief the board on the quarter from the files"
ANALYSIS = "Analyse the revenue figures by region"
NEW_INSTRUCTIONS = "Analyse staff turnover and hiring by team"
# A sentence only the new instructions bring into the analysis, and one only the old ones keep.
NEW_ONLY = "hired four engineers"
OLD_ONLY = "online orders doubled"


def three_level_plan(run: RunItem, provider: object = None) -> Plan:
    """A plan_canvas stand-in: one file-block per upload -> an analysis (prompt-block) -> a report (document-block)."""
    canvas_id = run.canvas_id
    nodes: list[NodeItem] = []

    def add(kind: str, name: str, inputs: list[NodeItem], persona: str, **extra: object) -> NodeItem:
        node = NodeItem(
            canvas_id=canvas_id,
            block_id=str(uuid.uuid5(uuid.UUID(canvas_id), f"node:{len(nodes)}")),
            name=name,
            type=kind,
            inputs=[i.block_id for i in inputs],
            persona=persona,
            position=len(nodes),
            **extra,  # type: ignore[arg-type]
        )
        nodes.append(node)
        return node

    files = [add("file-block", u.name, [], "Librarian", upload_id=u.file_id) for u in run.uploads]
    analysis = add("prompt-block", "Analysis", files, "Analyst", instructions=ANALYSIS)
    add("document-block", "Board brief", [analysis], "Writer", instructions="Write the board brief from the analysis")
    edges = [EdgeItem(source_id=i, target_id=n.block_id) for n in nodes for i in n.inputs]
    return Plan(nodes=nodes, edges=edges, tasks=task_tree(run, nodes))


def dag(http: httpx.Client, canvas_id: str) -> dict[str, dict]:
    data = http.get(f"/v1/canvas/{canvas_id}/dag").json()["data"]
    return {n["name"]: n for n in data["nodes"]}


def tasks(http: httpx.Client, canvas_id: str) -> list[dict]:
    """The persona-tasks of a canvas, completed or not."""
    data = http.get(f"/v1/canvas/{canvas_id}/tasks").json()["data"]
    return [c for root in data["completed"] + data["not_completed"] for c in root["children"]]


def source_run(http: httpx.Client) -> dict:
    """A finished run of the three-level canvas (Plan Canvas patched by the caller)."""
    created = http.post("/v1/run", data={"prompt": PROMPT}, files=FILES)
    assert created.status_code == 200, created.text
    run = poll_until_finished(http, created.json()["data"]["run_id"], timeout=90)
    assert run["status"] == "completed", run
    return run


def rerun_analysis_and_check(http: httpx.Client) -> None:
    """The source run, then a re-run of its analysis with new instructions, and everything a user sees of it."""
    # Given a finished run of files -> analysis -> deliverable
    source = source_run(http)
    before = dag(http, source["canvas_id"])
    assert OLD_ONLY in before["Analysis"]["content"] and NEW_ONLY not in before["Analysis"]["content"], before
    balance_before = http.get("/v1/account").json()["data"]["credits_balance"]

    # When its analysis is re-run with new instructions
    response = http.post(
        f"/v1/canvas/{source['canvas_id']}/blocks/{before['Analysis']['id']}/rerun",
        json={"instructions": NEW_INSTRUCTIONS},
    )

    # Then it answers as a create, with a new run and canvas
    assert response.status_code == 200, response.text
    created = response.json()["data"]
    assert created["status"] == "running" and created["poll_url"] == f"/v1/run/{created['run_id']}"
    assert created["run_id"] != source["run_id"] and created["canvas_id"] != source["canvas_id"]
    run = poll_until_finished(http, created["run_id"], timeout=90)
    assert run["status"] == "completed", run
    assert run["metadata"]["rerun_of"] == {
        "run_id": source["run_id"],
        "canvas_id": source["canvas_id"],
        "block_id": before["Analysis"]["id"],
    }
    after = dag(http, created["canvas_id"])
    assert list(after) == list(before)

    # And the files are reused as they were: same content and sources, marked, not charged
    for name in ("sales.txt", "staff.txt"):
        assert after[name]["reused"] is True and after[name]["status"] == "completed"
        assert (after[name]["content"], after[name]["sources"]) == (before[name]["content"], before[name]["sources"])
    # And the analysis and the deliverable ran again: the analysis on the new instructions
    for name in ("Analysis", "Board brief"):
        assert "reused" not in after[name] and after[name]["status"] == "completed"
    assert NEW_INSTRUCTIONS in after["Analysis"]["content"]
    assert NEW_ONLY in after["Analysis"]["content"] and OLD_ONLY not in after["Analysis"]["content"]
    # And the deliverable differs where the instructions say
    assert NEW_ONLY in after["Board brief"]["content"] and NEW_ONLY not in before["Board brief"]["content"]
    assert OLD_ONLY in before["Board brief"]["content"] and OLD_ONLY not in after["Board brief"]["content"]
    assert [a["type"] for a in run["result"]["artifacts"]] == ["docx"]

    # And the task tree says which blocks were reused, and the analysis's task names its new instructions
    by_block = {t["name"].split(": ", 1)[1]: t for t in tasks(http, created["canvas_id"])}
    reused = [name for name, task in by_block.items() if f"(reused from run {source['run_id']})" in name]
    assert sorted(r.split(" (")[0] for r in reused) == ["sales.txt", "staff.txt"]
    assert all(by_block[name]["status"] == "completed" for name in reused)
    [analysis_task] = [t for name, t in by_block.items() if name.startswith("Analysis")]
    assert NEW_INSTRUCTIONS in analysis_task["name"] and analysis_task["status"] == "completed"

    # And only the blocks that ran are charged (offline, the model calls are free and the docx is priced): the run's
    # credits, and the balance, move by what they cost
    spent = run["metadata"]["credits_consumed"]
    assert spent == usage_credits([], artifacts=len(run["result"]["artifacts"]))
    assert http.get("/v1/account").json()["data"]["credits_balance"] == balance_before - spent
    # And the re-run is listed among the account's runs, marked with what it re-ran, and its source is not
    listed = {r["run_id"]: r for r in http.get("/v1/runs", params={"limit": 10}).json()["data"]["runs"]}
    assert listed[created["run_id"]]["rerun_of"] == {
        "run_id": source["run_id"],
        "canvas_id": source["canvas_id"],
        "block_id": before["Analysis"]["id"],
    }
    assert listed[source["run_id"]]["rerun_of"] is None
