"""Step Functions: start the execution that runs a canvas (named after its run, so a retry cannot start two)."""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import ClientError

from canvas_core.adapters.aws import LazyClient
from canvas_core.errors import StorageError
from canvas_core.settings import state_machine_settings


class Executions:
    sfn = LazyClient("stepfunctions")

    def __init__(self, state_machine_arn: str | None = None, sfn: Any = None):
        self._state_machine_arn = state_machine_arn
        self.sfn = sfn

    @property
    def state_machine_arn(self) -> str:
        """The create-run function's (STATE_MACHINE_ARN): the other functions only resume parked tasks."""
        return self._state_machine_arn or state_machine_settings().state_machine_arn

    def start(self, run_id: str, payload: dict[str, Any]) -> str:
        try:
            response = self.sfn.start_execution(
                stateMachineArn=self.state_machine_arn, name=run_id, input=json.dumps(payload)
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ExecutionAlreadyExists":
                # Started already (a retried request): its ARN, as Step Functions names executions.
                return self.execution_arn(run_id)
            raise StorageError(f"StartExecution failed: {exc.response.get('Error', {}).get('Code')}") from exc
        return str(response["executionArn"])

    def execution_arn(self, run_id: str) -> str:
        return f"{self.state_machine_arn.replace(':stateMachine:', ':execution:')}:{run_id}"

    def stop(self, run_id: str, error: str, cause: str) -> bool:
        """Stop the run's execution. True when it was running (it ends ABORTED, and what ends an execution follows);
        False when none runs: never started, or ended already."""
        arn = self.execution_arn(run_id)
        try:
            if self.sfn.describe_execution(executionArn=arn)["status"] != "RUNNING":
                return False
            self.sfn.stop_execution(executionArn=arn, error=error, cause=cause)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code == "ExecutionDoesNotExist":
                return False
            raise StorageError(f"StopExecution failed: {code}") from exc
        return True

    def send_task_success(self, task_token: str, output: dict[str, Any]) -> bool:
        """Resume a parked task. False when the task is no longer waiting (already resumed, or timed out)."""
        try:
            self.sfn.send_task_success(taskToken=task_token, output=json.dumps(output))
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code in ("TaskTimedOut", "InvalidToken", "TaskDoesNotExist"):
                return False
            raise StorageError(f"SendTaskSuccess failed: {code}") from exc
        return True

    def send_task_failure(self, task_token: str, error: str, cause: str) -> bool:
        """Fail a parked task with `error` (what the state machine's Catch matches). False when it is no longer
        waiting."""
        try:
            self.sfn.send_task_failure(taskToken=task_token, error=error, cause=cause)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code in ("TaskTimedOut", "InvalidToken", "TaskDoesNotExist"):
                return False
            raise StorageError(f"SendTaskFailure failed: {code}") from exc
        return True
