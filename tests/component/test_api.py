"""The endpoints through their Lambda handlers: status codes, bodies and exact error texts."""

from __future__ import annotations

import base64
import json
import uuid

import pytest

from canvas_core.adapters.store import Store
from canvas_core.auth import create_account_with_key, hash_api_key
from tests.support import PNG_1X1, body_of, header, load_event, multipart

pytestmark = pytest.mark.component


def create(function, context, api_key, **changes):
    return function("api/create_run")(load_event("create_run", api_key=api_key, **changes), context)


def form_body(**fields):
    from urllib.parse import urlencode

    return urlencode(fields)


def test_create_run_answers_the_contract_fields(aws, account, function, context):
    # When
    response = create(function, context, account.api_key)
    # Then
    assert response["statusCode"] == 200
    assert header(response, "Content-Type") == "application/json"
    assert header(response, "X-Request-ID") == "c6af9ac6-7b61-11e6-9a41-93e8deadbeef"
    body = body_of(response)
    assert body["success"] is True
    data = body["data"]
    assert set(data) == {"run_id", "status", "poll_url", "estimated_duration_ms", "canvas_id"}
    assert data["status"] == "running"
    assert data["poll_url"] == f"/v1/run/{data['run_id']}"
    assert uuid.UUID(data["run_id"]) and uuid.UUID(data["canvas_id"])
    assert data["estimated_duration_ms"] > 0
    # And one named execution was started for the run, and one canvas stored
    executions = aws.sfn.list_executions(stateMachineArn=aws.state_machine_arn)["executions"]
    assert [e["name"] for e in executions] == [data["run_id"]]
    canvas = Store().get_canvas_item(data["canvas_id"])
    assert canvas.run_id == data["run_id"] and canvas.account_id == account.account_id


def test_multipart_upload_keeps_bytes_intact(aws, account, function, context):
    # Given a multipart body with a binary PNG and a text file, base64-encoded as API Gateway sends it
    content_type, body = multipart(
        {"prompt": "Describe these", "template": "auto"},
        [("pixel.png", PNG_1X1, "image/png"), ("notes.txt", b"line one\r\nline two\n", "text/plain")],
    )
    # When
    response = create(
        function,
        context,
        account.api_key,
        content_type=content_type,
        body=base64.b64encode(body).decode(),
        isBase64Encoded=True,
    )
    # Then
    assert response["statusCode"] == 200, response["body"]
    run = Store().get_run(body_of(response)["data"]["run_id"])
    stored = {
        u.name: aws.s3.get_object(Bucket=aws.settings.artifacts_bucket, Key=u.s3_key)["Body"].read()
        for u in run.uploads
    }
    assert stored == {"pixel.png": PNG_1X1, "notes.txt": b"line one\r\nline two\n"}


def test_sample_multipart_event_is_accepted(aws, account, function, context):
    response = function("api/create_run")(load_event("create_run_multipart", api_key=account.api_key), context)
    assert response["statusCode"] == 200, response["body"]


@pytest.mark.parametrize(
    ("fields", "status", "error"),
    [
        (
            {"prompt": "x", "template": "essay"},
            400,
            "Invalid template: essay. Valid templates: app, auto, deep_research, excel, landing_page, memo, report, "
            "slides",
        ),
        ({"prompt": "x", "blocks": '["nope-block"]'}, 400, None),
        ({"template": "auto"}, 400, "prompt is required"),
        ({"prompt": "  "}, 400, "prompt must not be blank"),
        (
            {"prompt": "x", "instructions": "be brief", "template_name": "memo"},
            400,
            "Unknown field 'instructions', 'template_name': the form takes prompt, template, blocks, "
            "agent_instructions, webhook_url, files, review",
        ),
    ],
)
def test_rejected_create_creates_nothing(aws, account, function, context, fields, status, error):
    # When
    response = create(function, context, account.api_key, body=form_body(**fields))
    # Then
    body = body_of(response)
    assert response["statusCode"] == status
    assert body["success"] is False
    assert error is None or body["error"] == error
    assert aws.ddb.scan(TableName=aws.settings.runs_table)["Count"] == 0
    assert aws.sfn.list_executions(stateMachineArn=aws.state_machine_arn)["executions"] == []


def test_unsupported_content_type_is_415(aws, account, function, context):
    response = create(function, context, account.api_key, content_type="application/json", body='{"prompt": "x"}')
    assert response["statusCode"] == 415
    assert body_of(response)["error"].startswith("Unsupported Content-Type: application/json")


