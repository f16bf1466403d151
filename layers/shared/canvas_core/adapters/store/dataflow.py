"""Dataflow: each node counts its inputs that have ended and holds the token of its parked iteration."""

from __future__ import annotations

import uuid
from typing import Any

from canvas_core.adapters.dynamodb import ConditionFailed, dynamodb_errors, expression_values, from_item
from canvas_core.adapters.store.tasks import TasksTable


class NodeReleases(TasksTable):
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
