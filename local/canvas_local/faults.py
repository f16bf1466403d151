"""AWS's failures on demand (`canvas serve --inject-faults`, or `CANVAS_INJECT_FAULTS`): what a deployed stack meets
and a single-process emulator, answering one request at a time, never would.

- `transaction_conflict`: a TransactWriteItems is cancelled as DynamoDB cancels one that met another transaction on
  one of its items (`TransactionCanceledException`, that item's reason `TransactionConflict`), and a conditional
  PutItem, UpdateItem or DeleteItem as DynamoDB refuses one that met a transaction in flight
  (`TransactionConflictException`): only on a table that transactions write, since only they hold items.
- `throttle`: a DynamoDB read or write is refused with `ProvisionedThroughputExceededException`.
- `gsi_lag_ms`: a query of a global secondary index does not see an item written less than that long ago (an index
  is eventually consistent; an item changed within the lag is left out rather than shown as it was).
- `lambda_error`: a Lambda task of the state machine fails with `Lambda.ServiceException` before the function runs.

Each rate is the chance of that fault per call. Faults are injected where AWS's answer arrives: inside botocore's
retry loop for DynamoDB (so its standard retries apply, as they would to the real error), at the Lambda seam of
Step Functions' interpreter for Lambda."""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any

ENV_VAR = "CANVAS_INJECT_FAULTS"
ERROR_PREFIX = "com.amazonaws.dynamodb.v20120810#"
CONFLICT_MESSAGE = "Transaction is ongoing for the item"
THROTTLE_MESSAGE = (
    "The level of configured provisioned throughput for the table was exceeded. "
    "Consider increasing your provisioning level with the UpdateTable API."
)
CANCELLED_MESSAGE = "Transaction cancelled, please refer cancellation reasons for specific reasons [{}]"

READS = frozenset({"GetItem", "BatchGetItem", "Query", "Scan", "TransactGetItems"})
SINGLE_WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem"})
WRITES = SINGLE_WRITES | {"BatchWriteItem", "TransactWriteItems"}

Answer = tuple[int, Mapping[str, str], bytes]


class FaultSpecError(ValueError):
    """A fault spec that cannot be read; the message names the part."""


@dataclass(frozen=True)
class Faults:
    transaction_conflict: float = 0.0
    throttle: float = 0.0
    gsi_lag_ms: int = 0
    lambda_error: float = 0.0

    @classmethod
    def parse(cls, spec: str) -> Faults:
        """`name=value` pairs separated by commas, e.g. `transaction_conflict=0.2,throttle=0.05,gsi_lag_ms=500`."""
        known = {f.name: f.type for f in fields(cls)}
        values: dict[str, Any] = {}
        for part in (p.strip() for p in spec.split(",")):
            if not part:
                continue
            name, sep, text = part.partition("=")
            name = name.strip()
            if not sep or name not in known:
                raise FaultSpecError(
                    f"Unknown fault {name!r} in {spec!r}: the faults are {', '.join(known)}, as name=value pairs"
                )
            try:
                value: float = int(text) if name == "gsi_lag_ms" else float(text)
            except ValueError:
                raise FaultSpecError(f"{name}={text!r}: not a number") from None
            if name != "gsi_lag_ms" and not 0 <= value <= 1:
                raise FaultSpecError(f"{name}={text}: a rate is between 0 and 1")
            if value < 0:
                raise FaultSpecError(f"{name}={text}: must not be negative")
            values[name] = value
        return cls(**values)

    def __bool__(self) -> bool:
        return any(getattr(self, f.name) for f in fields(self))

    def __str__(self) -> str:
        return ",".join(f"{f.name}={getattr(self, f.name)}" for f in fields(self) if getattr(self, f.name))