@pytest.mark.parametrize(
    ("folder", "event", "params"),
    [
        ("api/create_run", "create_run", None),
        ("api/get_run", "get_run", None),
        ("api/list_runs", "list_runs", None),
        ("api/get_canvas_dag", "get_canvas_dag", None),
        ("api/get_canvas_tasks", "get_canvas_tasks", None),
        ("api/get_canvas_task", "get_canvas_task", None),
        ("api/approve_run", "approve_run", None),
        ("api/cancel_run", "cancel_run", None),
        ("api/rerun", "rerun", None),
    ],
)
def test_every_endpoint_requires_a_valid_key(aws, account, function, context, folder, event, params):
    handler = function(folder)
    # Missing
    missing = handler(load_event(event, api_key=None), context)
    assert missing["statusCode"] == 401
    assert body_of(missing) == {"success": False, "error": "X-API-KEY header required"}
    # Unknown
    wrong = handler(load_event(event, api_key="sk_canvas_" + "x" * 43), context)
    assert wrong["statusCode"] == 401
    assert body_of(wrong) == {"success": False, "error": "Invalid or revoked API key"}
    # Revoked
    _, key = create_account_with_key()
    Store().revoke_api_key(hash_api_key(key))
    revoked = handler(load_event(event, api_key=key), context)
    assert revoked["statusCode"] == 401
    assert header(revoked, "X-Request-ID")


def test_unknown_run_is_404_with_the_contract_text(aws, account, function, context):
    run_id = str(uuid.uuid4())
    response = function("api/get_run")(
        load_event("get_run", api_key=account.api_key, path_parameters={"run_id": run_id}), context
    )
    assert response["statusCode"] == 404
    assert body_of(response) == {"success": False, "error": f"Run not found: {run_id}"}


@pytest.mark.parametrize(
    ("folder", "event", "params", "message"),
    [
        ("api/get_run", "get_run", {"run_id": "not-a-uuid"}, "Invalid run_id: 'not-a-uuid' is not a UUID"),
        ("api/get_canvas_dag", "get_canvas_dag", {"canvas_id": "123"}, "Invalid canvas_id: '123' is not a UUID"),
        ("api/get_canvas_tasks", "get_canvas_tasks", {"canvas_id": "zz"}, "Invalid canvas_id: 'zz' is not a UUID"),
        (
            "api/get_canvas_task",
            "get_canvas_task",
            {"canvas_id": "0b9e3c4d-8f21-4a6b-b1c2-5d7e9f0a1b2c", "task_id": "t-1"},
            "Invalid task_id: 't-1' is not a UUID",
        ),
        (
            "api/rerun",
            "rerun",
            {"canvas_id": "0b9e3c4d-8f21-4a6b-b1c2-5d7e9f0a1b2c", "block_id": "b-1"},
            "Invalid block_id: 'b-1' is not a UUID",
        ),
    ],
)
def test_malformed_uuid_is_400(aws, account, function, context, folder, event, params, message):
    response = function(folder)(load_event(event, api_key=account.api_key, path_parameters=params), context)
    assert response["statusCode"] == 400
    assert body_of(response) == {"success": False, "error": message}


@pytest.mark.parametrize(
    ("folder", "event", "changes"),
    [
        ("api/get_run", "get_run", {"path_parameters": {"run_id": "not-a-uuid"}}),
        ("api/create_run", "create_run", {"body": "prompt=x&template=essay"}),
        ("api/create_run", "create_run", {"content_type": "application/json", "body": '{"prompt": "x"}'}),
        (
            "api/list_runs",
            "list_runs",
            {"queryStringParameters": {"limit": "0"}, "multiValueQueryStringParameters": None},
        ),
    ],
)
def test_a_malformed_request_without_a_key_answers_401(aws, function, context, folder, event, changes):
    # Given a request that is malformed as well as unauthenticated
    request = load_event(event, api_key=None, **changes)
    # When
    response = function(folder)(request, context)
    # Then authentication answers first (docs/api.md)
    assert response["statusCode"] == 401
    assert body_of(response) == {"success": False, "error": "X-API-KEY header required"}


def test_another_accounts_run_and_canvas_answer_as_missing(aws, account, function, context):
    # Given a run of another account
    _, other_key = create_account_with_key()
    created = body_of(create(function, context, other_key))["data"]
    run_id, canvas_id = created["run_id"], created["canvas_id"]
    # When the first account asks for it
    ask = {"api_key": account.api_key}
    run = function("api/get_run")(load_event("get_run", **ask, path_parameters={"run_id": run_id}), context)
    dag = function("api/get_canvas_dag")(
        load_event("get_canvas_dag", **ask, path_parameters={"canvas_id": canvas_id}), context
    )
    tasks = function("api/get_canvas_tasks")(
        load_event("get_canvas_tasks", **ask, path_parameters={"canvas_id": canvas_id}), context
    )
    # Then it is 404, exactly as a run that does not exist
    assert (run["statusCode"], body_of(run)["error"]) == (404, f"Run not found: {run_id}")
    assert (dag["statusCode"], body_of(dag)["error"]) == (404, f"Run not found: {canvas_id}")
    assert (tasks["statusCode"], body_of(tasks)["error"]) == (404, f"Run not found: {canvas_id}")
    # While its owner sees it
    mine = function("api/get_run")(
        load_event("get_run", api_key=other_key, path_parameters={"run_id": run_id}), context
    )
    assert mine["statusCode"] == 200


