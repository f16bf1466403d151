"""The blocks an account has running at once, on its account item: `running_blocks`, a map from `<run_id>/<block_id>`
to the time its hold lapses (epoch milliseconds). A block takes a slot before its work and gives it back after, each
in one conditional write, so blocks starting together cannot pass the limit; a block whose Lambda was stopped
before giving its slot back (a timeout, a crash) holds it until the hold lapses, when the next refused block clears
it."""

from __future__ import annotations

import contextlib
from typing import Any

from canvas_core.adapters.aws import LazyClient
from canvas_core.adapters.dynamodb import ConditionFailed, Retrying, dynamodb_errors, expression_values, from_item
from canvas_core.clock import now_ms
from canvas_core.settings import ServiceSettings, service_settings

ATTRIBUTE = "running_blocks"
# Lambda ends an invocation after 900 s at most: a hold lasts that long, and a minute more.
HOLD_MS = (900 + 60) * 1000
# Writes one take may need: the map made, expired holds cleared, the slot taken.
TAKE_ATTEMPTS = 4


def slot_key(run_id: str, block_id: str) -> str:
    return f"{run_id}/{block_id}"


class BlockSlots:
    ddb = LazyClient("dynamodb", wrap=Retrying)

    def __init__(self, settings: ServiceSettings | None = None, dynamodb: Any = None):
        self.settings = settings or service_settings()
        self.ddb = dynamodb

    def take(self, account_id: str, key: str, limit: int) -> bool:
        """Hold one of the account's `limit` slots for the block `key` (again, when it holds one already); False
        when all are held."""
        for _ in range(TAKE_ATTEMPTS):
            try:
                self._update(
                    account_id,
                    f"SET {ATTRIBUTE}.#key = :until",
                    f"attribute_exists({ATTRIBUTE})"
                    f" AND (size({ATTRIBUTE}) < :limit OR attribute_exists({ATTRIBUTE}.#key))",
                    names={"#key": key},
                    values={"until": now_ms() + HOLD_MS, "limit": limit},
                )
                return True
            except ConditionFailed as exc:
                item = _refused_item(exc)
                if item is None:
                    return True  # no account item: nothing to count the block against
                if ATTRIBUTE not in item:
                    self._make_map(account_id)
                    continue
                held = {k: int(v) for k, v in item[ATTRIBUTE].items()}
                if not self._clear_lapsed(account_id, held):
                    return False
        return False

    def give_back(self, account_id: str, key: str) -> None:
        """Give the block's slot back (nothing when it holds none)."""
        with contextlib.suppress(ConditionFailed):
            self._update(account_id, f"REMOVE {ATTRIBUTE}.#key", f"attribute_exists({ATTRIBUTE})", names={"#key": key})

    def held(self, account_id: str) -> dict[str, int]:
        """The account's holds as they are: block key to the time each lapses."""
        with dynamodb_errors():
            found = self.ddb.get_item(
                TableName=self.settings.accounts_table,
                Key={"account_id": {"S": account_id}},
                ProjectionExpression=ATTRIBUTE,
                ConsistentRead=True,
            )
        return {k: int(v) for k, v in from_item(found.get("Item", {})).get(ATTRIBUTE, {}).items()}

    def _make_map(self, account_id: str) -> None:
        # Made by another block meanwhile, or the account is gone: the next take finds out.
        with contextlib.suppress(ConditionFailed):
            self._update(
                account_id,
                f"SET {ATTRIBUTE} = :empty",
                f"attribute_exists(account_id) AND attribute_not_exists({ATTRIBUTE})",
                values={"empty": {}},
            )

    def _clear_lapsed(self, account_id: str, held: dict[str, int]) -> bool:
        """Remove the holds that lapsed, each only if it is still the same hold; False when none had. A hold set to
        lapse later than a block can run (a write no runner makes) counts as lapsed: it cannot keep a slot for good."""
        now = now_ms()
        lapsed = sorted(key for key, until in held.items() if until < now or until > now + HOLD_MS)
        if not lapsed:
            return False
        names = {f"#k{i}": key for i, key in enumerate(lapsed)}
        values = {f"u{i}": held[key] for i, key in enumerate(lapsed)}
        # Another block may have cleared or renewed them meanwhile: the next take finds out.
        with contextlib.suppress(ConditionFailed):
            self._update(
                account_id,
                "REMOVE " + ", ".join(f"{ATTRIBUTE}.#k{i}" for i in range(len(lapsed))),
                " AND ".join(f"{ATTRIBUTE}.#k{i} = :u{i}" for i in range(len(lapsed))),
                names=names,
                values=values,
            )
        return True

    def _update(
        self,
        account_id: str,
        update: str,
        condition: str,
        names: dict[str, str] | None = None,
        values: dict[str, Any] | None = None,
    ) -> None:
        request: dict[str, Any] = {
            "TableName": self.settings.accounts_table,
            "Key": {"account_id": {"S": account_id}},
            "UpdateExpression": update,
            "ConditionExpression": condition,
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        if names:
            request["ExpressionAttributeNames"] = names
        if values:
            request["ExpressionAttributeValues"] = expression_values(**values)
        with dynamodb_errors():
            self.ddb.update_item(**request)


def _refused_item(exc: ConditionFailed) -> dict[str, Any] | None:
    """The account item as the refused write found it; None when there is none."""
    cause = exc.__cause__
    item = getattr(cause, "response", {}).get("Item") if cause is not None else None
    return from_item(item) if item else None
