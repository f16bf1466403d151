"""Correctness: moto's backends are plain dicts and lists that its server's threads, its interpreter's threads and
the handlers touch at once ("dictionary changed size during iteration"). Every request to DynamoDB, S3 and Step
Functions is served under that service's lock, serialisation of the answer included; SQS and EventBridge share one
(EventBridge writes to SQS's backend itself). A request made for an API call (priority.py) goes before waiting
requests made by runs. Replaces moto's `BaseResponse.call_action` and S3's three entry points (S3Response does not
go through `call_action`); the write journal (journal.py) is handed each write here, before its answer leaves."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from moto.core.responses import BaseResponse
from moto.s3.responses import S3Response

from canvas_local import priority
from canvas_local.moto_patch import journal
from canvas_local.priority import PriorityLock

LOCKED_SERVICES = ("dynamodb", "s3", "stepfunctions", "sqs")
_service_locks = {service: PriorityLock() for service in LOCKED_SERVICES}
# EventBridge writes to SQS's backend itself (a rule's queue target): both are served under one lock.
_service_locks["events"] = _service_locks["sqs"]
_ORIGINAL_CALL_ACTION = BaseResponse.call_action
_S3_ENTRY_POINTS = ("bucket_response", "key_response", "ambiguous_response")
_ORIGINAL_S3 = {name: getattr(S3Response, name) for name in _S3_ENTRY_POINTS}


def service_lock(service: str) -> PriorityLock:
    """The lock every request to `service` is served under; hold it to read or change its backend directly."""
    return _service_locks[service]


def install_backend_locks() -> None:
    """Serve each service's requests one at a time (process-wide, idempotent; mock_aws goes through it too);
    a request made for an API call (see priority.py) goes before waiting requests made by runs."""
    BaseResponse.call_action = _locked_call_action  # type: ignore[method-assign]
    for name in _S3_ENTRY_POINTS:
        setattr(S3Response, name, _locked_s3(_ORIGINAL_S3[name]))


def uninstall_backend_locks() -> None:
    BaseResponse.call_action = _ORIGINAL_CALL_ACTION  # type: ignore[method-assign]
    for name, original in _ORIGINAL_S3.items():
        setattr(S3Response, name, original)


@contextmanager
def backend_locks() -> Iterator[None]:
    """The locks installed for a block of code (a test's `mock_aws`, say), and removed after it."""
    install_backend_locks()
    try:
        yield
    finally:
        uninstall_backend_locks()


def _is_priority(headers: Any) -> bool:
    try:
        return bool(headers and headers.get(priority.HEADER))
    except AttributeError:
        return False


def _locked_call_action(self: BaseResponse) -> Any:
    lock = _service_locks.get(self.service_name or "")
    if lock is None:
        return _ORIGINAL_CALL_ACTION(self)
    with lock.held(_is_priority(getattr(self, "headers", None))):
        answer = _ORIGINAL_CALL_ACTION(self)
        if self.service_name == "dynamodb" and int(answer[0]) < 300:
            # Before the answer leaves: a write the caller sees acknowledged is in the journal.
            journal.journal_items(self)
        return answer


def _locked_s3(original: Callable[..., Any]) -> Callable[..., Any]:
    def locked(self: S3Response, request: Any, *args: Any, **kwargs: Any) -> Any:
        with _service_locks["s3"].held(_is_priority(getattr(request, "headers", None))):
            try:
                return original(self, request, *args, **kwargs)
            finally:
                journal.journal_objects(self.backend)

    locked.__wrapped__ = original  # type: ignore[attr-defined]
    return locked
