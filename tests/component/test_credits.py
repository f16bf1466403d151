"""Runs through the handlers (as the state machine drives them) with the model providers talking to fake Bedrock
and fake OpenAI-compatible servers on 127.0.0.1: planning, writing, token usage and credits flow end to end; a
malformed plan is repaired; throttled calls are retried; credits_consumed is what planning and the blocks
used, and the account balance moves by exactly that, once, however often a step is retried, and never below zero:
a debit the balance cannot pay is refused, and the block (or the planning) it was for is not kept."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from decimal import Decimal
from urllib.parse import urlencode

import pytest

from canvas_core.adapters.store import Store
from canvas_core.auth import create_account_with_key
from canvas_core.errors import BlockRetryableError, CreditsExhaustedError, ReservationShortError
from canvas_core.pricing import usage_credits
from tests.fakes.model_servers import PLANNER_MARK, Call, FakeBedrock, FakeOpenAI, default_reply, tokens
from tests.support import body_of, load_event, multipart

pytestmark = pytest.mark.component

PLANNER, ANALYST, WRITER = "amazon.nova-lite-v1:0", "amazon.nova-micro-v1:0", "amazon.nova-pro-v1:0"
NOTES = b"The beta starts in January with fifty customers. Launch is planned for March."


@pytest.fixture
def bedrock(aws, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeBedrock]:
    with FakeBedrock() as fake:
        for name, value in {
            "MODEL_PROVIDER": "bedrock",
            "AWS_ENDPOINT_URL_BEDROCK_RUNTIME": fake.url,
            "PLANNER_MODEL_ID": PLANNER,
            "RESEARCHER_MODEL_ID": ANALYST,
            "WRITER_MODEL_ID": WRITER,
            "MODEL_RETRY_BACKOFF_SECONDS": "0",
        }.items():
            monkeypatch.setenv(name, value)
        yield fake


@pytest.fixture
def openai(aws, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    with FakeOpenAI(api_key="sk-test") as fake:
        for name, value in {
            "MODEL_PROVIDER": "openai",
            "OPENAI_BASE_URL": fake.base_url,
            "OPENAI_API_KEY": "sk-test",
            "PLANNER_MODEL_ID": "gpt-4.1-mini",
            "RESEARCHER_MODEL_ID": "gpt-4o-mini",
            "WRITER_MODEL_ID": "gpt-4o",
            "MODEL_RETRY_BACKOFF_SECONDS": "0",
        }.items():
            monkeypatch.setenv(name, value)
        yield fake


def start_run(function, context, api_key: str, fields: dict[str, str], files=()) -> dict:
    if files:
        content_type, body = multipart(fields, list(files))
        event = load_event(
            "create_run",
            api_key=api_key,
            content_type=content_type,
            body=base64.b64encode(body).decode(),
            isBase64Encoded=True,
        )
    else:
        event = load_event(
            "create_run", api_key=api_key, content_type="application/x-www-form-urlencoded", body=urlencode(fields)
        )
    response = function("api/create_run")(event, context)
    assert response["statusCode"] == 200, response["body"]
    return body_of(response)["data"]


def block_folder(block_type: str) -> str:
    return "blocks/" + block_type.removesuffix("-block").replace("-", "_") + "_block"


def drive(function, context, account_id: str, created: dict, attempts: int = 3) -> dict:
    """What the state machine does: plan, scope and run each block (retrying BlockRetryableError, going back to
    Scope Block after a ReservationShortError, recording other failures), finalize; then the run as GET /v1/run
    answers."""
    ids = {"run_id": created["run_id"], "canvas_id": created["canvas_id"], "account_id": account_id}
    blocks = function("orchestration/plan_canvas")(ids, context)["blocks"]
    for block in blocks:
        event = {**ids, "block_id": block["block_id"], "block_type": block["block_type"]}
        short = None
        for attempt in range(1, attempts + 1):
            try:
                scope = {**ids, "block_id": block["block_id"], "short": short}
                credentials = function("orchestration/block_scope")(scope, context)
                function(block_folder(block["block_type"]))(
                    {**event, "short": short, "credentials": credentials}, context
                )
                break
            except ReservationShortError as exc:  # the Catch goes back to Scope Block, which pays or skips it
                short = {"Error": type(exc).__name__, "Cause": json.dumps({"errorMessage": str(exc)})}
                continue
            except BlockRetryableError:
                if attempt < attempts:
                    continue
                raise
            except Exception as exc:  # the Catch hands the error to Release Dependents
                error = {"Error": type(exc).__name__, "Cause": json.dumps({"errorMessage": str(exc)})}
                function("orchestration/release_dependents")({**event, "dependents": [], "error": error}, context)
                break
    function("orchestration/finalize_run")(ids, context)
    return ids


def get_run(function, context, api_key: str, run_id: str) -> dict:
    event = load_event("get_run", api_key=api_key, path_parameters={"run_id": run_id})
    return body_of(function("api/get_run")(event, context))["data"]


def balance(account_id: str) -> int:
    return int(Store().get_account(account_id)["credits_balance"])


def priced(calls: list[Call], reply=default_reply) -> int:
    """The credits of these fake calls: the fake counts one token a word."""
    return usage_credits([(c.model, tokens(c.system + " " + c.prompt), tokens(reply(c))) for c in calls])


def test_bedrock_plans_writes_and_charges_exactly_what_it_used(bedrock, account, function, context):
    # Given an upload, a throttled Planner call and a Writer throttled on every attempt of its first invocation
    bedrock.fail_next(429, "ThrottlingException", when=lambda c: PLANNER_MARK in c.system)
    bedrock.fail_next(429, "ThrottlingException", times=3, when=lambda c: "Writer agent" in c.system)
    before = balance(account.account_id)
    created = start_run(
        function,
        context,
        account.api_key,
        {"prompt": "What do the notes say about the launch?", "agent_instructions": "Write for investors."},
        files=[("notes.txt", NOTES, "text/plain")],
    )
    # When
    drive(function, context, account.account_id, created)
    # Then the run completed with the Writer's answer, citing the upload
    data = get_run(function, context, account.api_key, created["run_id"])
    assert data["status"] == "completed", data["errors"]
    answer = data["result"]["final_output"]
    assert answer.startswith(f"Answer from {WRITER}: tide pools hold anemones and crabs [1].")
    assert answer.endswith("Sources\n[1] notes.txt")
    assert data["metadata"]["models_used"] == sorted([PLANNER, ANALYST, WRITER])
    # And each role's model was called, with the requester's instructions, retried where throttled
    roles = [(c.system.split(" agent")[0].removeprefix("You are the "), c.model) for c in bedrock.calls]
    assert roles == [
        ("Planner", PLANNER),
        ("Planner", PLANNER),
        ("Analyst", ANALYST),
        ("Writer", WRITER),
        ("Writer", WRITER),
        ("Writer", WRITER),
        ("Writer", WRITER),
    ]
    assert all("Write for investors." in c.system for c in bedrock.calls)
    # And the credits are the tokens the successful calls used, at the price table's rates
    run = Store().get_run(created["run_id"])
    _, nodes, _ = Store().get_canvas(created["canvas_id"])
    planner, analyst, writer = bedrock.calls[1], bedrock.calls[2], bedrock.calls[6]
    assert run.planning_credits == priced([planner]) and run.planning_models_used == [PLANNER]
    assert [(n.type, n.credits) for n in nodes] == [
        ("file-block", 0),
        ("prompt-block", priced([analyst])),
        ("text-block", priced([writer])),
    ]
    consumed = data["metadata"]["credits_consumed"]
    assert consumed == run.planning_credits + sum(n.credits for n in nodes) > 0
    assert before - balance(account.account_id) == consumed
    # And each model call is a tool-call-task under its persona
    tasks = Store().get_tasks(created["canvas_id"])
    tool_calls = sorted(t.name for t in tasks if t.task_type.value == "tool-call-task")
    assert tool_calls[0] == "Model call: amazon.nova-micro-v1:0 ({} tokens in, {} out)".format(
        tokens(analyst.system + " " + analyst.prompt), tokens(default_reply(analyst))
    )
    assert "file-block: notes.txt" in tool_calls


def test_openai_repairs_a_malformed_plan_retries_a_throttled_call_and_charges_once(openai, account, function, context):
    # Given a Planner whose first answer is prose and whose second has a cycle, an unknown block type and no
    # Writer; and a rate limit on the first analysis call
    plan_texts = [
        "Sure! I'd research first, then write it up.",
        "```json\n"
        + json.dumps(
            {
                "steps": [
                    {"id": "a", "type": "prompt-block", "title": "Causes", "inputs": ["b"]},
                    {"id": "b", "type": "prompt-block", "title": "Effects", "inputs": ["a"]},
                    {"id": "c", "type": "summary-block", "title": "Summary", "inputs": ["a", "b"]},
                ]
            }
        )
        + "\n```",
    ]
    plans = iter(plan_texts)

    def reply(call: Call) -> str:
        return next(plans) if PLANNER_MARK in call.system else default_reply(call)

    openai.replies(reply)
    openai.fail_next(429, "rate_limit_exceeded", retry_after="0", when=lambda c: "Analyst agent" in c.system)
    before = balance(account.account_id)
    created = start_run(function, context, account.api_key, {"prompt": "Why do tides happen?"})
    # When
    drive(function, context, account.account_id, created)
    # Then the repaired plan ran: both analyses (the cycle broken) feeding the Writer it lacked
    data = get_run(function, context, account.api_key, created["run_id"])
    assert data["status"] == "completed", data["errors"]
    _, nodes, edges = Store().get_canvas(created["canvas_id"])
    assert [(n.type, n.name) for n in nodes] == [
        ("prompt-block", "Causes"),
        ("prompt-block", "Effects"),
        ("text-block", "Answer"),
    ]
    assert {(e.source_id, e.target_id) for e in edges} == {
        (nodes[0].block_id, nodes[1].block_id),
        (nodes[1].block_id, nodes[2].block_id),
    }
    assert "could not be used: the answer holds no valid JSON" in openai.calls[1].prompt
    assert data["result"]["final_output"].startswith("Answer from gpt-4o:")
    assert data["metadata"]["models_used"] == ["gpt-4.1-mini", "gpt-4o", "gpt-4o-mini"]
    # And both planning attempts are charged, the throttled call is not, and the balance moved by the total
    run = Store().get_run(created["run_id"])
    assert run.planning_credits == usage_credits(
        [
            (c.model, tokens(c.system + " " + c.prompt), tokens(text))
            for c, text in zip(openai.calls[:2], plan_texts, strict=True)
        ]
    )
    assert [c.headers["authorization"] for c in openai.calls] == ["Bearer sk-test"] * len(openai.calls)
    consumed = data["metadata"]["credits_consumed"]
    assert consumed == run.planning_credits + sum(n.credits for n in nodes)
    assert before - balance(account.account_id) == consumed > 0


def test_retried_steps_do_not_charge_twice(bedrock, account, function, context):
    # Given a finished run
    created = start_run(function, context, account.api_key, {"prompt": "Explain tides"})
    ids = drive(function, context, account.account_id, created)
    after_run = balance(account.account_id)
    calls = len(bedrock.calls)
    data = get_run(function, context, account.api_key, created["run_id"])
    # When every step is delivered again (Step Functions retries at least once)
    function("orchestration/plan_canvas")(ids, context)
    _, nodes, _ = Store().get_canvas(created["canvas_id"])
    for node in nodes:
        event = {**ids, "block_id": node.block_id, "block_type": node.type}
        assert function(block_folder(node.type))(event, context)["status"] == "completed"
    function("orchestration/finalize_run")(ids, context)
    # Then nothing ran or was charged again
    assert len(bedrock.calls) == calls
    assert balance(account.account_id) == after_run
    assert get_run(function, context, account.api_key, created["run_id"])["metadata"] == data["metadata"]


def test_a_block_and_planning_are_debited_once_even_when_recorded_twice(aws, account):
    # Given a planned canvas whose first block is running
    store = Store()
    before = balance(account.account_id)
    from canvas_core.models.items import NodeItem, TaskItem

    canvas_id = "6f1c2d4e-0000-4000-8000-000000000001"
    node = NodeItem(canvas_id=canvas_id, block_id="b1", name="Analysis", type="prompt-block", status="running")
    task = TaskItem(canvas_id=canvas_id, task_id="t1", name="tool", task_type="tool-call-task")
    store.put_graph([node], [], canvas_id)
    store.put_tasks([task])
    # When two deliveries of the same block complete it, and planning is recorded twice
    first = store.complete_block(canvas_id, "b1", ["t1"], debit_account=account.account_id, credits=7, content="x")
    second = store.complete_block(canvas_id, "b1", ["t1"], debit_account=account.account_id, credits=7, content="y")
    run_id = start_run_item(store, account.account_id)
    planned = store.record_planning(run_id, account.account_id, ["m"], 3)
    planned_again = store.record_planning(run_id, account.account_id, ["m"], 3)
    # Then
    assert (first is not None, second is not None, planned, planned_again) == (True, False, True, False)
    assert before - balance(account.account_id) == 7 + 3
    assert store.get_nodes(canvas_id, ["b1"])[0].content == "x"
    # And debits of different runs add up (the balance is decremented in DynamoDB, not read and rewritten)
    other = NodeItem(canvas_id=canvas_id, block_id="b2", name="Other", type="prompt-block", status="running")
    store.put_graph([other], [], canvas_id)
    store.complete_block(canvas_id, "b2", [], debit_account=account.account_id, credits=5, content="z")
    assert before - balance(account.account_id) == 15


def test_a_missing_account_does_not_lose_the_blocks_work(aws):
    # Given a running block of a run whose account has gone
    store = Store()
    canvas_id = "6f1c2d4e-0000-4000-8000-000000000003"
    from canvas_core.models.items import NodeItem

    store.put_graph(
        [NodeItem(canvas_id=canvas_id, block_id="b1", name="A", type="prompt-block", status="running")], [], canvas_id
    )
    run_id = start_run_item(store, "gone", run_id="7a1c2d4e-0000-4000-8000-000000000004")
    # When it completes, and planning is recorded, with debits for that account
    completed = store.complete_block(canvas_id, "b1", [], debit_account="gone", credits=4, content="kept")
    planned = store.record_planning(run_id, "gone", ["m"], 2)
    # Then the work and the usage are kept, and no account appears
    assert (completed is not None, planned) == (True, True)
    assert store.get_nodes(canvas_id, ["b1"])[0].content == "kept"
    assert store.get_run(run_id).planning_credits == 2
    assert store.get_account("gone") is None


def start_run_item(store: Store, account_id: str, run_id: str = "7a1c2d4e-0000-4000-8000-000000000002") -> str:
    from canvas_core.models.items import RunItem

    run = RunItem(
        run_id=run_id,
        account_id=account_id,
        canvas_id="6f1c2d4e-0000-4000-8000-000000000001",
        prompt="p",
        template="auto",
        created_at_ms=0,
        estimated_duration_ms=0,
    )
    store.put_run(run)
    return run.run_id


def test_a_block_the_balance_cannot_pay_for_is_not_kept_and_the_balance_never_goes_negative(
    bedrock, aws, function, context, monkeypatch
):
    # Given an account with 3 credits and an analyst model dear enough to cost far more in one block
    account_id, api_key = create_account_with_key(credits=3)
    monkeypatch.setenv("RESEARCHER_MODEL_ID", "anthropic.claude-opus-4-v1:0")
    long_answer = "Tides follow the moon and the sun. " * 300
    monkeypatch.setenv("ANALYST_MAX_OUTPUT_TOKENS", "4000")  # the answer is whole, not cut at the cap
    bedrock.replies(lambda c: long_answer if "Analyst agent" in c.system else default_reply(c))
    created = start_run(function, context, api_key, {"prompt": "Explain tides"})
    # When
    drive(function, context, account_id, created)
    # Then the analysis was refused its debit: skipped, uncharged, its output not kept; the Writer never started
    data = get_run(function, context, api_key, created["run_id"])
    assert data["status"] == "failed"
    _, nodes, _ = Store().get_canvas(created["canvas_id"])
    assert [(n.type, n.status.value, n.credits, n.content) for n in nodes] == [
        ("prompt-block", "skipped", 0, None),
        ("text-block", "skipped", 0, None),
    ]
    planning = Store().get_run(created["run_id"]).planning_credits
    analysis = next(c for c in bedrock.calls if "Analyst agent" in c.system)
    assert [e["error"] for e in data["errors"]] == [
        f"{nodes[0].name}: Credits exhausted: the block was not run "
        f"(needs {priced([analysis], lambda _: long_answer)} credits, the account has {3 - planning})",
        f"{nodes[1].name}: Skipped: its input '{nodes[0].name}' did not complete",
    ]
    assert not any(c for c in bedrock.calls if "Writer agent" in c.system)
    # And the balance paid for planning only, and is not below zero
    assert data["metadata"]["credits_consumed"] == planning > 0
    assert balance(account_id) == 3 - planning >= 0


def test_a_refused_debit_skips_the_block_and_the_run_ends_partial(aws, function, context):
    # Given an account with 5 credits and a run whose report (an artifact: 10 credits) reads a free analysis
    account_id, api_key = create_account_with_key(credits=5)
    created = start_run(
        function,
        context,
        api_key,
        {"prompt": "Write a short report on tides", "blocks": json.dumps(["prompt-block", "document-block"])},
    )
    # When
    drive(function, context, account_id, created)
    # Then the report was not kept or charged, the analysis was, and the run is partial with the reason
    data = get_run(function, context, api_key, created["run_id"])
    assert data["status"] == "partial"
    _, nodes, _ = Store().get_canvas(created["canvas_id"])
    assert [(n.type, n.status.value) for n in nodes] == [("prompt-block", "completed"), ("document-block", "skipped")]
    assert nodes[1].artifacts == [] and nodes[1].credits == 0
    [error] = data["errors"]
    assert error == {
        "error": f"{nodes[1].name}: Credits exhausted: the block was not run (needs 10 credits, the account has 5)",
        "block_id": nodes[1].block_id,
        "block_type": "document-block",
        "recoverable": False,
    }
    assert data["result"]["artifacts"] == [] and data["result"]["final_output"]
    assert data["metadata"]["credits_consumed"] == 0
    assert balance(account_id) == 5
    # And its tasks ended in error: nothing of the run is left running
    assert {t.status.value for t in Store().get_tasks(created["canvas_id"]) if t.block_id == nodes[1].block_id} == {
        "error"
    }


def test_debits_of_concurrent_runs_never_overdraw_the_account(aws):
    # Given an account with 10 credits and two runs' blocks, both started while the balance held each of them
    account_id, _ = create_account_with_key(credits=10)
    store = Store()
    from canvas_core.models.items import NodeItem

    canvas_id = "6f1c2d4e-0000-4000-8000-000000000005"
    running = [
        NodeItem(canvas_id=canvas_id, block_id=b, name=b, type="prompt-block", status="running")
        for b in ("first", "second", "third")
    ]
    store.put_graph(running, [], canvas_id)
    # When they complete one after the other, as DynamoDB orders concurrent writes
    first = store.complete_block(canvas_id, "first", [], debit_account=account_id, credits=7, content="one")
    with pytest.raises(CreditsExhaustedError) as refused:
        store.complete_block(canvas_id, "second", [], debit_account=account_id, credits=7, content="two")
    third = store.complete_block(canvas_id, "third", [], debit_account=account_id, credits=3, content="three")
    # Then the debit that would overdraw wrote nothing, and the others took the balance to exactly zero
    assert first is not None and third is not None
    assert (refused.value.credits, refused.value.balance) == (7, 3)
    assert [(n.status.value, n.content) for n in store.get_nodes(canvas_id, ["first", "second", "third"])] == [
        ("completed", "one"),
        ("running", None),
        ("completed", "three"),
    ]
    assert balance(account_id) == 0
    # And planning too is refused rather than overdrawing, and can be recorded once paid for
    run_id = start_run_item(store, account_id, run_id="7a1c2d4e-0000-4000-8000-000000000006")
    with pytest.raises(CreditsExhaustedError):
        store.record_planning(run_id, account_id, ["m"], 1)
    assert store.get_run(run_id).planning_credits == 0 and balance(account_id) == 0
    assert store.record_planning(run_id, account_id, ["offline/m"], 0) is True


def test_planning_the_account_cannot_pay_for_fails_the_run_uncharged(bedrock, aws, function, context, monkeypatch):
    # Given an account with 3 credits and a Planner model dearer than that
    account_id, api_key = create_account_with_key(credits=3)
    monkeypatch.setenv("PLANNER_MODEL_ID", "anthropic.claude-opus-4-v1:0")
    created = start_run(function, context, api_key, {"prompt": "Explain tides"})
    ids = {"run_id": created["run_id"], "canvas_id": created["canvas_id"], "account_id": account_id}
    # When Plan Canvas runs, and is retried
    planned = function("orchestration/plan_canvas")(ids, context)
    retried = function("orchestration/plan_canvas")(ids, context)
    function("orchestration/finalize_run")(ids, context)
    # Then there is nothing to run, the Planner was called once, and the run failed with the reason
    assert planned["blocks"] == retried["blocks"] == []
    [planner] = bedrock.calls
    data = get_run(function, context, api_key, created["run_id"])
    assert data["status"] == "failed"
    assert data["errors"] == [
        {
            "error": f"Credits exhausted: the run was not planned (planning needs {priced([planner])} credits, "
            "the account has 3); add credits and run again",
            "recoverable": True,
        }
    ]
    assert data["metadata"]["credits_consumed"] == 0 and balance(account_id) == 3


def test_a_run_keeps_the_credits_set_aside_for_it_when_others_spend_the_account(aws, function, context):
    # Given a run admitted with 50 credits, all of them set aside for it (its estimate is more)
    account_id, api_key = create_account_with_key(credits=50)
    created = start_run(function, context, api_key, {"prompt": "Explain tides"})
    assert balance(account_id) == 0
    assert Store().get_run(created["run_id"]).reserved_credits == 50
    ids = {"run_id": created["run_id"], "canvas_id": created["canvas_id"], "account_id": account_id}
    # When it is planned and run, while another run of the account could take nothing from it
    assert function("orchestration/plan_canvas")(ids, context)["blocks"]
    drive(function, context, account_id, created)
    # Then it completed, and what it did not spend came back at its end
    data = get_run(function, context, api_key, created["run_id"])
    assert data["status"] == "completed"
    assert balance(account_id) == 50 - data["metadata"]["credits_consumed"]
    assert Store().get_run(created["run_id"]).reserved_credits == 0


def test_a_run_that_outgrows_its_reservation_tops_up_in_steps_and_settles_once(aws, function, context, monkeypatch):
    # Given a run whose reservation is far smaller than what its priced blocks spend
    from canvas_core import estimates, pricing
    from canvas_core.adapters import store as store_module

    monkeypatch.setattr(estimates, "CREDITS_PER_BLOCK", 1)
    monkeypatch.setitem(pricing.MODEL_PRICES, "offline/", (Decimal(40), Decimal(80)))
    top_ups: list[int] = []
    real_top_up = store_module.Store.top_up

    def counted(self, run_id, account_id, needed, step):
        top_ups.append(step)
        return real_top_up(self, run_id, account_id, needed, step)

    monkeypatch.setattr(store_module.Store, "top_up", counted)
    account_id, api_key = create_account_with_key(credits=5000)
    created = start_run(function, context, api_key, {"prompt": "Summarize the main arguments for a four-day week"})
    reserved_at_start = Store().get_run(created["run_id"]).reserved_credits
    # When it runs to its end
    data = drive(function, context, account_id, created)
    run = get_run(function, context, api_key, created["run_id"])
    # Then it topped its reservation up (each step at least TOP_UP_CREDITS), spent exactly its credits, and gave
    # back what it did not spend
    assert run["status"] == "completed" and data
    consumed = run["metadata"]["credits_consumed"]
    assert consumed > reserved_at_start
    assert top_ups and all(step >= store_module.TOP_UP_CREDITS for step in top_ups)
    assert balance(account_id) == 5000 - consumed
    assert Store().get_run(created["run_id"]).reserved_credits == 0


def test_a_run_that_has_ended_is_not_topped_up_from_the_account(aws, function, context):
    # Given a run that has ended and settled (its reservation back on the account)
    account_id, api_key = create_account_with_key(credits=5000)
    created = start_run(function, context, api_key, {"prompt": "Explain tides"})
    drive(function, context, account_id, created)
    assert get_run(function, context, api_key, created["run_id"])["status"] == "completed"
    before = balance(account_id)
    # When something would still spend for it
    with pytest.raises(CreditsExhaustedError):
        Store().top_up(created["run_id"], account_id, needed=50, step=100)
    # Then nothing moved off the account
    assert balance(account_id) == before
    assert Store().get_run(created["run_id"]).reserved_credits == 0


def _new_run(account_id: str, n: int):
    from canvas_core.models.items import CanvasItem, RunItem

    run_id, canvas_id = f"7a1c2d4e-0000-4000-8000-0000000001{n:02d}", f"6f1c2d4e-0000-4000-8000-0000000001{n:02d}"
    run = RunItem(
        run_id=run_id,
        account_id=account_id,
        canvas_id=canvas_id,
        prompt="p",
        template="auto",
        created_at_ms=0,
        estimated_duration_ms=0,
    )
    return run, CanvasItem(canvas_id=canvas_id, account_id=account_id, run_id=run_id, canvas_name="p")


def test_an_admission_whose_balance_was_spent_meanwhile_sets_aside_what_is_left_or_refuses(aws):
    # Given an account holding 30 credits, and admissions that read more (others spent it since)
    from canvas_core.errors import InsufficientCreditsError

    account_id, _ = create_account_with_key(credits=30)
    store = Store()
    # When a run asks to set 100 aside
    run, canvas = _new_run(account_id, 1)
    assert store.admit_run(run, canvas, max_active_runs=10, reserve=100)
    # Then it holds what was left, and the balance is spent, never below zero
    assert store.get_run(run.run_id).reserved_credits == 30
    assert balance(account_id) == 0
    # And a second run finds nothing left: refused, nothing stored
    second, second_canvas = _new_run(account_id, 2)
    with pytest.raises(InsufficientCreditsError, match="the account balance is 0"):
        store.admit_run(second, second_canvas, max_active_runs=10, reserve=20)
    assert store.get_run(second.run_id) is None
    assert int(store.get_account(account_id)["active_runs"]) == 1


def test_a_run_whose_reservation_is_spent_while_it_ends_settles_what_is_left(aws, monkeypatch):
    # Given a run with 100 credits set aside, read by its end just before a block spends 40 of them
    account_id, _ = create_account_with_key(credits=1000)
    store = Store()
    run, canvas = _new_run(account_id, 3)
    assert store.admit_run(run, canvas, max_active_runs=10, reserve=100)
    real_read = Store._consistent_run
    reads: list[int] = []

    def read_then_spend(self, run_id):
        found = real_read(self, run_id)
        if not reads:
            store._transact(store._spend(run_id, 40))  # a block completes between the read and the write
        reads.append(1)
        return found

    monkeypatch.setattr(Store, "_consistent_run", read_then_spend)
    # When the run ends, having consumed those 40
    assert store.finish_run(run.run_id, account_id, status="completed", credits_consumed=40)
    # Then it settled once, with what was left: the account paid exactly 40
    assert len(reads) == 2
    assert balance(account_id) == 1000 - 40
    assert store.get_run(run.run_id).reserved_credits == 0
    assert int(store.get_account(account_id)["active_runs"]) == 0


@pytest.mark.parametrize("written", [{"N": "1000000"}, {"S": "a lot"}, {"N": "-40"}])
def test_a_reservation_a_block_rewrote_returns_at_most_what_was_set_aside_and_the_run_still_ends(
    aws, function, context, written
):
    # Given a run that set 50 credits aside, whose reservation a taken-over block rewrote (it may write that
    # attribute of its own run, docs/isolation.md)
    account_id, api_key = create_account_with_key(credits=50)
    created = start_run(function, context, api_key, {"prompt": "Explain tides"})
    assert balance(account_id) == 0 and Store().get_run(created["run_id"]).credits_set_aside == 50
    aws.ddb.update_item(
        TableName=aws.settings.runs_table,
        Key={"run_id": {"S": created["run_id"]}},
        UpdateExpression="SET reserved_credits = :v",
        ExpressionAttributeValues={":v": written},
    )
    # When the run ends
    ids = {"run_id": created["run_id"], "canvas_id": created["canvas_id"], "account_id": account_id}
    function("orchestration/finalize_run")(ids, context)
    # Then it ended, its slot came back, and the balance holds no more than what was set aside
    assert get_run(function, context, api_key, created["run_id"])["status"] != "running"
    assert balance(account_id) <= 50
    assert int(Store().get_account(account_id).get("active_runs", 0)) == 0