class FaultInjector:
    """Decides, call by call, whether AWS fails it, and answers as AWS would; counts what it injected."""

    def __init__(self, faults: Faults, key_schema: Callable[[str], tuple[str, ...]], seed: int | None = None):
        self.faults = faults
        self.injected: Counter[str] = Counter()
        self._key_schema = key_schema
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        # (table, key as JSON) -> when it was last written (monotonic seconds), while within the index lag.
        self._written: dict[tuple[str, str], float] = {}
        # The tables transactions have written: a single write can meet a transaction in flight only there.
        self._transacted: set[str] = set()

    def _roll(self, rate: float) -> bool:
        if rate <= 0:
            return False
        with self._lock:
            return self._random.random() < rate

    # DynamoDB

    def dynamodb(self, operation: str, body: bytes, answer: Callable[[], Answer]) -> Answer:
        """The answer to a DynamoDB call: a fault, or `answer()` (moto's) with the index lag applied."""
        request = json.loads(body or b"{}") if operation in WRITES or operation == "Query" else {}
        fault = self._dynamodb_fault(operation, request)
        if fault is not None:
            return fault
        status, headers, content = answer()
        if self.faults.gsi_lag_ms and status < 300:
            if operation in WRITES:
                self._note_written(operation, request)
            elif operation == "Query" and request.get("IndexName"):
                content = self._hide_recent(request["TableName"], content)
        return status, headers, content

    def _dynamodb_fault(self, operation: str, request: Mapping[str, Any]) -> Answer | None:
        if (operation in READS or operation in WRITES) and self._roll(self.faults.throttle):
            self.injected["throttle"] += 1
            return refusal("ProvisionedThroughputExceededException", request)
        if operation == "TransactWriteItems":
            tables = {op.get("TableName") for entry in request.get("TransactItems", []) for op in entry.values()}
            with self._lock:
                self._transacted |= {t for t in tables if t}
        with self._lock:
            held = request.get("TableName") in self._transacted
        conditional = operation in SINGLE_WRITES and request.get("ConditionExpression") and held
        if (operation == "TransactWriteItems" or conditional) and self._roll(self.faults.transaction_conflict):
            self.injected["transaction_conflict"] += 1
            with self._lock:
                seed = self._random.random()
            return refusal("TransactionConflict", request, seed)
        return None

    def _note_written(self, operation: str, request: Mapping[str, Any]) -> None:
        now = time.monotonic()
        written = [(table, self._key_of(table, item)) for table, item in _written_items(operation, request)]
        horizon = now - self.faults.gsi_lag_ms / 1000
        with self._lock:
            for entry in written:
                self._written[entry] = now
            if len(self._written) > 10_000:
                self._written = {k: t for k, t in self._written.items() if t > horizon}

    def _hide_recent(self, table: str, content: bytes) -> bytes:
        answer = json.loads(content)
        horizon = time.monotonic() - self.faults.gsi_lag_ms / 1000
        with self._lock:
            visible = [
                item
                for item in answer.get("Items", [])
                if self._written.get((table, self._key_of(table, item)), 0.0) <= horizon
            ]
        hidden = len(answer.get("Items", [])) - len(visible)
        if not hidden:
            return content
        self.injected["gsi_lag"] += hidden
        answer["Items"] = visible
        answer["Count"] = len(visible)
        return json.dumps(answer).encode("utf-8")

    def _key_of(self, table: str, item: Mapping[str, Any]) -> str:
        return json.dumps({name: item.get(name) for name in self._key_schema(table)}, sort_keys=True)

    # Lambda

    def lambda_fault(self, function_name: str) -> bool:
        """Whether this invocation of `function_name` fails with Lambda.ServiceException (any function alike)."""
        if self._roll(self.faults.lambda_error):
            self.injected["lambda_error"] += 1
            return True
        return False


def refusal(kind: str, request: Mapping[str, Any], seed: float = 0.0) -> Answer:
    """DynamoDB's answer refusing `request` for `kind`: `ProvisionedThroughputExceededException`; or
    `TransactionConflict` (a transaction cancelled with that reason on one of its items, picked by `seed`, or a
    single write's `TransactionConflictException`); or `ThrottlingError` (a transaction cancelled as throttled)."""
    if kind == "ProvisionedThroughputExceededException":
        return _error(kind, THROTTLE_MESSAGE)
    items = request.get("TransactItems")
    if items is None:
        return _error("TransactionConflictException", CONFLICT_MESSAGE)
    reason = (
        {"Code": "TransactionConflict", "Message": CONFLICT_MESSAGE}
        if kind == "TransactionConflict"
        else {"Code": "ThrottlingError", "Message": "Throughput exceeds the current capacity of your table or index."}
    )
    refused = int(seed * len(items))
    reasons = [reason if i == refused else {"Code": "None"} for i in range(max(len(items), 1))]
    message = CANCELLED_MESSAGE.format(", ".join(r["Code"] for r in reasons))
    return _error("TransactionCanceledException", message, CancellationReasons=reasons, Message=message)


def _error(code: str, message: str, **extra: Any) -> Answer:
    body = {"__type": ERROR_PREFIX + code, "message": message, **extra}
    headers = {"Content-Type": "application/x-amz-json-1.0", "x-amzn-ErrorType": code}
    return 400, headers, json.dumps(body).encode("utf-8")


def _written_items(operation: str, request: Mapping[str, Any]) -> Iterable[tuple[str, Mapping[str, Any]]]:
    """(table, key or item) of every item a write request names."""
    if operation == "PutItem":
        yield request["TableName"], request.get("Item", {})
    elif operation in ("UpdateItem", "DeleteItem"):
        yield request["TableName"], request.get("Key", {})
    elif operation == "BatchWriteItem":
        for table, writes in request.get("RequestItems", {}).items():
            for write in writes:
                put, delete = write.get("PutRequest"), write.get("DeleteRequest")
                yield table, (put or {}).get("Item") or (delete or {}).get("Key", {})
    elif operation == "TransactWriteItems":
        for entry in request.get("TransactItems", []):
            for kind, op in entry.items():
                if kind != "ConditionCheck":
                    yield op["TableName"], op.get("Item") or op.get("Key", {})


def from_environment(environ: Mapping[str, str]) -> Faults:
    return Faults.parse(environ.get(ENV_VAR, ""))
