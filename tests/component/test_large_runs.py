"""Runs whose outputs are large: what can grow past a few KB is stored by reference (canvas_core/content.py), so the
write that ends a run fits DynamoDB's 400 KB item whatever its blocks produced, and the API answers the whole text
inside Lambda's 6 MB response."""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest

from canvas_core.adapters.store import Store
from canvas_core.content import with_full_content
from tests.component.test_run_lifecycle import drive, get, start_run
from tests.support import load_event

pytestmark = pytest.mark.component

PAGE_CHARS = 60_000
LAMBDA_RESPONSE_BYTES = 6 * 1024 * 1024


def page_of(n: int, char: str = "x") -> str:
    head = f"Page {n}. "
    return head + char * (PAGE_CHARS - len(head))


def run_item_bytes(run_id: str, aws) -> int:
    item = aws.ddb.get_item(TableName=aws.settings.runs_table, Key={"run_id": {"S": run_id}})["Item"]
    return len(json.dumps(item).encode("utf-8"))


def seven_pages_and_a_failing_writer(monkeypatch, char: str = "x") -> None:
    from canvas_core.blocks.context import BlockOutput
    from canvas_core.errors import BlockFatalError

    def behaviour(ctx):
        if ctx.node.type == "web-block":
            return BlockOutput(content=page_of(ctx.node.position, char))
        raise BlockFatalError("The Writer could not finish")

    monkeypatch.setattr("canvas_core.blocks.runner.implementation", lambda block_type: behaviour)
    # The Planner reads at most 5 links of a prompt; these runs read more.
    monkeypatch.setattr("canvas_core.agents.rules.MAX_WEB_PAGES", 20)


def test_seven_large_pages_and_a_failed_writer_end_partial_with_the_whole_text_readable(
    aws, account, function, context, monkeypatch
):
    # Given a run reading seven web pages of 60,000 characters each, whose Writer fails
    seven_pages_and_a_failing_writer(monkeypatch)
    links = " ".join(f"https://example.com/page{n}" for n in range(7))
    body = "prompt=" + quote(f"Compare these pages: {links}") + "&blocks=" + quote('["web-block","text-block"]')
    created = start_run(function, context, account.api_key, body=body)
    # When the run is driven to its end
    blocks = drive(function, context, account.account_id, created)
    # Then it ends partial, its item far below DynamoDB's limit, and no run holds the account's slot
    assert [b["block_type"] for b in blocks].count("web-block") == 7
    status, body = get(function, context, account.api_key, "api/get_run", "get_run", run_id=created["run_id"])
    assert status == 200
    data = body["data"]
    assert data["status"] == "partial"
    assert run_item_bytes(created["run_id"], aws) < 64_000
    assert int(Store().get_account(account.account_id)["active_runs"]) == 0
    # And the API answers the whole final output: every page, whole
    final_output = data["result"]["final_output"]
    for n in range(7):
        assert page_of(n)[len(f"Page {n}. ") :] in final_output
    assert len(final_output) > 7 * PAGE_CHARS
    assert any(e["block_type"] == "text-block" and "could not finish" in e["error"] for e in data["errors"])


def test_the_dag_of_eighteen_large_cjk_pages_stays_under_lambdas_response_limit_and_pages_whole(
    aws, account, function, context, monkeypatch
):
    # Given a run of 18 web pages of 60,000 CJK characters (6 bytes a character as JSON escapes them)
    seven_pages_and_a_failing_writer(monkeypatch, char="漢")
    links = " ".join(f"https://example.com/page{n}" for n in range(18))
    body = "prompt=" + quote(f"Compare these pages: {links}") + "&blocks=" + quote('["web-block","text-block"]')
    created = start_run(function, context, account.api_key, body=body)
    drive(function, context, account.account_id, created)
    # When the DAG is read
    dag = function("api/get_canvas_dag")(
        load_event("get_canvas_dag", api_key=account.api_key, path_parameters={"canvas_id": created["canvas_id"]}),
        context,
    )
    # Then it answers inside Lambda's 6 MB, each large node cut and saying how long it is whole
    assert dag["statusCode"] == 200 and len(dag["body"].encode("utf-8")) < LAMBDA_RESPONSE_BYTES
    nodes = json.loads(dag["body"])["data"]["nodes"]
    pages = [n for n in nodes if n["type"] == "web-block"]
    assert len(pages) == 18
    assert all(n["content_truncated"] is True and n["content_length"] == PAGE_CHARS for n in pages)
    # And one node's whole content is read a page at a time with ?node=&offset=
    monkeypatch.setattr("canvas_core.canvas.CONTENT_PAGE_CHARS", 25_000)
    whole, offset, pages_read = "", 0, 0
    while True:
        event = load_event(
            "get_canvas_dag", api_key=account.api_key, path_parameters={"canvas_id": created["canvas_id"]}
        )
        query = {"node": pages[3]["id"], "offset": str(offset)}
        event["queryStringParameters"] = query
        event["multiValueQueryStringParameters"] = {k: [v] for k, v in query.items()}
        answer = function("api/get_canvas_dag")(event, context)
        assert answer["statusCode"] == 200, answer["body"]
        [node] = json.loads(answer["body"])["data"]["nodes"]
        whole, offset, pages_read = whole + node["content"], offset + len(node["content"]), pages_read + 1
        if not node.get("content_truncated"):
            break
    [stored] = with_full_content(Store().get_nodes(created["canvas_id"], [pages[3]["id"]]), account.account_id)
    assert whole == stored.content and len(whole) == PAGE_CHARS and pages_read == 3


def test_a_run_whose_results_cannot_be_written_ends_all_the_same_with_the_reason(
    aws, account, function, context, monkeypatch
):
    # Given a run whose end would write more than an item holds (as before its text was stored by reference)
    seven_pages_and_a_failing_writer(monkeypatch)
    monkeypatch.setattr(
        "canvas_core.orchestration.run_text_fields",
        lambda final_output, errors, *_: {"errors": errors, "final_output": "x" * 500_000},
    )
    body = "prompt=" + quote("Compare https://example.com/a and https://example.com/b")
    created = start_run(
        function, context, account.api_key, body=body + "&blocks=" + quote('["web-block","text-block"]')
    )
    # When it is driven to its end
    drive(function, context, account.account_id, created)
    # Then it has ended, saying why its results are missing, and its slot and reservation are settled
    _, body = get(function, context, account.api_key, "api/get_run", "get_run", run_id=created["run_id"])
    data = body["data"]
    assert data["status"] == "partial"
    assert any(e["error"].startswith("The run's results could not be recorded") for e in data["errors"])
    account_item = Store().get_account(account.account_id)
    assert int(account_item["active_runs"]) == 0
    assert Store().get_run(created["run_id"]).reserved_credits == 0
