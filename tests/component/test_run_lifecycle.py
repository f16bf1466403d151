"""A run driven step by step through the orchestration and block handlers (what the state machine does),
then read back through the API: status, DAG and task tree."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from canvas_core.adapters.store import Store
from tests.support import body_of, load_event

pytestmark = pytest.mark.component

BLOCK_FOLDERS = {
    "prompt-block": "blocks/prompt_block",
    "text-block": "blocks/text_block",
    "file-block": "blocks/file_block",
    "image-block": "blocks/image_block",
    "document-block": "blocks/document_block",
    "web-block": "blocks/web_block",
    "web-research-block": "blocks/web_research_block",
    "deep-research-block": "blocks/deep_research_block",
    "memo-block": "blocks/memo_block",
}


def start_run(function, context, api_key, **changes) -> dict:
    response = function("api/create_run")(load_event("create_run", api_key=api_key, **changes), context)
    assert response["statusCode"] == 200, response["body"]
    return body_of(response)["data"]


def drive(function, context, account_id: str, created: dict) -> list[dict]:
    """Plan, run every block in order (recording failures as the state machine's Catch does), finalize."""
    ids = {"run_id": created["run_id"], "canvas_id": created["canvas_id"], "account_id": account_id}
    blocks = function("orchestration/plan_canvas")(ids, context)["blocks"]
    for block in blocks:
        event = {**ids, **block}
        try:
            function(BLOCK_FOLDERS[block["block_type"]])(event, context)
        except Exception as exc:  # the Catch hands the error to Release Dependents
            error = {"Error": type(exc).__name__, "Cause": json.dumps({"errorMessage": str(exc)})}
            function("orchestration/release_dependents")({**event, "dependents": [], "error": error}, context)
    function("orchestration/finalize_run")(ids, context)
    return blocks


def get(function, context, api_key, folder, event, **params):
    response = function(folder)(load_event(event, api_key=api_key, path_parameters=params), context)
    return response["statusCode"], body_of(response)


def test_prompt_then_text_run_completes_with_dag_and_task_tree(aws, account, function, context):
    # Given
    created = start_run(function, context, account.api_key)
    # When
    blocks = drive(function, context, account.account_id, created)
    # Then the run completed with an answer
    status, body = get(function, context, account.api_key, "api/get_run", "get_run", run_id=created["run_id"])
    data = body["data"]
    assert status == 200 and data["status"] == "completed"
    assert "four-day work week" in data["result"]["final_output"]
    assert "Offline answer" in data["result"]["final_output"]
    assert data["result"]["artifacts"] == []
    assert data["metadata"] == {
        "template_used": "auto",
        "models_used": ["offline/extractive-v1"],
        "credits_consumed": 0,
    }
    assert data["duration_ms"] >= 0 and "progress" not in data
    # And the DAG is prompt-block -> text-block
    status, body = get(
        function, context, account.api_key, "api/get_canvas_dag", "get_canvas_dag", canvas_id=created["canvas_id"]
    )
    dag = body["data"]
    assert dag["canvas_id"] == created["canvas_id"]
    assert dag["canvas_name"].startswith("Summarize the main arguments")
    assert [(n["type"], n["status"]) for n in dag["nodes"]] == [
        ("prompt-block", "completed"),
        ("text-block", "completed"),
    ]
    assert [n["id"] for n in dag["nodes"]] == [b["block_id"] for b in blocks]
    assert dag["edges"] == [{"source_id": dag["nodes"][0]["id"], "target_id": dag["nodes"][1]["id"]}]
    assert all(n["content"] for n in dag["nodes"])
    # And the task tree has three levels, all completed
    status, body = get(
        function, context, account.api_key, "api/get_canvas_tasks", "get_canvas_tasks", canvas_id=created["canvas_id"]
    )
    tree = body["data"]
    assert tree["not_completed"] == []
    [parent] = tree["completed"]
    assert parent["task_type"] == "parent-task" and parent["status"] == "completed"
    assert [p["task_type"] for p in parent["children"]] == ["persona-task", "persona-task"]
    assert all(
        [c["task_type"] for c in p["children"]] == ["tool-call-task"] and p["children"][0]["status"] == "completed"
        for p in parent["children"]
    )
    # And a single task is served with its children
    persona = parent["children"][0]
    status, body = get(
        function,
        context,
        account.api_key,
        "api/get_canvas_task",
        "get_canvas_task",
        canvas_id=created["canvas_id"],
        task_id=persona["task_id"],
    )
    assert status == 200 and body["data"] == persona


def test_unknown_task_is_404(aws, account, function, context):
    created = start_run(function, context, account.api_key)
    task_id = str(uuid.uuid4())
    status, body = get(
        function,
        context,
        account.api_key,
        "api/get_canvas_task",
        "get_canvas_task",
        canvas_id=created["canvas_id"],
        task_id=task_id,
    )
    assert (status, body) == (404, {"success": False, "error": f"Task not found: {task_id}"})


def test_a_block_type_without_an_implementation_fails_the_run_with_a_clear_error(
    aws, account, function, context, monkeypatch
):
    # Given a deployment whose document-block has no implementation
    monkeypatch.setattr("canvas_core.blocks.runner.implementation", lambda block_type: None)
    created = start_run(
        function, context, account.api_key, body="prompt=Write+a+report&blocks=%5B%22document-block%22%5D"
    )
    # When
    drive(function, context, account.account_id, created)
    # Then
    _, body = get(function, context, account.api_key, "api/get_run", "get_run", run_id=created["run_id"])
    data = body["data"]
    assert data["status"] == "failed"
    assert "result" not in data
    [error] = [e for e in data["errors"] if e.get("block_type") == "document-block"]
    assert "not available in this deployment yet" in error["error"]
    assert error["recoverable"] is False


def test_failed_input_skips_dependents_and_keeps_finished_work(aws, account, function, context, monkeypatch):
    # Given a run with two text files, the second of which its file-block cannot read
    import base64

    from canvas_core.blocks import registry
    from canvas_core.blocks.context import BlockOutput
    from canvas_core.errors import BlockFatalError
    from tests.support import multipart

    def file_block(ctx):
        if ctx.node.name == "b.txt":
            raise BlockFatalError("b.txt could not be read")
        return BlockOutput(content="The sky is blue on clear days, as everyone knows.")

    real = registry.implementation
    monkeypatch.setattr(
        "canvas_core.blocks.runner.implementation", lambda t: file_block if t == "file-block" else real(t)
    )
    content_type, body = multipart(
        {"prompt": "Compare the two files", "blocks": '["prompt-block","text-block"]'},
        [("a.txt", b"The sky is blue.", "text/plain"), ("b.txt", b"Unreadable.", "text/plain")],
    )
    created = start_run(
        function,
        context,
        account.api_key,
        content_type=content_type,
        body=base64.b64encode(body).decode(),
        isBase64Encoded=True,
    )
    # When
    drive(function, context, account.account_id, created)
    # Then the readable file's block ran, the other failed, and the answer blocks that needed it were skipped
    _, nodes, _ = Store().get_canvas(created["canvas_id"])
    assert [(n.type, n.status.value) for n in nodes] == [
        ("file-block", "completed"),
        ("file-block", "error"),
        ("prompt-block", "skipped"),
        ("text-block", "skipped"),
    ]
    _, body = get(function, context, account.api_key, "api/get_run", "get_run", run_id=created["run_id"])
    data = body["data"]
    assert data["status"] == "partial"
    assert "The sky is blue" in data["result"]["final_output"]
    assert {e["block_type"] for e in data["errors"]} == {"file-block", "prompt-block", "text-block"}
    assert any(e["error"].endswith("b.txt could not be read") for e in data["errors"])
    # And in the DAG every node carries `content`, a string (empty for the blocks that produced nothing)
    _, body = get(
        function, context, account.api_key, "api/get_canvas_dag", "get_canvas_dag", canvas_id=created["canvas_id"]
    )
    contents = [(node["status"], node["content"]) for node in body["data"]["nodes"]]
    assert contents[0][0] == "completed" and contents[0][1].startswith("The sky is blue")
    assert contents[1:] == [("error", ""), ("skipped", ""), ("skipped", "")]


def test_a_page_that_cannot_be_read_is_gone_without_and_does_not_skip_its_readers(aws, account, function, context):
    # Given a prompt whose link is loopback (refused) and another that does not parse at all
    body = "prompt=" + "Summarize%20http://[::1]:3941/e%20and%20http://[bad&template=report"
    created = start_run(function, context, account.api_key, body=body)
    # When
    drive(function, context, account.account_id, created)
    # Then the web-block failed with its reason, and the blocks reading it ran on the rest: a report was made
    _, nodes, _ = Store().get_canvas(created["canvas_id"])
    assert [(n.type, n.status.value) for n in nodes] == [
        ("web-block", "error"),
        ("prompt-block", "completed"),
        ("text-block", "completed"),
        ("document-block", "completed"),
    ]
    _, body = get(function, context, account.api_key, "api/get_run", "get_run", run_id=created["run_id"])
    data = body["data"]
    assert data["status"] == "partial" and [a["type"] for a in data["result"]["artifacts"]] == ["docx"]
    [error] = data["errors"]
    assert error["block_type"] == "web-block" and "Refused to fetch ::1: a loopback address" in error["error"]


@pytest.mark.parametrize("run_template", ["deep_research", "auto"])
def test_research_without_a_search_provider_ends_the_run_partial_naming_the_setting(
    aws, account, function, context, monkeypatch, run_template
):
    # Given no search provider, and a request to research the web
    monkeypatch.setenv("SEARCH_PROVIDER", "none")
    body = f"prompt=Research%20the%20latest%20studies%20on%20coastal%20erosion%20on%20the%20web&template={run_template}"
    created = start_run(function, context, account.api_key, body=body)
    # When
    drive(function, context, account.account_id, created)
    # Then the research block failed saying which setting is missing; the blocks reading it went on without it
    _, body = get(function, context, account.api_key, "api/get_run", "get_run", run_id=created["run_id"])
    data = body["data"]
    assert data["status"] == "partial", data["errors"]
    research = [e for e in data["errors"] if e["block_type"] in ("web-research-block", "deep-research-block")]
    assert research and all("set SEARCH_PROVIDER" in e["error"] for e in research)
    _, nodes, _ = Store().get_canvas(created["canvas_id"])
    assert any(n.status.value == "completed" for n in nodes)


def test_artifacts_of_one_run_have_distinct_names():
    from canvas_core.models.items import Artifact
    from canvas_core.orchestration import unique_names

    def named(name: str) -> Artifact:
        return Artifact(id=str(uuid.uuid4()), type=name.rsplit(".")[-1], name=name, s3_key=f"k/{name}", size_bytes=1)

    artifacts = [named("report.docx"), named("report.docx"), named("Report.docx"), named("report.pptx"), named("x")]
    renamed = unique_names(artifacts)
    assert [a.name for a in renamed] == ["report.docx", "report-2.docx", "Report-3.docx", "report.pptx", "x"]
    assert [a.s3_key for a in renamed] == [a.s3_key for a in artifacts]  # what is stored keeps its key


def test_execution_timeout_marks_the_run_failed_and_nothing_running(aws, account, function, context):
    # Given a planned run whose execution then times out (the EventBridge rule's event)
    created = start_run(function, context, account.api_key)
    ids = {"run_id": created["run_id"], "canvas_id": created["canvas_id"], "account_id": account.account_id}
    function("orchestration/plan_canvas")(ids, context)
    event = load_event("fail_run_eventbridge")
    event["detail"]["name"] = created["run_id"]
    event["detail"]["input"] = json.dumps(ids)
    # When
    function("orchestration/fail_run")(event, context)
    # Then
    _, body = get(function, context, account.api_key, "api/get_run", "get_run", run_id=created["run_id"])
    data = body["data"]
    assert data["status"] == "failed"
    assert data["errors"][0]["error"] == "The run exceeded its maximum duration and was stopped"
    _, nodes, _ = Store().get_canvas(created["canvas_id"])
    assert {n.status.value for n in nodes} == {"error"}
    tasks = Store().get_tasks(created["canvas_id"])
    assert "running" not in {t.status.value for t in tasks}


def test_fail_run_after_the_run_ended_changes_nothing(aws, account, function, context):
    created = start_run(function, context, account.api_key)
    drive(function, context, account.account_id, created)
    result = function("orchestration/fail_run")(
        {"run_id": created["run_id"], "error": {"Error": "X", "Cause": "late"}}, context
    )
    assert result["status"] == "completed"


def test_retried_block_does_not_run_twice(aws, account, function, context):
    created = start_run(function, context, account.api_key)
    ids = {"run_id": created["run_id"], "canvas_id": created["canvas_id"], "account_id": account.account_id}
    [first, _] = function("orchestration/plan_canvas")(ids, context)["blocks"]
    # A retried Plan Canvas step returns the same plan
    assert function("orchestration/plan_canvas")(ids, context)["blocks"][0] == first
    handler = function("blocks/prompt_block")
    assert handler({**ids, **first}, context)["status"] == "completed"
    before = Store().get_nodes(created["canvas_id"], [first["block_id"]])[0]
    assert handler({**ids, **first}, context)["status"] == "completed"
    after = Store().get_nodes(created["canvas_id"], [first["block_id"]])[0]
    assert before == after
    assert len([t for t in Store().get_tasks(created["canvas_id"]) if t.task_type.value == "tool-call-task"]) == 1


def test_a_block_publishes_its_outcome_latency_and_spend_as_embedded_metrics(
    aws, account, function, context, monkeypatch, capsys
):
    # Given a planned run, and metrics on as in a deployed function (one execution environment's, so that the
    # namespace the environment sets is the one they are published under)
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "CanvasRunService")
    created = start_run(function, context, account.api_key)
    ids = {"run_id": created["run_id"], "canvas_id": created["canvas_id"], "account_id": account.account_id}
    [first, _] = function("orchestration/plan_canvas")(ids, context)["blocks"]
    handler = function("blocks/prompt_block")
    capsys.readouterr()
    # When the block runs
    handler({**ids, **first}, context)
    # Then one embedded-metrics line carries its figures, by block type and never by run or block id
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith('{"_aws"')]
    assert len(lines) == 1
    [emf] = lines
    [directive] = emf["_aws"]["CloudWatchMetrics"]
    assert directive["Namespace"] == "CanvasRunService"
    assert directive["Dimensions"] == [["step", "service"]] and emf["step"] == "prompt-block"
    names = {m["Name"]: m["Unit"] for m in directive["Metrics"]}
    assert names == {
        "BlockDuration": "Milliseconds",
        "ModelInputTokens": "Count",
        "ModelOutputTokens": "Count",
        "BlocksCompleted": "Count",
        "CreditsDebited": "Count",
    }
    assert emf["BlocksCompleted"] == [1.0] and emf["CreditsDebited"] == [0.0]
    assert created["run_id"] not in json.dumps(emf)


