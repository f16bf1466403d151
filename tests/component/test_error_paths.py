"""Error paths of runs and executions that the happy-path tests do not reach."""

from __future__ import annotations

import io

import pytest
from botocore.exceptions import ClientError

from canvas_core import settings
from canvas_core.adapters.executions import Executions
from canvas_core.adapters.store import Store
from canvas_core.errors import StorageError
from canvas_local.cli import main
from tests.support import body_of, load_event

pytestmark = pytest.mark.component


def test_a_run_whose_execution_cannot_start_is_failed_not_left_running(aws, account, function, context, monkeypatch):
    # Given a state machine that does not exist
    monkeypatch.setenv("STATE_MACHINE_ARN", aws.state_machine_arn + "Missing")
    settings.reset()
    # When
    response = function("api/create_run")(load_event("create_run", api_key=account.api_key), context)
    # Then the client gets a 500 in the error shape, and the run stored for it has ended
    assert response["statusCode"] == 500
    assert body_of(response) == {"success": False, "error": "Internal server error"}
    [item] = aws.ddb.scan(TableName=aws.settings.runs_table)["Items"]
    run = Store().get_run(item["run_id"]["S"])
    assert run.status.value == "failed"
    assert run.errors[0].error == "The run could not be started; please try again"
    assert run.errors[0].recoverable is True


def test_starting_an_execution_whose_name_is_taken_returns_the_existing_one(aws):
    executions = Executions()
    first = executions.start("run-1", {"run_id": "run-1"})
    again = executions.start("run-1", {"run_id": "run-1", "retry": True})
    assert again == first


class RaisingSfn:
    def __init__(self, code: str):
        self.code = code

    def send_task_success(self, **_):
        raise ClientError({"Error": {"Code": self.code, "Message": "no"}}, "SendTaskSuccess")


@pytest.mark.parametrize("code", ["TaskTimedOut", "InvalidToken", "TaskDoesNotExist"])
def test_a_token_no_longer_waiting_is_not_an_error(aws, code):
    assert Executions(sfn=RaisingSfn(code)).send_task_success("token", {}) is False


def test_other_send_failures_are_storage_errors(aws):
    with pytest.raises(StorageError, match="SendTaskSuccess failed: AccessDeniedException"):
        Executions(sfn=RaisingSfn("AccessDeniedException")).send_task_success("token", {})


def test_an_empty_plan_fails_the_run_with_its_reason(aws, account, function, context, monkeypatch):
    from canvas_core.planner import Plan

    monkeypatch.setattr("canvas_core.orchestration.plan_canvas", lambda run: Plan())
    created = body_of(function("api/create_run")(load_event("create_run", api_key=account.api_key), context))["data"]
    ids = {"run_id": created["run_id"], "canvas_id": created["canvas_id"], "account_id": account.account_id}
    # (the run's id stands in for the API request's id as the correlation id when none was given)
    assert function("orchestration/plan_canvas")(ids, context) == {
        "blocks": [],
        "ready": [],
        "waiting": [],
        "correlation_id": created["run_id"],
    }
    assert function("orchestration/finalize_run")(ids, context)["status"] == "failed"
    run = Store().get_run(created["run_id"])
    assert [e.error for e in run.errors] == ["The plan for this run had no blocks"]


def test_revoke_key_without_a_key_says_how_to_give_one(aws, capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("\n"))
    assert main(["revoke-key"]) == 2
    assert "give the key on standard input" in capsys.readouterr().err
