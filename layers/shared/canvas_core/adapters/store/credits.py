"""Credits: a run spends from the reservation set aside on its item, topped up from its account's balance, which
never goes below zero; a run's end settles what it did not spend."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from canvas_core.adapters.dynamodb import ConditionFailed, cancellation_codes, expression_values
from canvas_core.adapters.store.accounts import AccountsTable
from canvas_core.adapters.store.base import (
    ADMISSION_ATTEMPTS,
    TOP_UP_ATTEMPTS,
    TOP_UP_CREDITS,
    refuse_overdraft,
    refused_item,
)
from canvas_core.adapters.usage import credits_used_counter
from canvas_core.errors import CreditsExhaustedError, StorageBusyError


class CreditsLedger(AccountsTable):
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
            # What was set aside grows with the reservation (a run stored before it was counted has no count).
            counted = run.get("credits_set_aside") is not None
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
                                "UpdateExpression": "SET reserved_credits = reserved_credits + :take"
                                + (", credits_set_aside = credits_set_aside + :take" if counted else ""),
                                "ConditionExpression": "attribute_exists(reserved_credits) AND #s = :running"
                                + (" AND attribute_exists(credits_set_aside)" if counted else ""),
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
                    run = refused_item(exc)
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
            refuse_overdraft(exc, credits)
            # Only the account was missing: keep the work, uncharged.
            write([])

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