def test_block_sent_to_the_wrong_function_is_refused(aws, account, function, context):
    from canvas_core.errors import BlockFatalError

    event = load_event("block_prompt")
    with pytest.raises(BlockFatalError, match="is a prompt-block, not a text-block"):
        function("blocks/text_block")(event, context)


def test_an_output_too_large_for_its_item_spills_to_s3_and_reads_back_whole(
    aws, account, function, context, monkeypatch
):
    # Given a first block whose answer is larger than a DynamoDB item may hold, and a block that reads it
    from canvas_core.blocks.context import BlockOutput

    big = "A long answer. " * 20_000  # 300,000 characters
    received = []

    def behaviour(ctx):
        if not ctx.inputs:
            return BlockOutput(content=big)
        received.append(ctx.inputs[0].content)
        return BlockOutput(content="read it")

    monkeypatch.setattr("canvas_core.blocks.runner.implementation", lambda block_type: behaviour)
    created = start_run(function, context, account.api_key)
    # When
    drive(function, context, account.account_id, created)
    # Then the node holds a preview and the key, the next block read the whole text, and so does the DAG
    _, nodes, _ = Store().get_canvas(created["canvas_id"])
    assert nodes[0].content_key and len(nodes[0].content) < len(big)
    assert received == [big]
    _, body = get(
        function, context, account.api_key, "api/get_canvas_dag", "get_canvas_dag", canvas_id=created["canvas_id"]
    )
    first = body["data"]["nodes"][0]
    assert first["content_truncated"] is True and first["content_length"] == len(big)
    assert big.startswith(first["content"])
    # (the whole of one node, a page at a time: ?node=<id>&offset=<characters read>)
    event = load_event("get_canvas_dag", api_key=account.api_key, path_parameters={"canvas_id": created["canvas_id"]})
    event["queryStringParameters"] = {"node": first["id"]}
    event["multiValueQueryStringParameters"] = {"node": [first["id"]]}
    [node] = body_of(function("api/get_canvas_dag")(event, context))["data"]["nodes"]
    assert node["content"] == big and "content_truncated" not in node


