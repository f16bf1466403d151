"""Correctness: where moto's Step Functions interpreter answers otherwise than Step Functions.

- Payload limit: Step Functions holds a state's data to 256 KB. moto fails a task whose result is larger, or a state
  whose output is, with `States.DataLimitExceeded`, but lets a task whose input (after Parameters) is larger run, and
  its `States.ALL` catches the error, which on AWS is terminal: `States.ALL` does not match it, so the execution fails.
- StopExecution inside a Map or a Parallel (`install_quiet_stops`).
- An execution's end is reported (to the stack's watcher, EventBridge rules, the memory clean-up) by a hook on the
  interpreter's one "terminated" callback, so nothing has to poll: moto emits no events."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any, cast

from moto.stepfunctions.parser.api import ExecutionFailedEventDetails, HistoryEventType, TaskFailedEventDetails
from moto.stepfunctions.parser.asl.component.common.error_name.custom_error_name import CustomErrorName
from moto.stepfunctions.parser.asl.component.common.error_name.error_equals_decl import ErrorEqualsDecl
from moto.stepfunctions.parser.asl.component.common.error_name.error_name import ErrorName
from moto.stepfunctions.parser.asl.component.common.error_name.failure_event import (
    FailureEvent,
    FailureEventException,
)
from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name import StatesErrorName
from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name_type import StatesErrorNameType
from moto.stepfunctions.parser.asl.component.state.exec.state_parallel import branches_decl as sfn_branches_decl
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import (
    state_task_service as sfn_state_task_service,
)
from moto.stepfunctions.parser.asl.eval.environment import Environment as SfnEnvironment
from moto.stepfunctions.parser.asl.eval.event.event_detail import EventDetails
from moto.stepfunctions.parser.backend.execution import BaseExecutionWorkerCommunication
from moto.stepfunctions.parser.quotas import is_within_size_quota

_ORIGINAL_BEFORE_TASK = sfn_state_task_service.StateTaskService._before_eval_execution
_ORIGINAL_ERROR_EQUALS = ErrorEqualsDecl._eval_body
DATA_LIMIT_EXCEEDED = StatesErrorNameType.StatesStatesDataLimitExceeded


def install_payload_limits() -> None:
    """A task's input over 256 KB fails it, and `States.ALL` no longer catches `States.DataLimitExceeded`."""
    sfn_state_task_service.StateTaskService._before_eval_execution = _before_task  # type: ignore[method-assign]
    ErrorEqualsDecl._eval_body = _error_equals  # type: ignore[method-assign]


def uninstall_payload_limits() -> None:
    sfn_state_task_service.StateTaskService._before_eval_execution = _ORIGINAL_BEFORE_TASK  # type: ignore[method-assign]
    ErrorEqualsDecl._eval_body = _ORIGINAL_ERROR_EQUALS  # type: ignore[method-assign]


def _before_task(
    self: sfn_state_task_service.StateTaskService,
    env: SfnEnvironment,
    resource_runtime_part: Any,
    raw_parameters: dict[str, Any],
    state_credentials: Any,
) -> None:
    """The input a task sends (its Parameters evaluated) checked against the quota moto checks its result with."""
    if not is_within_size_quota(raw_parameters):
        resource_type = self._get_sfn_resource_type()
        failure = FailureEvent(
            env=env,
            error_name=StatesErrorName(typ=DATA_LIMIT_EXCEEDED),
            event_type=HistoryEventType.TaskFailed,
            # moto declares EventDetails with every key required; an event, moto's own included, has one
            event_details=cast(
                EventDetails,
                {
                    "taskFailedEventDetails": TaskFailedEventDetails(
                        error=DATA_LIMIT_EXCEEDED.to_name(),
                        cause=f"The state/task '{resource_type}' has an input with a size exceeding the maximum "
                        "number of bytes service limit.",
                        resourceType=resource_type,
                        resource=self._get_sfn_resource(),
                    )
                },
            ),
        )
        raise FailureEventException(failure_event=failure)
    _ORIGINAL_BEFORE_TASK(self, env, resource_runtime_part, raw_parameters, state_credentials)


def _error_equals(self: ErrorEqualsDecl, env: SfnEnvironment) -> None:
    """moto's match of a Retry's or Catch's ErrorEquals, except that only naming it matches the terminal error."""
    error_name = env.stack[-1]
    if error_name == StatesErrorName(typ=DATA_LIMIT_EXCEEDED) and error_name not in self.error_names:
        env.stack.pop()
        env.stack.append(False)
        return
    _ORIGINAL_ERROR_EQUALS(self, env)


_ORIGINAL_SET_STOP = SfnEnvironment.set_stop


def install_quiet_stops() -> None:
    """StopExecution of an execution inside a Map ends it with no error logged. moto's Map iteration reads a
    stopped frame's error as a failure's details (a dict, `iteration_worker`), but a frame holds the stop's error
    string, so a Map whose Catch matched the aborted iteration failed with AttributeError ("'str' object has no
    attribute 'get'"), which became `States.Runtime`; the Parallel state around it then named that error with
    `CustomErrorName`, which refuses a `States.` name ("Custom Error Names MUST NOT begin with the prefix
    'States.'"). A stopped frame now holds the stop as failure details, and a branch's `States.` error keeps its
    name, as Step Functions reports it."""
    SfnEnvironment.set_stop = _set_stop  # type: ignore[method-assign]
    sfn_branches_decl.CustomErrorName = _branch_error_name  # type: ignore[misc, assignment]


def uninstall_quiet_stops() -> None:
    SfnEnvironment.set_stop = _ORIGINAL_SET_STOP  # type: ignore[method-assign]
    sfn_branches_decl.CustomErrorName = CustomErrorName  # type: ignore[misc]


def _set_stop(self: SfnEnvironment, stop_date: Any, cause: str | None, error: Any) -> None:
    if self.is_frame() and not isinstance(error, dict):
        error = ExecutionFailedEventDetails(error=error or "", cause=cause or "")
    _ORIGINAL_SET_STOP(self, stop_date=stop_date, cause=cause, error=error)


def _branch_error_name(error_name: str | None) -> ErrorName:
    if error_name is not None and error_name.startswith("States."):
        with contextlib.suppress(ValueError):  # a name Step Functions does not define stays custom-like
            return StatesErrorName.from_name(error_name)
        return ErrorName(error_name=error_name)
    return CustomErrorName(error_name=error_name)


ExecutionListener = Callable[[str], None]
_ORIGINAL_TERMINATED = BaseExecutionWorkerCommunication.terminated
_lock = threading.Lock()
_listeners: list[ExecutionListener] = []


def on_execution_end(listener: ExecutionListener) -> None:
    """Call `listener(execution_arn)` on the interpreter's thread each time an execution ends, however it ends
    (succeeded, failed, timed out, stopped)."""
    with _lock:
        _listeners.append(listener)
        BaseExecutionWorkerCommunication.terminated = _terminated  # type: ignore[method-assign]


def remove_execution_listener(listener: ExecutionListener) -> None:
    with _lock:
        if listener in _listeners:
            _listeners.remove(listener)
        if not _listeners:
            BaseExecutionWorkerCommunication.terminated = _ORIGINAL_TERMINATED  # type: ignore[method-assign]


def _terminated(self: BaseExecutionWorkerCommunication) -> None:
    _ORIGINAL_TERMINATED(self)
    with _lock:
        listeners = list(_listeners)
    for listener in listeners:
        listener(self.execution.exec_arn)
