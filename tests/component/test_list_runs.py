"""GET /v1/runs through its Lambda handler: the caller's runs newest first, page by page, and its 400s."""

from __future__ import annotations

import base64
import json
import uuid

import pytest

from canvas_core.adapters.store import Store
from canvas_core.auth import create_account_with_key
from canvas_core.models.items import RerunOf, RunItem
from tests.support import body_of, load_event

pytestmark = pytest.mark.component

BASE_MS = 1_763_700_000_000  # 2025-11-21T04:40:00.000Z


def list_runs(function, context, api_key, **query):
    params = {k: str(v) for k, v in query.items()} or None
    event = load_event(
        "list_runs",
        api_key=api_key,
        queryStringParameters=params,
        multiValueQueryStringParameters={k: [v] for k, v in params.items()} if params else None,
    )
    response = function("api/list_runs")(event, context)
    return response["statusCode"], body_of(response)


def store_run(account_id: str, created_at_ms: int, **fields) -> RunItem:
    run = RunItem(
        run_id=str(uuid.uuid4()),
        account_id=account_id,
        canvas_id=str(uuid.uuid4()),
        prompt=fields.pop("prompt", f"Run made at {created_at_ms}"),
        template=fields.pop("template", "report"),
        created_at_ms=created_at_ms,
        estimated_duration_ms=60_000,
        **fields,
    )
    Store().put_run(run)
    return run


def all_pages(function, context, api_key, limit: int) -> list[dict]:
    pages, cursor = [], None
    while True:
        query = {"limit": limit} | ({"cursor": cursor} if cursor else {})
        status, body = list_runs(function, context, api_key, **query)
        assert status == 200, body
        pages.append(body["data"])
        cursor = body["data"]["next_cursor"]
        if cursor is None:
            return pages


def test_pages_cover_the_accounts_runs_newest_first_and_no_one_elses(aws, account, function, context):
    # Given 25 runs of the caller (two created in the same millisecond) and 3 of another account
    runs = [store_run(account.account_id, BASE_MS + i * 1000) for i in range(24)]
    runs.append(store_run(account.account_id, runs[-1].created_at_ms))
    other_account, _ = create_account_with_key()
    others = {store_run(other_account, BASE_MS + i * 1000 + 500).run_id for i in range(3)}

    # When the caller reads every page of 10
    pages = all_pages(function, context, account.api_key, limit=10)

    # Then there are three pages (10, 10, 5), the last without a cursor, holding each run once, newest first
    assert [len(p["runs"]) for p in pages] == [10, 10, 5]
    assert [p["next_cursor"] is None for p in pages] == [False, False, True]
    listed = [r for p in pages for r in p["runs"]]
    assert sorted(r["run_id"] for r in listed) == sorted(r.run_id for r in runs)
    times = [r["created_at"] for r in listed]
    assert times == sorted(times, reverse=True)
    assert not others & {r["run_id"] for r in listed}


def test_a_last_page_that_is_exactly_full_has_no_cursor(aws, account, function, context):
    # Given exactly two pages of runs
    for i in range(10):
        store_run(account.account_id, BASE_MS + i)

    # When / Then the second page is the last: no empty third page to fetch
    pages = all_pages(function, context, account.api_key, limit=5)
    assert [len(p["runs"]) for p in pages] == [5, 5]


def test_a_run_is_listed_with_its_summary_fields(aws, account, function, context):
    # Given a run with a long prompt and explicit blocks, and a finished one with a template
    long_prompt = "Compare tide tables. " * 30
    listed_blocks = store_run(account.account_id, BASE_MS, prompt=long_prompt, blocks=["prompt-block"])
    reported = store_run(account.account_id, BASE_MS + 1000, status="completed", final_output="x" * 50_000)

    # When the caller lists with the default limit
    status, body = list_runs(function, context, account.api_key)

    # Then
    assert status == 200
    assert body["success"] is True
    assert body["data"]["next_cursor"] is None
    first, second = body["data"]["runs"]
    assert first == {
        "run_id": reported.run_id,
        "status": "completed",
        "created_at": "2025-11-21T04:40:01.000Z",
        "canvas_id": reported.canvas_id,
        "template_used": "report",
        "prompt": "Run made at 1763700001000",
        "rerun_of": None,
    }
    assert second["run_id"] == listed_blocks.run_id
    assert second["status"] == "running"
    assert second["template_used"] == "auto"  # explicit blocks override the template
    assert second["prompt"] == long_prompt[:200]