def test_a_block_works_while_its_running_mark_is_written_and_completes_after_it(
    aws, account, function, context, monkeypatch
):
    # Given a block whose running mark is written only once its work has begun (it would wait forever if the
    # runner wrote the mark before the work)
    import threading

    from canvas_core.blocks.context import BlockOutput

    working, marked = threading.Event(), threading.Event()
    real_start = Store.start_block

    def start_block(self, *args, **kwargs):
        assert working.wait(10), "the block's work did not begin before its running mark was written"
        real_start(self, *args, **kwargs)
        marked.set()

    def complete_block(self, *args, **kwargs):
        assert marked.is_set(), "the completion was written before the running mark"
        return real_complete(self, *args, **kwargs)

    real_complete = Store.complete_block
    monkeypatch.setattr(Store, "start_block", start_block)
    monkeypatch.setattr(Store, "complete_block", complete_block)

    def behaviour(ctx):
        working.set()
        return BlockOutput(content="Worked while the mark was written.")

    monkeypatch.setattr("canvas_core.blocks.runner.implementation", lambda block_type: behaviour)
    created = start_run(function, context, account.api_key)
    ids = {"run_id": created["run_id"], "canvas_id": created["canvas_id"], "account_id": account.account_id}
    first = function("orchestration/plan_canvas")(ids, context)["blocks"][0]
    # When
    assert function(BLOCK_FOLDERS[first["block_type"]])({**ids, **first}, context)["status"] == "completed"
    # Then the node completed, and its tool-call task was written and completed
    [node] = Store().get_nodes(created["canvas_id"], [first["block_id"]])
    assert node.status.value == "completed" and node.content == "Worked while the mark was written."
    tool_calls = [t for t in Store().get_tasks(created["canvas_id"]) if t.task_type.value == "tool-call-task"]
    assert [t.status.value for t in tool_calls] == ["completed"]


