"""Runs: admitted with their canvas and counted on their account in one write, listed by account, ended once."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from canvas_core.adapters.dynamodb import (
    ConditionFailed,
    cancellation_codes,
    dynamodb_errors,
    expression_values,
    from_item,
)
from canvas_core.adapters.store.base import (
    ADMISSION_ATTEMPTS,
    CANVAS_ITEM,
    RUNS_BY_ACCOUNT_INDEX,
    SETTLEMENT_ATTEMPTS,
    START_WINDOW_MS,
    jsonable_fields,
    refused_item,
)
from canvas_core.adapters.store.credits import CreditsLedger
from canvas_core.adapters.usage import runs_counter
from canvas_core.clock import now_ms
from canvas_core.errors import InsufficientCreditsError, StorageBusyError, TooManyRunStartsError
from canvas_core.models.items import CanvasItem, RerunOf, RunItem, RunSummaryItem


class RunsTable(CreditsLedger):
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
            admitted = run.model_copy(update={"reserved_credits": reserve, "credits_set_aside": reserve})
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
                found = refused_item(exc)
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
            set_aside = run.get("credits_set_aside") if run else None
            names = {f"#{k}": k for k in fields} | {"#cur": "status"}
            values = expression_values(**jsonable_fields(fields), running="running")
            sets = ", ".join(f"#{k} = :{k}" for k in fields)
            condition = "attribute_exists(run_id) AND #cur = :running"
            if reserved is not None:
                sets += ", reserved_credits = :none_left"
                condition += " AND reserved_credits = :reserved"
                # As stored, whatever a block wrote there: the condition holds the value the settlement was read from.
                values |= expression_values(none_left=0, reserved=reserved)
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
            unspent = returned(reserved, set_aside)
            settle = self._settle(account_id, unspent, spent, release_slot=not hold_slot) if account_id else []
            settled_by = account_id or ""
            try:
                self._transact([run_update, *settle])
            except ConditionFailed as exc:
                codes = cancellation_codes(exc)
                if not settle or (codes and codes[0] == "ConditionalCheckFailed"):
                    stored = refused_item(exc, 0)
                    if stored is not None and stored.get("status") == "running":
                        continue  # a block spent from the reservation meanwhile: settle what is left now
                    return False
                # The account counts no running run (it was stored before runs were counted) or has gone: settle
                # without the slot, or end the run alone; the count never goes below zero.
                try:
                    self._transact([run_update, *self._settle(settled_by, unspent, spent, release_slot=False)])
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


def returned(reserved: Any, set_aside: Any) -> int | None:
    """What a run's end gives back to its account: the reservation left, never below zero nor above what was set
    aside for the run (a block can write its run's reservation, never a balance: docs/isolation.md). None for a run
    without a reservation."""
    if reserved is None:
        return None
    try:
        left = max(0, int(reserved))
    except (TypeError, ValueError):
        return 0  # not a number (a block wrote it so): nothing comes back
    return left if set_aside is None else min(left, int(set_aside))