def test_running_run_reports_progress(aws, account, function, context):
    created = body_of(create(function, context, account.api_key))["data"]
    response = function("api/get_run")(
        load_event("get_run", api_key=account.api_key, path_parameters={"run_id": created["run_id"]}), context
    )
    data = body_of(response)["data"]
    assert data["status"] == "running"
    assert data["canvas_id"] == created["canvas_id"]
    assert set(data["progress"]) == {"tasks_completed", "tasks_total", "elapsed_ms"}
    assert "result" not in data
    assert data["prompt"].startswith("Summarize the main arguments")
    assert data["blocks"] == ["prompt-block", "text-block"]


def test_storage_failure_is_a_500_in_the_error_shape(aws, account, function, context):
    # Given the runs table is gone
    aws.ddb.delete_table(TableName=aws.settings.runs_table)
    # When
    response = function("api/get_run")(
        load_event("get_run", api_key=account.api_key, path_parameters={"run_id": str(uuid.uuid4())}), context
    )
    # Then
    assert response["statusCode"] == 500
    assert body_of(response) == {"success": False, "error": "Internal server error"}


def test_account_without_credits_is_refused_with_402(aws, function, context):
    _, key = create_account_with_key(credits=0)
    response = create(function, context, key)
    assert response["statusCode"] == 402
    assert body_of(response)["error"].startswith("Insufficient credits")
    assert json.loads(response["body"])["success"] is False


def test_idempotency_key_returns_the_first_answer_and_starts_one_run(aws, account, function, context):
    # Given two posts with the same Idempotency-Key, and one with another key
    def post(key):
        event = load_event("create_run", api_key=account.api_key)
        event["headers"]["Idempotency-Key"] = key
        event["multiValueHeaders"]["Idempotency-Key"] = [key]
        return function("api/create_run")(event, context)

    # When
    first, again, other = post("order-42"), post("order-42"), post("order-43")
    # Then
    assert body_of(first)["data"] == body_of(again)["data"]
    assert body_of(other)["data"]["run_id"] != body_of(first)["data"]["run_id"]
    executions = aws.sfn.list_executions(stateMachineArn=aws.state_machine_arn)["executions"]
    assert len(executions) == 2


def test_the_same_idempotency_key_from_another_account_is_another_run(aws, account, function, context):
    _, other_key = create_account_with_key()
    runs = []
    for key in (account.api_key, other_key):
        event = load_event("create_run", api_key=key)
        event["headers"]["Idempotency-Key"] = "shared-key"
        runs.append(body_of(function("api/create_run")(event, context))["data"]["run_id"])
    assert runs[0] != runs[1]


def test_a_keyed_request_still_in_progress_is_409(aws, account, function, context, monkeypatch):
    from aws_lambda_powertools.utilities.idempotency.exceptions import IdempotencyAlreadyInProgressError

    from canvas_core.adapters import idempotency

    def in_progress(**_):
        raise IdempotencyAlreadyInProgressError("in progress")

    monkeypatch.setattr(idempotency, "_idempotent", lambda *_: (in_progress, runs_config()))
    event = load_event("create_run", api_key=account.api_key)
    event["headers"]["Idempotency-Key"] = "busy"
    response = function("api/create_run")(event, context)
    assert response["statusCode"] == 409
    assert body_of(response)["error"].startswith("A request with this Idempotency-Key is still being processed")


def runs_config():
    from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig

    return IdempotencyConfig()


def test_a_json_body_nested_too_deeply_is_a_400_on_a_route_powertools_reads(aws, account, function, context):
    # Given a route whose JSON body Powertools parses into its model (adding a webhook endpoint)
    event = load_event("create_webhook_endpoint", api_key=account.api_key, body="[" * 10_000)
    # When its body nests deeper than anyone writes by hand
    response = function("api/webhook_endpoints")(event, context)
    # Then it is refused as a bad request, not a crash
    assert response["statusCode"] == 400, response["body"]
    assert body_of(response) == {
        "success": False,
        "error": "Request body is nested too deeply: more than 200 levels",
    }