def test_a_running_mark_waits_for_the_work_to_get_going_and_no_longer_than_the_work(
    aws, account, function, context, monkeypatch
):
    # Given a running mark that would wait a minute for the block's work, and a block whose work looks at its
    # node while it runs, then ends at once
    from canvas_core.blocks.context import BlockOutput

    monkeypatch.setattr("canvas_core.blocks.runner.MARK_AFTER_SECONDS", 60)
    seen_while_working = []

    def behaviour(ctx):
        [node] = Store().get_nodes(ctx.node.canvas_id, [ctx.node.block_id])
        seen_while_working.append(node.status.value)
        return BlockOutput(content="Done before the mark was due.")

    monkeypatch.setattr("canvas_core.blocks.runner.implementation", lambda block_type: behaviour)
    created = start_run(function, context, account.api_key)
    ids = {"run_id": created["run_id"], "canvas_id": created["canvas_id"], "account_id": account.account_id}
    first = function("orchestration/plan_canvas")(ids, context)["blocks"][0]
    # When the block runs
    started = time.monotonic()
    assert function(BLOCK_FOLDERS[first["block_type"]])({**ids, **first}, context)["status"] == "completed"
    # Then its work ran before the mark was written, the work's end let the mark be written at once (not a minute
    # later), and the block completed with its tool-call task
    assert seen_while_working == ["idle"]
    assert time.monotonic() - started < 30
    [node] = Store().get_nodes(created["canvas_id"], [first["block_id"]])
    assert node.status.value == "completed"
    tool_calls = [t for t in Store().get_tasks(created["canvas_id"]) if t.task_type.value == "tool-call-task"]
    assert [t.status.value for t in tool_calls] == ["completed"]