def test_a_run_created_through_the_api_is_listed(aws, account, function, context):
    # Given a run created as clients create them
    created = function("api/create_run")(load_event("create_run", api_key=account.api_key), context)
    run_id = body_of(created)["data"]["run_id"]

    # When
    status, body = list_runs(function, context, account.api_key, limit=1)

    # Then
    assert status == 200
    assert [(r["run_id"], r["status"]) for r in body["data"]["runs"]] == [(run_id, "running")]


def test_an_account_without_runs_gets_an_empty_page(aws, account, function, context):
    assert list_runs(function, context, account.api_key) == (
        200,
        {"success": True, "data": {"runs": [], "next_cursor": None}},
    )


@pytest.mark.parametrize(
    ("limit", "reason"),
    [
        ("0", "Input should be greater than or equal to 1"),
        ("101", "Input should be less than or equal to 100"),
        ("ten", "Input should be a valid integer, unable to parse string as an integer"),
    ],
)
def test_a_limit_outside_1_to_100_is_400(aws, account, function, context, limit, reason):
    status, body = list_runs(function, context, account.api_key, limit=limit)

    assert (status, body) == (400, {"success": False, "error": f"Invalid request: query.limit: {reason}"})


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@pytest.mark.parametrize(
    "cursor",
    [
        "not a cursor!",
        _b64(b"garbage"),
        _b64(json.dumps({"created_at_ms": 1, "run_id": "3f2c5d1e-7a4b-4c8d-9e0f-1a2b3c4d5e6f"}).encode()),
        _b64(json.dumps([-1, "3f2c5d1e-7a4b-4c8d-9e0f-1a2b3c4d5e6f"]).encode()),
        _b64(json.dumps([BASE_MS, "not-a-uuid"]).encode()),
        _b64(b"\xff\xfe"),
    ],
)
def test_a_cursor_the_service_did_not_give_is_400(aws, account, function, context, cursor):
    status, body = list_runs(function, context, account.api_key, cursor=cursor)

    assert (status, body) == (
        400,
        {"success": False, "error": "Invalid cursor: pass the next_cursor of the previous page unchanged"},
    )


def test_a_request_without_a_key_is_401_even_with_a_bad_limit(aws, account, function, context):
    status, body = list_runs(function, context, None, limit=0)

    assert (status, body) == (401, {"success": False, "error": "X-API-KEY header required"})


def test_a_rerun_is_listed_with_the_run_canvas_and_block_it_reran(aws, account, function, context):
    # Given a run and a re-run of its block "b2", alike but for rerun_of
    source = store_run(account.account_id, BASE_MS, prompt="Tide pools")
    rerun = store_run(
        account.account_id,
        BASE_MS + 1000,
        prompt="Tide pools",
        rerun_of=RerunOf(run_id=source.run_id, canvas_id=source.canvas_id, block_id="b2"),
    )

    # When the caller lists its runs
    status, body = list_runs(function, context, account.api_key)

    # Then the re-run says what it re-ran and the source run says null
    assert status == 200, body
    listed = {r["run_id"]: r for r in body["data"]["runs"]}
    assert listed[rerun.run_id]["rerun_of"] == {
        "run_id": source.run_id,
        "canvas_id": source.canvas_id,
        "block_id": "b2",
    }
    assert listed[source.run_id]["rerun_of"] is None
