"""DynamoDB storage for accounts, API keys, runs, canvases (nodes and edges) and tasks.

A canvas is one partition of the canvases table (`CANVAS`, `NODE#<id>`, `EDGE#<source>#<target>` items);
a task tree is one partition of the tasks table. Every method raises domain errors, never ClientError.

An account item holds `credits_balance`, which a debit never takes below zero, and `active_runs`, the count of
its runs still `running`: a run is counted in the write that stores it and uncounted in the write that ends it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from canvas_core.adapters.aws import LazyClient
from canvas_core.adapters.dynamodb import (
    ConditionFailed,
    Retrying,
    cancellation_codes,
    cancellation_reasons,
    dynamodb_errors,
    expression_values,
    from_item,
    model_item,
    serialize,
    to_item,
)
from canvas_core.adapters.usage import credits_used_counter, runs_counter
from canvas_core.clock import now_ms
from canvas_core.errors import (
    CreditsExhaustedError,
    InsufficientCreditsError,
    StorageBusyError,
    TooManyRunStartsError,
)
from canvas_core.models.items import CanvasItem, EdgeItem, NodeItem, RerunOf, RunItem, RunSummaryItem, TaskItem
from canvas_core.settings import ServiceSettings, service_settings

CANVAS_ITEM = "CANVAS"
# The runs table's index of an account's runs by creation time (template.yaml, RunsTable).
RUNS_BY_ACCOUNT_INDEX = "account_id-created_at_ms-index"
NODE_PREFIX = "NODE#"
# How often a write that found the balance or a reservation changed by others looks again before giving up.
ADMISSION_ATTEMPTS = 8
# The window an account's run starts are counted in (`max_starts_per_minute`).
START_WINDOW_MS = 60_000
SETTLEMENT_ATTEMPTS = 16
TOP_UP_ATTEMPTS = 8
# The least a run's reservation is topped up by, in credits: a run writes its account once per step at most.
TOP_UP_CREDITS = 100
EDGE_PREFIX = "EDGE#"
# An approval claimed this long ago and not settled was abandoned (the functions' timeout is 29 s, as API Gateway's).
APPROVAL_ABANDONED_MS = 60_000


@dataclass(frozen=True)
class Completion:
    """A block's completion as written: the dependents whose release it claimed, with their task tokens."""

    released: dict[str, str] = field(default_factory=dict)


def expires_at(settings: ServiceSettings | None = None) -> int:
    """When an item written now expires (its table's TTL): DATA_RETENTION_DAYS from now, in epoch seconds."""
    return now_ms() // 1000 + (settings or service_settings()).data_retention_days * 86_400