def test_a_running_mark_that_cannot_be_written_fails_the_block_and_writes_no_output(
    aws, account, function, context, monkeypatch
):
    # Given a block whose running mark fails to be written
    from canvas_core.blocks.context import BlockOutput
    from canvas_core.errors import BlockFatalError

    def start_block(self, *args, **kwargs):
        raise RuntimeError("DynamoDB unavailable")

    monkeypatch.setattr(Store, "start_block", start_block)
    monkeypatch.setattr(
        "canvas_core.blocks.runner.implementation", lambda block_type: lambda ctx: BlockOutput(content="lost")
    )
    created = start_run(function, context, account.api_key)
    ids = {"run_id": created["run_id"], "canvas_id": created["canvas_id"], "account_id": account.account_id}
    first = function("orchestration/plan_canvas")(ids, context)["blocks"][0]
    # When
    with pytest.raises(BlockFatalError, match="failed unexpectedly"):
        function(BLOCK_FOLDERS[first["block_type"]])({**ids, **first}, context)
    # Then the block is recorded as failed, without the output of its work
    [node] = Store().get_nodes(created["canvas_id"], [first["block_id"]])
    assert node.status.value == "error" and node.content is None


@pytest.mark.parametrize("send_fails", [False, True])
def test_a_block_releases_its_dependent_before_writing_its_tool_calls_and_writes_them_either_way(
    aws, account, function, context, monkeypatch, send_fails
):
    # Given a prompt block whose text block is parked, and a behaviour that made two model calls
    from canvas_core.blocks.context import BlockOutput
    from canvas_core.blocks.runner import run_block
    from canvas_core.dataflow import register_wait
    from canvas_core.models.blocks import BlockInput

    order: list[str] = []

    class Executions:
        def send_task_success(self, task_token, output):
            order.append(f"send {task_token}")
            if send_fails:
                raise RuntimeError("Step Functions unavailable")
            return True

    real_put_tasks = Store.put_tasks

    def put_tasks(self, tasks):
        order.append(f"tool calls {len(tasks)}")
        return real_put_tasks(self, tasks)

    def behaviour(ctx):
        ctx.usage.calls += [("model-a", 10, 5), ("model-b", 7, 3)]
        return BlockOutput(content="Two calls made.")

    monkeypatch.setattr(Store, "put_tasks", put_tasks)
    monkeypatch.setattr("canvas_core.blocks.runner.implementation", lambda block_type: behaviour)
    created = start_run(function, context, account.api_key)
    ids = {"run_id": created["run_id"], "canvas_id": created["canvas_id"], "account_id": account.account_id}
    first, second = function("orchestration/plan_canvas")(ids, context)["blocks"]
    register_wait(created["canvas_id"], second["block_id"], "token-second", executions=Executions())
    order.clear()
    # When the first block runs
    block = BlockInput.model_validate({**ids, **first})
    if send_fails:
        with pytest.raises(RuntimeError, match="unavailable"):
            run_block(block, first["block_type"], executions=Executions())
    else:
        assert run_block(block, first["block_type"], executions=Executions()).status == "completed"
    # Then its dependent's token went first, and its two model calls were written after, even when the send failed
    assert order == ["send token-second", "tool calls 2"]
    tool_calls = [
        t.name
        for t in Store().get_tasks(created["canvas_id"])
        if t.task_type.value == "tool-call-task" and t.block_id == first["block_id"]
    ]
    assert sorted(tool_calls) == [
        "Model call: model-a (10 tokens in, 5 out)",
        "Model call: model-b (7 tokens in, 3 out)",
    ]


