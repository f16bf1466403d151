"""DynamoDB refusing chosen calls as it does under contention or load, with the answers canvas_local.faults gives
(a transaction cancelled by a conflict or as throttled, a conditional write refused while a transaction holds the
item, throughput exceeded), for the component tier: the adapters' client raises them as botocore would."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from botocore import xform_name
from botocore.exceptions import ClientError

from canvas_core.adapters.aws import client
from canvas_local.faults import refusal


@dataclass
class Refusals:
    left: int
    refused: int = 0


@contextmanager
def refused(
    operation: str, kind: str, times: int, when: Callable[[dict[str, Any]], bool] = lambda request: True
) -> Iterator[Refusals]:
    """The next `times` calls of `operation` whose request matches `when` are refused with `kind`
    (`TransactionConflict`, `ThrottlingError`, `ProvisionedThroughputExceededException`); nothing of them is
    written."""
    ddb = client("dynamodb")
    method = xform_name(operation)
    real = getattr(ddb, method)
    state = Refusals(left=times)

    def refusing(**request: Any) -> Any:
        if state.left > 0 and when(request):
            state.left -= 1
            state.refused += 1
            status, _, content = refusal(kind, request)
            body = json.loads(content)
            code = body.pop("__type").split("#")[-1]
            message = body.pop("message")
            body.pop("Message", None)
            error = {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": status}}
            raise ClientError(error | body, operation)
        return real(**request)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ddb, method, refusing)
        yield state


def mentions(*texts: str) -> Callable[[dict[str, Any]], bool]:
    """A request whose JSON holds every one of `texts` (an attribute, a condition, a table name)."""
    return lambda request: all(text in json.dumps(request, default=str) for text in texts)