class Store:
    ddb = LazyClient("dynamodb", wrap=Retrying)

    def __init__(self, settings: ServiceSettings | None = None, dynamodb: Any = None):
        self.settings = settings or service_settings()
        self.ddb = dynamodb

    def _item(self, model: BaseModel, **extra: Any) -> dict[str, Any]:
        """A run, canvas, node, edge or task as stored, with the `expires_at` its table's TTL reads."""
        return model_item(model, expires_at=expires_at(self.settings), **extra)

    # Accounts and keys

    def put_account(self, account_id: str, credits: int, created_at_ms: int) -> None:
        item = {"account_id": account_id, "credits_balance": credits, "created_at_ms": created_at_ms}
        with dynamodb_errors():
            self.ddb.put_item(
                TableName=self.settings.accounts_table,
                Item=to_item(item),
                ConditionExpression="attribute_not_exists(account_id)",
            )

    def get_account(self, account_id: str) -> dict[str, Any] | None:
        with dynamodb_errors():
            found = self.ddb.get_item(TableName=self.settings.accounts_table, Key={"account_id": {"S": account_id}})
        return from_item(found["Item"]) if "Item" in found else None

    def put_api_key(
        self, key_hash: str, account_id: str, key_hint: str, created_at_ms: int, last_four: str | None = None
    ) -> None:
        item = {
            "key_hash": key_hash,
            "account_id": account_id,
            "key_hint": key_hint,
            "status": "active",
            "created_at_ms": created_at_ms,
        }
        if last_four is not None:
            item["last_four"] = last_four
        with dynamodb_errors():
            self.ddb.put_item(
                TableName=self.settings.api_keys_table,
                Item=to_item(item),
                ConditionExpression="attribute_not_exists(key_hash)",
            )

    def get_api_key(self, key_hash: str) -> dict[str, Any] | None:
        with dynamodb_errors():
            found = self.ddb.get_item(TableName=self.settings.api_keys_table, Key={"key_hash": {"S": key_hash}})
        return from_item(found["Item"]) if "Item" in found else None

    def revoke_api_key(self, key_hash: str) -> None:
        with dynamodb_errors():
            self.ddb.update_item(
                TableName=self.settings.api_keys_table,
                Key={"key_hash": {"S": key_hash}},
                UpdateExpression="SET #s = :revoked",
                ConditionExpression="attribute_exists(key_hash)",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues=expression_values(revoked="revoked"),
            )

    # Runs

    def admit_run(
        self,
        run: RunItem,
        canvas: CanvasItem,
        max_active_runs: int,
        reserve: int = 0,
        max_starts_per_minute: int | None = None,
        account: Mapping[str, Any] | None = None,
    ) -> bool:
        """Store a new run and its canvas, count the run among its account's running runs and set `reserve` credits
        aside for it (at most the balance), in one write. False, with nothing stored, when the account already has
        `max_active_runs` running (DynamoDB checks the count as it is, so creates racing each other cannot pass the
        limit together). InsufficientCreditsError, with nothing stored, when the balance is spent.

        With `max_starts_per_minute`, the same write counts the run among the account's starts of this minute
        (`start_window`, the minute since the epoch, and `starts_in_window`); TooManyRunStartsError, with nothing
        stored, when the minute already has that many. `account`, the item as last read, picks the first attempt's
        form of that count (a new minute or the same one); a wrong guess costs one attempt."""
        window = now_ms() // START_WINDOW_MS
        known_window = int(account.get("start_window", -1)) if account else -1
        for _ in range(ADMISSION_ATTEMPTS):
            admitted = run.model_copy(update={"reserved_credits": reserve})
            update = (
                "SET active_runs = if_not_exists(active_runs, :zero) + :one,"
                " credits_balance = credits_balance - :reserve"
            )
            condition = (
                "attribute_exists(account_id) AND credits_balance >= :reserve"
                " AND (attribute_not_exists(active_runs) OR active_runs < :limit)"
            )
            values: dict[str, Any] = {"zero": 0, "one": 1, "limit": max_active_runs, "reserve": reserve}
            if max_starts_per_minute is not None:
                values.update(window=window, starts=max_starts_per_minute)
                if known_window == window:
                    update += ", starts_in_window = starts_in_window + :one"
                    condition += " AND start_window = :window AND starts_in_window < :starts"
                else:
                    update += ", start_window = :window, starts_in_window = :one"
                    condition += " AND (attribute_not_exists(start_window) OR start_window < :window)"
            admit = {
                "Update": {
                    "TableName": self.settings.accounts_table,
                    "Key": {"account_id": {"S": run.account_id}},
                    # The month's run counter moves in the same write (GET /v1/account).
                    "UpdateExpression": f"{update} ADD {runs_counter()} :one",
                    "ConditionExpression": condition,
                    "ExpressionAttributeValues": expression_values(**values),
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            }
            try:
                self._transact(
                    [
                        {
                            "Put": {
                                "TableName": self.settings.canvases_table,
                                "Item": self._item(canvas, item_id=CANVAS_ITEM),
                                "ConditionExpression": "attribute_not_exists(canvas_id)",
                            }
                        },
                        {
                            "Put": {
                                "TableName": self.settings.runs_table,
                                "Item": self._item(admitted),
                                "ConditionExpression": "attribute_not_exists(run_id)",
                            }
                        },
                        admit,
                    ]
                )
            except ConditionFailed as exc:
                if "ConditionalCheckFailed" in cancellation_codes(exc)[:-1]:
                    raise
                found = _refused_item(exc)
                if found is None or int(found.get("active_runs", 0)) >= max_active_runs:
                    return False
                known_window = int(found.get("start_window", -1))
                if (
                    max_starts_per_minute is not None
                    and known_window == window
                    and int(found.get("starts_in_window", 0)) >= max_starts_per_minute
                ):
                    raise TooManyRunStartsError(max_starts_per_minute, retry_after_ms(window)) from exc
                # Other runs took credits since the balance was read: reserve what is left.
                balance = int(found.get("credits_balance", 0))
                if balance <= 0:
                    doing = "re-run a block" if admitted.rerun_of else "start a run"
                    raise InsufficientCreditsError(
                        f"Insufficient credits: the account balance is {balance}; add credits to {doing}"
                    ) from exc
                reserve = min(reserve, balance)
                continue
            return True
        raise StorageBusyError("The account's balance kept changing while the run was admitted")

    def put_run(self, run: RunItem) -> None:
        with dynamodb_errors():
            self.ddb.put_item(
                TableName=self.settings.runs_table,
                Item=self._item(run),
                ConditionExpression="attribute_not_exists(run_id)",
            )

    def get_run(self, run_id: str, consistent: bool = False) -> RunItem | None:
        with dynamodb_errors():
            found = self.ddb.get_item(
                TableName=self.settings.runs_table, Key={"run_id": {"S": run_id}}, ConsistentRead=consistent
            )
        return RunItem.model_validate(from_item(found["Item"])) if "Item" in found else None

    # Review: a run that waits after planning holds its parked task's token until approved, cancelled or timed out.

    def park_for_review(self, run_id: str, task_token: str, plan: dict[str, Any], estimated_credits: int) -> bool:
        """Store the token of the run's Await Approval task, the plan it resumes with and what its blocks are expected
        to spend; only while the run is `running` and not approved (False otherwise: it ended meanwhile)."""
        return self._update_running_run(
            run_id,
            "SET review_token = :token, review_plan = :plan, estimated_credits = :estimate",
            "attribute_not_exists(approved_at_ms)",
            token=task_token,
            plan=json.dumps(plan, separators=(",", ":")),
            estimate=estimated_credits,
        )

    def claim_approval(self, run_id: str, task_token: str, approved_at_ms: int, approver: str) -> bool:
        """True for exactly one caller, while the run is `running`, parked with `task_token` and no cancel has marked
        it: the one that may send the token. The token is taken off the run in the same write, so the run no longer
        shows as awaiting approval. Like `claim_release`, the claim names its caller (`approver`), so a resent write
        whose first answer was lost finds it its own. Until `settle_approval`, no cancel can mark the run."""
        return self._update_running_run(
            run_id,
            "SET approved_at_ms = :now, approved_by = :me REMOVE review_token",
            "attribute_not_exists(cancelled_at_ms) AND (review_token = :token OR approved_by = :me)",
            now=approved_at_ms,
            token=task_token,
            me=approver,
        )

    def settle_approval(self, run_id: str, approver: str, settled_at_ms: int) -> None:
        """Record that the approval `approver` claimed has handed the run on (`approval_settled_at_ms`): a cancel
        that reached the service after this ends the executing run; one that came before has lost to it."""
        self._update_running_run(
            run_id, "SET approval_settled_at_ms = :now", "approved_by = :me", now=settled_at_ms, me=approver
        )

    def claim_cancel(self, run_id: str, cancelled_at_ms: int, requested_at_ms: int | None = None) -> bool:
        """True for exactly one caller, while the run is `running` and no approval raced it: the cancel that ends it.
        Marked before its blocks are ended, so that the run's own end, which ending them may bring about, ends it
        cancelled too. Names its caller, as `claim_approval` does. A cancel and an approval exclude each other on
        this item: the approval's claim requires no cancel mark, and this mark requires no approval, or one settled
        before the cancel's request came (`requested_at_ms`, by default now), so two requests that overlapped end
        one way. An approval claimed long ago and never settled (its caller stopped halfway) no longer holds it."""
        return self._update_running_run(
            run_id,
            "SET cancelled_at_ms = :now, cancelled_by = :me",
            "(attribute_not_exists(cancelled_at_ms) OR cancelled_by = :me) AND (attribute_not_exists(approved_at_ms) "
            "OR approval_settled_at_ms < :requested OR approved_at_ms < :abandoned)",
            now=cancelled_at_ms,
            me=str(uuid.uuid4()),
            requested=cancelled_at_ms if requested_at_ms is None else requested_at_ms,
            abandoned=cancelled_at_ms - APPROVAL_ABANDONED_MS,
        )

    def unclaim_approval(self, run_id: str, task_token: str) -> None:
        """Give an approval back whose token could not be sent, so that the approval can be tried again (unless the
        run ended meanwhile: there is nothing left to approve)."""
        self._update_running_run(
            run_id,
            "SET review_token = :token REMOVE approved_at_ms, approved_by, approval_settled_at_ms",
            "attribute_not_exists(review_token)",
            token=task_token,
        )

    def _update_running_run(self, run_id: str, update: str, condition: str, **values: Any) -> bool:
        """Apply `update` to the run only while it is `running` and `condition` holds (False otherwise)."""
        try:
            with dynamodb_errors():
                self.ddb.update_item(
                    TableName=self.settings.runs_table,
                    Key={"run_id": {"S": run_id}},
                    UpdateExpression=update,
                    ConditionExpression=f"#s = :running AND {condition}",
                    ExpressionAttributeNames={"#s": "status"},
                    ExpressionAttributeValues=expression_values(running="running", **values),
                )
        except ConditionFailed:
            return False
        return True

    def list_runs(
        self, account_id: str, limit: int, after: tuple[int, str] | None = None
    ) -> tuple[list[RunSummaryItem], bool]:
        """Up to `limit` of the account's runs, newest first, starting after the run `after` (its
        `(created_at_ms, run_id)`); and whether more follow. One query in the usual case: it asks for one run
        more than the page, so the last page is known as such (a 1 MB response page may take another)."""
        kwargs: dict[str, Any] = {
            "TableName": self.settings.runs_table,
            "IndexName": RUNS_BY_ACCOUNT_INDEX,
            "KeyConditionExpression": "account_id = :a",
            "ExpressionAttributeValues": {":a": {"S": account_id}},
            "ScanIndexForward": False,
        }
        if after is not None:
            created_at_ms, run_id = after
            kwargs["ExclusiveStartKey"] = {
                "account_id": {"S": account_id},
                "created_at_ms": {"N": str(created_at_ms)},
                "run_id": {"S": run_id},
            }
        found: list[RunSummaryItem] = []
        while len(found) <= limit:
            kwargs["Limit"] = limit + 1 - len(found)
            with dynamodb_errors():
                page = self.ddb.query(**kwargs)
            found += [RunSummaryItem.model_validate(from_item(item)) for item in page["Items"]]
            if "LastEvaluatedKey" not in page:
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        runs = found[:limit]
        sources = self._rerun_sources([run.run_id for run in runs])
        return [run.model_copy(update={"rerun_of": sources.get(run.run_id)}) for run in runs], len(found) > limit

    def _rerun_sources(self, run_ids: list[str]) -> dict[str, RerunOf]:
        """The `rerun_of` of each re-run among `run_ids`, which the account index does not project: one
        BatchGetItem of their items' run_id and rerun_of (a page holds 100 runs at most)."""
        found: dict[str, RerunOf] = {}
        for start in range(0, len(run_ids), 100):
            request: dict[str, Any] | None = {
                self.settings.runs_table: {
                    "Keys": [{"run_id": {"S": run_id}} for run_id in run_ids[start : start + 100]],
                    "ProjectionExpression": "run_id, rerun_of",
                }
            }
            while request:
                with dynamodb_errors():
                    response = self.ddb.batch_get_item(RequestItems=request)
                for item in response["Responses"].get(self.settings.runs_table, []):
                    data = from_item(item)
                    if data.get("rerun_of"):
                        found[data["run_id"]] = RerunOf.model_validate(data["rerun_of"])
                request = response.get("UnprocessedKeys") or None
        return found

    def finish_run(self, run_id: str, account_id: str | None = None, hold_slot: bool = False, **fields: Any) -> bool:
        """Write a run's terminal fields once: only a run still `running` changes. False if it had ended.
        With `account_id` (every path that ends a run passes it), the same write settles the run with that account:
        its slot among the account's running runs is given back, the credits it set aside and did not spend return
        to the balance, and what it spent (`credits_consumed`) is added to the month's use, exactly once. With
        `hold_slot` (a cancel, while the run's execution may still be running), the slot is kept and the run marked
        `slot_held`, until `release_held_slot` as the execution ends."""
        if hold_slot:
            fields = {**fields, "slot_held": True}
        for _ in range(SETTLEMENT_ATTEMPTS):
            run = self._consistent_run(run_id) if account_id else None
            if account_id and run is None:
                return False
            reserved = run.get("reserved_credits") if run else None
            names = {f"#{k}": k for k in fields} | {"#cur": "status"}
            values = expression_values(**jsonable_fields(fields), running="running")
            sets = ", ".join(f"#{k} = :{k}" for k in fields)
            condition = "attribute_exists(run_id) AND #cur = :running"
            if reserved is not None:
                sets += ", reserved_credits = :none_left"
                condition += " AND reserved_credits = :reserved"
                values |= expression_values(none_left=0, reserved=int(reserved))
            run_update = {
                "Update": {
                    "TableName": self.settings.runs_table,
                    "Key": {"run_id": {"S": run_id}},
                    "UpdateExpression": f"SET {sets}",
                    "ConditionExpression": condition,
                    "ExpressionAttributeNames": names,
                    "ExpressionAttributeValues": values,
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            }
            spent = int(fields.get("credits_consumed") or 0)
            settle = self._settle(account_id, reserved, spent, release_slot=not hold_slot) if account_id else []
            settled_by = account_id or ""
            try:
                self._transact([run_update, *settle])
            except ConditionFailed as exc:
                codes = cancellation_codes(exc)
                if not settle or (codes and codes[0] == "ConditionalCheckFailed"):
                    stored = _refused_item(exc, 0)
                    if stored is not None and stored.get("status") == "running":
                        continue  # a block spent from the reservation meanwhile: settle what is left now
                    return False
                # The account counts no running run (it was stored before runs were counted) or has gone: settle
                # without the slot, or end the run alone; the count never goes below zero.
                try:
                    self._transact([run_update, *self._settle(settled_by, reserved, spent, release_slot=False)])
                except ConditionFailed:
                    try:
                        self._transact([run_update])
                    except ConditionFailed:
                        return False
            return True
        raise StorageBusyError("The run's reservation kept changing while it was settled")

    def release_held_slot(self, run_id: str, account_id: str) -> bool:
        """Give back the slot of an ended run that held it (`finish_run(hold_slot=True)`) until its execution ended:
        once, whoever calls (False when it holds none); the count never goes below zero."""
        run_update = {
            "Update": {
                "TableName": self.settings.runs_table,
                "Key": {"run_id": {"S": run_id}},
                "UpdateExpression": "REMOVE slot_held",
                "ConditionExpression": "slot_held = :held",
                "ExpressionAttributeValues": expression_values(held=True),
            }
        }
        try:
            self._transact([run_update, *self._settle(account_id, None, 0, release_slot=True)])
        except ConditionFailed as exc:
            if cancellation_codes(exc)[:1] == ["ConditionalCheckFailed"]:
                return False
            try:
                self._transact([run_update])  # the account counts no running run: nothing to give back
            except ConditionFailed:
                return False
        return True

    def _settle(self, account_id: str, reserved: Any, spent: int, release_slot: bool) -> list[dict[str, Any]]:
        """The account's side of a run's end: its slot given back (never below zero), and for a run that held a
        reservation, the unspent credits returned and what it spent added to the month's use."""
        sets, adds = [], []
        values: dict[str, Any] = {}
        condition = "attribute_exists(account_id)"
        if release_slot:
            sets.append("active_runs = active_runs - :one")
            condition += " AND active_runs > :zero"
            values |= expression_values(one=1, zero=0)
        if reserved is not None:
            adds += ["credits_balance :unspent", f"{credits_used_counter()} :spent"]
            values |= expression_values(unspent=int(reserved), spent=spent)
        if not sets and not adds:
            return []
        expression = (f"SET {', '.join(sets)} " if sets else "") + (f"ADD {', '.join(adds)}" if adds else "")
        return [
            {
                "Update": {
                    "TableName": self.settings.accounts_table,
                    "Key": {"account_id": {"S": account_id}},
                    "UpdateExpression": expression.strip(),
                    "ConditionExpression": condition,
                    "ExpressionAttributeValues": values,
                }
            }
        ]

    def _consistent_run(self, run_id: str) -> dict[str, Any] | None:
        with dynamodb_errors():
            found = self.ddb.get_item(
                TableName=self.settings.runs_table,
                Key={"run_id": {"S": run_id}},
                ProjectionExpression="run_id, #s, reserved_credits, account_id",
                ExpressionAttributeNames={"#s": "status"},
                ConsistentRead=True,
            )
        return from_item(found["Item"]) if "Item" in found else None

    def _consistent_balance(self, account_id: str) -> dict[str, Any] | None:
        with dynamodb_errors():
            found = self.ddb.get_item(
                TableName=self.settings.accounts_table,
                Key={"account_id": {"S": account_id}},
                ProjectionExpression="account_id, credits_balance",
                ConsistentRead=True,
            )
        return from_item(found["Item"]) if "Item" in found else None

    def top_up(self, run_id: str, account_id: str, needed: int, step: int) -> None:
        """Move credits from the account to a running run's reservation so that it holds at least `needed`: at
        least `step` (bounded steps: a run that outgrows its reservation writes its account once per step, not per
        block), at most the balance. CreditsExhaustedError, with nothing moved, when the two together cannot, or when
        the run has ended (its reservation was settled: nothing more is spent for it)."""
        for _ in range(ADMISSION_ATTEMPTS):
            run = self._consistent_run(run_id)
            account = self._consistent_balance(account_id)
            if run is None or run.get("reserved_credits") is None or account is None:
                return
            reserved, balance = int(run["reserved_credits"]), int(account.get("credits_balance", 0))
            if reserved >= needed:
                return
            if run.get("status") != "running":
                raise CreditsExhaustedError(needed, reserved)
            if reserved + balance < needed:
                raise CreditsExhaustedError(needed, reserved + balance)
            take = min(balance, max(step, needed - reserved))
            try:
                self._transact(
                    [
                        {
                            "Update": {
                                "TableName": self.settings.accounts_table,
                                "Key": {"account_id": {"S": account_id}},
                                "UpdateExpression": "SET credits_balance = credits_balance - :take",
                                "ConditionExpression": "credits_balance >= :take",
                                "ExpressionAttributeValues": expression_values(take=take),
                            }
                        },
                        {
                            "Update": {
                                "TableName": self.settings.runs_table,
                                "Key": {"run_id": {"S": run_id}},
                                "UpdateExpression": "SET reserved_credits = reserved_credits + :take",
                                "ConditionExpression": "attribute_exists(reserved_credits) AND #s = :running",
                                "ExpressionAttributeNames": {"#s": "status"},
                                "ExpressionAttributeValues": expression_values(take=take, running="running"),
                            }
                        },
                    ]
                )
            except ConditionFailed:
                continue  # the balance or the run changed meanwhile: look again
            return
        raise StorageBusyError("The account's balance kept changing while a run's reservation was topped up")

    def _spend(self, run_id: str, credits: int) -> list[dict[str, Any]]:
        """The transaction item that spends `credits` from a run's reservation, only if it holds them; nothing for
        zero credits. On a refusal the cancellation reason carries the run as it was (see `_pay`)."""
        if credits <= 0:
            return []
        return [
            {
                "Update": {
                    "TableName": self.settings.runs_table,
                    "Key": {"run_id": {"S": run_id}},
                    "UpdateExpression": "SET reserved_credits = reserved_credits - :credits",
                    "ConditionExpression": "reserved_credits >= :credits",
                    "ExpressionAttributeValues": expression_values(credits=credits),
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            }
        ]

    def _pay(
        self,
        write: Callable[[list[dict[str, Any]]], None],
        credits: int,
        run_id: str | None,
        account_id: str | None,
    ) -> None:
        """`write(debit)`: the rest of a transaction with the item that pays `credits`: from the run's reservation
        (topped up from the account when it falls short), from the account for a run without one, nothing when
        neither exists (the work is kept, uncharged). CreditsExhaustedError when they cannot pay."""
        if run_id is not None:
            for _ in range(TOP_UP_ATTEMPTS):
                try:
                    write(self._spend(run_id, credits))
                    return
                except ConditionFailed as exc:
                    if credits <= 0 or "ConditionalCheckFailed" in cancellation_codes(exc)[:-1]:
                        raise
                    run = _refused_item(exc)
                    if run is None or run.get("reserved_credits") is None:
                        break  # no run, or one without a reservation: the account pays
                    if account_id is None:
                        raise CreditsExhaustedError(credits, int(run["reserved_credits"])) from exc
                    self.top_up(run_id, account_id, credits, step=max(credits, TOP_UP_CREDITS))
            else:
                raise StorageBusyError("The run's reservation kept running short while a block was paid")
        debit = self._debit(account_id, credits) if account_id else []
        try:
            write(debit)
        except ConditionFailed as exc:
            if not debit or "ConditionalCheckFailed" in cancellation_codes(exc)[:-1]:
                raise
            _refuse_overdraft(exc, credits)
            # Only the account was missing: keep the work, uncharged.
            write([])

    # Canvases

    def put_canvas(self, canvas: CanvasItem) -> None:
        with dynamodb_errors():
            self.ddb.put_item(
                TableName=self.settings.canvases_table,
                Item=self._item(canvas, item_id=CANVAS_ITEM),
                ConditionExpression="attribute_not_exists(canvas_id)",
            )

    def put_graph(
        self,
        nodes: list[NodeItem],
        edges: list[EdgeItem],
        canvas_id: str,
        ended_inputs: Mapping[str, list[str]] | None = None,
    ) -> None:
        """Store a canvas's nodes and edges. `ended_inputs` (block id -> input ids) counts inputs as ended from the
        start, as a re-run's reused blocks are (see `count_input_ended`)."""
        ended = {block_id: inputs for block_id, inputs in (ended_inputs or {}).items() if inputs}
        items = [
            self._item(
                n,
                item_id=NODE_PREFIX + n.block_id,
                **({"ended_inputs": set(ended[n.block_id])} if n.block_id in ended else {}),
            )
            for n in nodes
        ]
        items += [
            self._item(e, canvas_id=canvas_id, item_id=f"{EDGE_PREFIX}{e.source_id}#{e.target_id}") for e in edges
        ]
        self._batch_put(self.settings.canvases_table, items)

    def get_canvas(self, canvas_id: str) -> tuple[CanvasItem | None, list[NodeItem], list[EdgeItem]]:
        canvas, nodes, edges = None, [], []
        for item in self._query_partition(self.settings.canvases_table, canvas_id):
            item_id = item.pop("item_id")
            if item_id == CANVAS_ITEM:
                canvas = CanvasItem.model_validate(item)
            elif item_id.startswith(NODE_PREFIX):
                nodes.append(NodeItem.model_validate(item))
            elif item_id.startswith(EDGE_PREFIX):
                edges.append(EdgeItem.model_validate(item))
        nodes.sort(key=lambda n: n.position)
        return canvas, nodes, edges

    def get_canvas_item(self, canvas_id: str) -> CanvasItem | None:
        with dynamodb_errors():
            found = self.ddb.get_item(
                TableName=self.settings.canvases_table,
                Key={"canvas_id": {"S": canvas_id}, "item_id": {"S": CANVAS_ITEM}},
            )
        if "Item" not in found:
            return None
        item = from_item(found["Item"])
        item.pop("item_id")
        return CanvasItem.model_validate(item)

    def get_nodes(self, canvas_id: str, block_ids: list[str]) -> list[NodeItem]:
        return self.get_nodes_and_account(canvas_id, block_ids)[0]

    def get_nodes_and_account(
        self, canvas_id: str, block_ids: list[str], account_id: str | None = None, dependents: list[str] | None = None
    ) -> tuple[list[NodeItem], dict[str, Any] | None, dict[str, dict[str, Any]]]:
        """Nodes (in the order asked, those that exist), with `account_id` that account, and the nodes of
        `dependents` as stored (dataflow bookkeeping included), by block id: one read."""
        items = self._node_items(canvas_id, [*block_ids, *(dependents or [])], account_id)
        account = items.pop(None, None)
        stored = {block_id: items.pop(block_id) for block_id in dependents or [] if block_id in items}
        nodes = []
        for block_id in dict.fromkeys(block_ids):
            if block_id in items:
                data = items[block_id]
                data.pop("item_id")
                nodes.append(NodeItem.model_validate(data))
        return nodes, account, stored

    def get_node_items(self, canvas_id: str, block_ids: list[str]) -> dict[str, dict[str, Any]]:
        """Nodes as stored, dataflow bookkeeping included, by block id: one read."""
        return {k: v for k, v in self._node_items(canvas_id, block_ids).items() if k is not None}

    def _node_items(
        self, canvas_id: str, block_ids: list[str], account_id: str | None = None
    ) -> dict[str | None, dict[str, Any]]:
        """Consistent reads of nodes by block id, and of an account under the key None."""
        wanted: list[tuple[str, dict[str, Any]]] = [
            (self.settings.canvases_table, self._node_key(canvas_id, block_id)) for block_id in dict.fromkeys(block_ids)
        ]
        if account_id is not None:
            wanted.append((self.settings.accounts_table, {"account_id": {"S": account_id}}))
        found: dict[str | None, dict[str, Any]] = {}
        for start in range(0, len(wanted), 100):
            chunk: dict[str, Any] = {}
            for table, key in wanted[start : start + 100]:
                chunk.setdefault(table, {"Keys": [], "ConsistentRead": table == self.settings.canvases_table})
                chunk[table]["Keys"].append(key)
            request: dict[str, Any] | None = chunk
            while request:
                with dynamodb_errors():
                    response = self.ddb.batch_get_item(RequestItems=request)
                for item in response["Responses"].get(self.settings.canvases_table, []):
                    data = from_item(item)
                    found[data["block_id"]] = data
                for item in response["Responses"].get(self.settings.accounts_table, []):
                    found[None] = from_item(item)
                request = response.get("UnprocessedKeys") or None
        return found

    def update_node(self, canvas_id: str, block_id: str, expect_status: list[str] | None = None, **fields: Any) -> bool:
        """Update a node's fields; with `expect_status`, only from one of those statuses (False otherwise)."""
        names = {f"#{k}": k for k in fields}
        sets = ", ".join(f"#{k} = :{k}" for k in fields)
        condition = "attribute_exists(item_id)"
        values = expression_values(**jsonable_fields(fields))
        if expect_status:
            placeholders = []
            for i, status in enumerate(expect_status):
                values[f":expect{i}"] = serialize(status)
                placeholders.append(f":expect{i}")
            condition += f" AND #cur IN ({', '.join(placeholders)})"
            names["#cur"] = "status"
        try:
            with dynamodb_errors():
                self.ddb.update_item(
                    TableName=self.settings.canvases_table,
                    Key={"canvas_id": {"S": canvas_id}, "item_id": {"S": NODE_PREFIX + block_id}},
                    UpdateExpression=f"SET {sets}",
                    ConditionExpression=condition,
                    ExpressionAttributeNames=names,
                    ExpressionAttributeValues=values,
                )
        except ConditionFailed:
            return False
        return True

    # A block's own writes, each one transaction: its node and its tasks move together.

    def start_block(self, canvas_id: str, block_id: str, tool_call_task: TaskItem) -> None:
        """Node `running` and its tool-call task, in one write; only for a node not ended (ConditionFailed otherwise:
        a block its run's cancel ended before it started stays ended)."""
        self._transact(
            [
                {
                    "Update": {
                        "TableName": self.settings.canvases_table,
                        "Key": self._node_key(canvas_id, block_id),
                        "UpdateExpression": "SET #s = :running",
                        "ConditionExpression": "attribute_exists(item_id) AND #s IN (:idle, :running)",
                        "ExpressionAttributeNames": {"#s": "status"},
                        "ExpressionAttributeValues": expression_values(running="running", idle="idle"),
                    }
                },
                {"Put": {"TableName": self.settings.tasks_table, "Item": self._item(tool_call_task)}},
            ]
        )

    def complete_block(
        self,
        canvas_id: str,
        block_id: str,
        task_ids: list[str],
        debit_account: str | None = None,
        dependents: list[str] | None = None,
        release: Mapping[str, str] | None = None,
        debit_run: str | None = None,
        **fields: Any,
    ) -> Completion | None:
        """Node `completed` with its output, and its tasks `completed`, in one write; only from `running`
        (None otherwise: a block recorded as failed meanwhile stays failed). With `debit_account`, the same
        write takes the node's `credits` off that account, so a block is charged exactly once; with `debit_run` too,
        off that run's reservation (see `_pay`). With
        `dependents`, the same write counts the block as an ended input of each (see `count_input_ended`), so
        the release that follows only reads them. `release` (dependent id -> task token) names dependents this
        block was the last input of when it started, parked with that token: the same write claims their
        release (see `claim_ready_release`). Should one of those no longer hold (the dependent parked again with
        another token), the block completes without claiming any, and the release that follows claims them."""
        if release:
            try:
                self._complete(canvas_id, block_id, task_ids, debit_account, debit_run, dependents, release, fields)
                return Completion(released=dict(release))
            except ConditionFailed as exc:
                counts_from = 1 + len(task_ids)
                codes = cancellation_codes(exc)[counts_from : counts_from + len(dict.fromkeys(dependents or []))]
                if "ConditionalCheckFailed" not in codes:
                    return None  # not a claim that failed: the block is no longer running
        try:
            self._complete(canvas_id, block_id, task_ids, debit_account, debit_run, dependents, None, fields)
        except ConditionFailed:
            return None
        return Completion()

    def _complete(
        self,
        canvas_id: str,
        block_id: str,
        task_ids: list[str],
        debit_account: str | None,
        debit_run: str | None,
        dependents: list[str] | None,
        release: Mapping[str, str] | None,
        fields: dict[str, Any],
    ) -> None:
        fields = {**fields, "status": "completed"}
        names = {f"#{k}": k for k in fields} | {"#cur": "status"}
        node_update = {
            "Update": {
                "TableName": self.settings.canvases_table,
                "Key": self._node_key(canvas_id, block_id),
                "UpdateExpression": "SET " + ", ".join(f"#{k} = :{k}" for k in fields),
                "ConditionExpression": "#cur = :running",
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": expression_values(**jsonable_fields(fields), running="running"),
            }
        }
        task_updates = [
            {
                "Update": {
                    "TableName": self.settings.tasks_table,
                    "Key": {"canvas_id": {"S": canvas_id}, "task_id": {"S": task_id}},
                    "UpdateExpression": "SET #s = :completed",
                    "ConditionExpression": "attribute_exists(task_id)",
                    "ExpressionAttributeNames": {"#s": "status"},
                    "ExpressionAttributeValues": expression_values(completed="completed"),
                }
            }
            for task_id in task_ids
        ]
        now = now_ms()
        counts = [
            {
                "Update": {
                    "TableName": self.settings.canvases_table,
                    **(
                        self._count_and_claim(canvas_id, dependent, block_id, release[dependent], now)
                        if release and dependent in release
                        else self._count_input(canvas_id, dependent, block_id)
                    ),
                }
            }
            for dependent in dict.fromkeys(dependents or [])
        ]
        credits = int(fields.get("credits") or 0)
        self._pay(
            lambda debit: self._transact([node_update, *task_updates, *counts, *debit]),
            credits,
            debit_run,
            debit_account,
        )

    def _debit(self, account_id: str, credits: int) -> list[dict[str, Any]]:
        """The transaction item that takes `credits` off an account's balance, only if the balance holds them
        (server-side, so concurrent debits add up and together never overdraw); nothing for zero credits.
        On a refusal the cancellation reason carries the account as it was (see `_refuse_overdraft`)."""
        if credits <= 0:
            return []
        return [
            {
                "Update": {
                    "TableName": self.settings.accounts_table,
                    "Key": {"account_id": {"S": account_id}},
                    "UpdateExpression": (
                        f"SET credits_balance = credits_balance - :credits ADD {credits_used_counter()} :credits"
                    ),
                    "ConditionExpression": "credits_balance >= :credits",
                    "ExpressionAttributeValues": expression_values(credits=credits),
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            }
        ]

    def record_planning(
        self, run_id: str, account_id: str, models_used: list[str], credits: int, notes: list[str] | None = None
    ) -> bool:
        """Store what planning used on the run (and `notes`, what the run's errors are to say of it) and pay its
        credits (from the run's reservation, else the account), in one write, once per run (False when a retried
        step finds it recorded). CreditsExhaustedError, with nothing written, when they cannot be paid."""
        run_update = {
            "Update": {
                "TableName": self.settings.runs_table,
                "Key": {"run_id": {"S": run_id}},
                "UpdateExpression": (
                    "SET planning_models_used = :models, planning_credits = :credits, planning_recorded = :yes"
                    + (", planning_notes = :notes" if notes else "")
                ),
                "ConditionExpression": "attribute_exists(run_id) AND attribute_not_exists(planning_recorded)",
                "ExpressionAttributeValues": expression_values(
                    models=models_used, credits=credits, yes=True, **({"notes": notes} if notes else {})
                ),
            }
        }
        run = self._consistent_run(run_id)
        reserved = run is not None and run.get("reserved_credits") is not None
        try:
            if reserved and credits > 0:
                # The run's own item pays: its update and the spend are one update of one item.
                update: dict[str, Any] = run_update["Update"]
                update["UpdateExpression"] += ", reserved_credits = reserved_credits - :spend"
                update["ConditionExpression"] += " AND reserved_credits >= :spend"
                update["ExpressionAttributeValues"] |= expression_values(spend=credits)
                update["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
                for _ in range(TOP_UP_ATTEMPTS):
                    try:
                        self._transact([run_update])
                        return True
                    except ConditionFailed as exc:
                        stored = _refused_item(exc, 0)
                        if stored is None or "planning_recorded" in stored:
                            return False
                        self.top_up(run_id, account_id, credits, step=max(credits, TOP_UP_CREDITS))
                raise StorageBusyError("The run's reservation kept running short while planning was paid")
            self._pay(lambda debit: self._transact([run_update, *debit]), credits, None, account_id)
        except ConditionFailed:
            return False
        return True

    def _transact(self, items: list[dict[str, Any]]) -> None:
        with dynamodb_errors():
            self.ddb.transact_write_items(TransactItems=items)

    # Dataflow: each node counts its inputs that have ended and holds the token of its parked iteration.

    def register_task_token(self, canvas_id: str, block_id: str, task_token: str) -> dict[str, Any]:
        """Park a block: store its task token, and return the node as it is now (pending count included)."""
        with dynamodb_errors():
            found = self.ddb.update_item(
                TableName=self.settings.canvases_table,
                Key=self._node_key(canvas_id, block_id),
                UpdateExpression="SET task_token = :t",
                ConditionExpression="attribute_exists(item_id)",
                ExpressionAttributeValues=expression_values(t=task_token),
                ReturnValues="ALL_NEW",
            )
        return from_item(found["Attributes"])

    def count_input_ended(self, canvas_id: str, block_id: str, input_id: str) -> dict[str, Any] | None:
        """Count one ended input of a block, once per input (a retried release counts nothing twice).
        Returns the node after the count, or None when that input had been counted already."""
        try:
            with dynamodb_errors():
                found = self.ddb.update_item(
                    TableName=self.settings.canvases_table,
                    **self._count_input(canvas_id, block_id, input_id),
                    ReturnValues="ALL_NEW",
                )
        except ConditionFailed:
            return None
        return from_item(found["Attributes"])

    def _count_input(self, canvas_id: str, block_id: str, input_id: str) -> dict[str, Any]:
        """The update that counts `input_id` as an ended input of a node, under the condition that it was not."""
        return {
            "Key": self._node_key(canvas_id, block_id),
            "UpdateExpression": "ADD ended_inputs :input SET pending_inputs = pending_inputs - :one",
            "ConditionExpression": "attribute_exists(item_id) AND NOT contains(ended_inputs, :id)",
            "ExpressionAttributeValues": {":input": {"SS": [input_id]}, ":id": {"S": input_id}, ":one": {"N": "1"}},
        }

    def _count_and_claim(
        self, canvas_id: str, block_id: str, input_id: str, task_token: str, released_at_ms: int
    ) -> dict[str, Any]:
        """The count of `input_id` as the last ended input of a node parked with `task_token`, which also claims
        its release: only if that input was the one input still counted as pending, and nothing claimed it."""
        return {
            "Key": self._node_key(canvas_id, block_id),
            "UpdateExpression": (
                "ADD ended_inputs :input SET pending_inputs = pending_inputs - :one, released_at_ms = :now"
            ),
            "ConditionExpression": (
                "attribute_exists(item_id) AND NOT contains(ended_inputs, :id) AND pending_inputs = :one"
                " AND task_token = :token AND attribute_not_exists(released_at_ms)"
            ),
            "ExpressionAttributeValues": {
                ":input": {"SS": [input_id]},
                ":id": {"S": input_id},
                ":one": {"N": "1"},
                ":token": {"S": task_token},
                ":now": {"N": str(released_at_ms)},
            },
        }

    def get_node_item(self, canvas_id: str, block_id: str) -> dict[str, Any] | None:
        with dynamodb_errors():
            found = self.ddb.get_item(
                TableName=self.settings.canvases_table, Key=self._node_key(canvas_id, block_id), ConsistentRead=True
            )
        return from_item(found["Item"]) if "Item" in found else None

    def claim_release(self, canvas_id: str, block_id: str, released_at_ms: int) -> bool:
        """True for exactly one caller: the one that may send the parked block's token. The claim names its caller,
        so a retry of the same write whose first answer was lost (botocore resends it as it was) finds the claim its
        own, not someone else's."""
        claimant = str(uuid.uuid4())
        try:
            with dynamodb_errors():
                self.ddb.update_item(
                    TableName=self.settings.canvases_table,
                    Key=self._node_key(canvas_id, block_id),
                    UpdateExpression="SET released_at_ms = :now, released_by = :me",
                    ConditionExpression=(
                        "(attribute_not_exists(released_at_ms) AND attribute_exists(task_token)) OR released_by = :me"
                    ),
                    ExpressionAttributeValues=expression_values(now=released_at_ms, me=claimant),
                )
        except ConditionFailed:
            return False
        return True

    def claim_ready_release(self, canvas_id: str, block_id: str, released_at_ms: int) -> dict[str, Any] | None:
        """Claim the release of a block only if it is ready (no pending input) and parked: the node as claimed
        (its token included) for exactly one caller, None for the others and while it is not ready or parked. Like
        `claim_release`, the claim names its caller, so a resent write finds it its own."""
        claimant = str(uuid.uuid4())
        try:
            with dynamodb_errors():
                found = self.ddb.update_item(
                    TableName=self.settings.canvases_table,
                    Key=self._node_key(canvas_id, block_id),
                    UpdateExpression="SET released_at_ms = :now, released_by = :me",
                    ConditionExpression=(
                        "(pending_inputs <= :zero AND attribute_exists(task_token)"
                        " AND attribute_not_exists(released_at_ms)) OR released_by = :me"
                    ),
                    ExpressionAttributeValues=expression_values(now=released_at_ms, zero=0, me=claimant),
                    ReturnValues="ALL_NEW",
                )
        except ConditionFailed:
            return None
        return from_item(found["Attributes"])

    def unclaim_release(self, canvas_id: str, block_id: str) -> None:
        with dynamodb_errors():
            self.ddb.update_item(
                TableName=self.settings.canvases_table,
                Key=self._node_key(canvas_id, block_id),
                UpdateExpression="REMOVE released_at_ms, released_by",
            )

    @staticmethod
    def _node_key(canvas_id: str, block_id: str) -> dict[str, Any]:
        return {"canvas_id": {"S": canvas_id}, "item_id": {"S": NODE_PREFIX + block_id}}

    # Tasks

    def put_tasks(self, tasks: list[TaskItem]) -> None:
        self._batch_put(self.settings.tasks_table, [self._item(t) for t in tasks])

    def get_tasks(self, canvas_id: str) -> list[TaskItem]:
        tasks = [TaskItem.model_validate(i) for i in self._query_partition(self.settings.tasks_table, canvas_id)]
        return sorted(tasks, key=lambda t: t.position)

    def set_task_status(self, canvas_id: str, task_id: str, status: str) -> bool:
        """Set an existing task's status (False when there is no such task)."""
        try:
            with dynamodb_errors():
                self.ddb.update_item(
                    TableName=self.settings.tasks_table,
                    Key={"canvas_id": {"S": canvas_id}, "task_id": {"S": task_id}},
                    UpdateExpression="SET #s = :s",
                    ConditionExpression="attribute_exists(task_id)",
                    ExpressionAttributeNames={"#s": "status"},
                    ExpressionAttributeValues=expression_values(s=status),
                )
        except ConditionFailed:
            return False
        return True

    # Helpers

    def _query_partition(self, table: str, canvas_id: str) -> Iterator[dict[str, Any]]:
        kwargs: dict[str, Any] = {
            "TableName": table,
            "KeyConditionExpression": "canvas_id = :c",
            "ExpressionAttributeValues": {":c": {"S": canvas_id}},
            "ConsistentRead": True,
        }
        while True:
            with dynamodb_errors():
                page = self.ddb.query(**kwargs)
            for item in page["Items"]:
                yield from_item(item)
            if "LastEvaluatedKey" not in page:
                return
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def _batch_put(self, table: str, items: list[dict[str, Any]]) -> None:
        for start in range(0, len(items), 25):
            request: dict[str, Any] | None = {
                table: [{"PutRequest": {"Item": item}} for item in items[start : start + 25]]
            }
            while request:
                with dynamodb_errors():
                    response = self.ddb.batch_write_item(RequestItems=request)
                request = response.get("UnprocessedItems") or None


def _refused_item(exc: ConditionFailed, index: int = -1) -> dict[str, Any] | None:
    """The item as it was, of the transaction's item at `index` whose condition failed (asked with
    `ReturnValuesOnConditionCheckFailure`), or None when it does not exist."""
    reasons = cancellation_reasons(exc)
    if not reasons or not reasons[index].get("Item"):
        return None
    return from_item(reasons[index]["Item"])


def _refuse_overdraft(exc: ConditionFailed, credits: int) -> None:
    """Raise CreditsExhaustedError when the refused debit (the transaction's last item) found the account:
    its balance did not hold `credits`. Return when the account does not exist."""
    reasons = cancellation_reasons(exc)
    account = from_item(reasons[-1]["Item"]) if reasons and reasons[-1].get("Item") else None
    if account is not None:
        raise CreditsExhaustedError(credits, int(account.get("credits_balance", 0))) from exc


def jsonable_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    """Models inside update values become plain JSON data, and None is dropped by the serializer's NULL."""
    out = {}
    for key, value in fields.items():
        if isinstance(value, BaseModel):
            value = value.model_dump(mode="json", exclude_none=True)
        elif isinstance(value, list):
            value = [v.model_dump(mode="json", exclude_none=True) if isinstance(v, BaseModel) else v for v in value]
        out[key] = value
    return out


def retry_after_ms(window: int) -> int:
    """Milliseconds from now until the start window after `window` opens."""
    return max((window + 1) * START_WINDOW_MS - now_ms(), 0)


def start_wait_ms(account: Mapping[str, Any] | None, max_starts_per_minute: int) -> int | None:
    """Milliseconds until the account may start a run again, when this minute's starts are spent (as last read);
    None when it may start one now."""
    window = now_ms() // START_WINDOW_MS
    if account is None or int(account.get("start_window", -1)) != window:
        return None
    if int(account.get("starts_in_window", 0)) < max_starts_per_minute:
        return None
    return retry_after_ms(window)