@pytest.mark.parametrize("read_fails", [None, "storage", "connection"])
def test_a_dependent_that_parks_while_the_block_works_is_released_by_the_completion(
    aws, account, function, context, monkeypatch, read_fails
):
    # Given a prompt block and its text block, not parked yet when the prompt block starts; the text block parks
    # while the prompt block works, and the work goes on until the dependents have been looked at again
    import threading

    from botocore.exceptions import EndpointConnectionError

    from canvas_core.blocks.context import BlockOutput
    from canvas_core.blocks.runner import run_block
    from canvas_core.dataflow import register_wait
    from canvas_core.errors import StorageError
    from canvas_core.models.blocks import BlockInput

    sent: list[str] = []
    claims_after: list[str] = []
    looked_again = threading.Event()

    class Executions:
        def send_task_success(self, task_token, output):
            sent.append(task_token)
            return True

    real_get_node_items, real_claim = Store.get_node_items, Store.claim_ready_release

    def get_node_items(self, canvas_id, block_ids):
        looked_again.set()
        if read_fails == "storage":
            raise StorageError("DynamoDB ProvisionedThroughputExceededException: slow down")
        if read_fails == "connection":
            raise EndpointConnectionError(endpoint_url="https://dynamodb.us-east-1.amazonaws.com")
        return real_get_node_items(self, canvas_id, block_ids)

    def claim_ready_release(self, canvas_id, block_id, now):
        claims_after.append(block_id)
        return real_claim(self, canvas_id, block_id, now)

    created = start_run(function, context, account.api_key)
    ids = {"run_id": created["run_id"], "canvas_id": created["canvas_id"], "account_id": account.account_id}
    first, second = function("orchestration/plan_canvas")(ids, context)["blocks"]

    def behaviour(ctx):
        register_wait(created["canvas_id"], second["block_id"], "token-second", executions=Executions())
        assert looked_again.wait(10)
        return BlockOutput(content="Worked while the text block parked.")

    monkeypatch.setattr("canvas_core.blocks.runner.MARK_AFTER_SECONDS", 0.01)
    monkeypatch.setattr("canvas_core.blocks.runner.implementation", lambda block_type: behaviour)
    monkeypatch.setattr(Store, "get_node_items", get_node_items)
    monkeypatch.setattr(Store, "claim_ready_release", claim_ready_release)
    # When the prompt block runs
    block = BlockInput.model_validate({**ids, **first})
    assert run_block(block, first["block_type"], executions=Executions()).status == "completed"
    # Then the text block's token went once: claimed by the completion when the second look found it parked, by the
    # release after the completion when that look failed, whatever failed it
    assert sent == ["token-second"]
    assert claims_after == ([second["block_id"]] if read_fails else [])
    [node] = Store().get_nodes(created["canvas_id"], [first["block_id"]])
    assert node.status.value == "completed"


@pytest.mark.parametrize("attempt", [0, 1])
def test_a_first_attempt_starts_on_what_its_release_carried_and_a_retried_one_reads_the_store(
    aws, account, function, context, monkeypatch, attempt
):
    # Given a prompt block and its text block, released with a carry that differs from the store (the prompt
    # block's output as "carried", its account as still holding credits)
    from canvas_core.blocks.context import BlockOutput
    from canvas_core.blocks.runner import run_block
    from canvas_core.models.blocks import BlockInput, Release

    created = start_run(function, context, account.api_key)
    ids = {"run_id": created["run_id"], "canvas_id": created["canvas_id"], "account_id": account.account_id}
    first, second = function("orchestration/plan_canvas")(ids, context)["blocks"]
    assert function(BLOCK_FOLDERS[first["block_type"]])({**ids, **first}, context)["status"] == "completed"
    [prompt, text] = Store().get_nodes(created["canvas_id"], [first["block_id"], second["block_id"]])
    carried = Release(
        block_id=text.block_id,
        node=text,
        inputs=[prompt.model_copy(update={"content": "carried"})],
        account={"account_id": account.account_id, "credits_balance": 1},
    )
    seen: list[str] = []

    def behaviour(ctx):
        seen.extend(i.content or "" for i in ctx.inputs)
        return BlockOutput(content="Answered.")

    monkeypatch.setattr("canvas_core.blocks.runner.implementation", lambda block_type: behaviour)
    block = BlockInput.model_validate({**ids, **second, "release": carried.model_dump(mode="json"), "attempt": attempt})
    # When the text block runs
    assert run_block(block, second["block_type"]).status == "completed"
    # Then its first attempt worked on what the release carried, a retried one on what the store holds
    assert seen == (["carried"] if attempt == 0 else [prompt.content])


def test_a_client_that_sees_the_run_ended_reads_its_task_tree_ended(aws, account, function, context, monkeypatch):
    # Given a run whose end is watched as it is written: what the task tree says at that moment
    created = start_run(function, context, account.api_key)
    seen: list[list[str]] = []
    finish_run = Store.finish_run

    def watched(self, *args, **kwargs):
        tasks = self.get_tasks(created["canvas_id"])
        seen.append([t.status.value for t in tasks if t.task_type.value == "parent-task"])
        return finish_run(self, *args, **kwargs)

    monkeypatch.setattr(Store, "finish_run", watched)
    # When the run is driven to its end
    drive(function, context, account.account_id, created)
    # Then its parent task had ended before the run showed ended
    assert seen == [["completed"]]


def test_a_run_another_path_ended_first_leaves_its_task_tree_as_that_end_says(
    aws, account, function, context, monkeypatch
):
    # Given a run whose blocks all complete, but which Fail Run ends as failed just before Finalize Run's write
    created = start_run(function, context, account.api_key)
    finish_run = Store.finish_run

    def failed_first(self, run_id, account_id=None, **fields):
        if fields.get("status") == "completed":
            failed = {**fields, "status": "failed", "errors": [{"error": "The execution timed out"}]}
            assert finish_run(self, run_id, account_id, **failed)
        return finish_run(self, run_id, account_id, **fields)

    monkeypatch.setattr(Store, "finish_run", failed_first)
    # When the run is driven to its end
    drive(function, context, account.account_id, created)
    # Then the run stays as Fail Run ended it, and its parent task says so, not what Finalize Run found
    assert Store().get_run(created["run_id"]).status.value == "failed"
    tasks = Store().get_tasks(created["canvas_id"])
    assert [t.status.value for t in tasks if t.task_type.value == "parent-task"] == ["error"]
