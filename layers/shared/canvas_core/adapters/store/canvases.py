"""Canvases: one partition per canvas (`CANVAS`, `NODE#<id>`, `EDGE#<source>#<target>`), and a block's own
writes, each one transaction: its node and its tasks move together."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from canvas_core.adapters.dynamodb import (
    ConditionFailed,
    cancellation_codes,
    dynamodb_errors,
    expression_values,
    from_item,
    serialize,
)
from canvas_core.adapters.store.base import (
    CANVAS_ITEM,
    EDGE_PREFIX,
    NODE_PREFIX,
    TOP_UP_ATTEMPTS,
    TOP_UP_CREDITS,
    Completion,
    jsonable_fields,
    refused_item,
)
from canvas_core.adapters.store.dataflow import NodeReleases
from canvas_core.clock import now_ms
from canvas_core.errors import StorageBusyError
from canvas_core.models.items import CanvasItem, EdgeItem, NodeItem, TaskItem


class CanvasesTable(NodeReleases):
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
                        stored = refused_item(exc, 0)
                        if stored is None or "planning_recorded" in stored:
                            return False
                        self.top_up(run_id, account_id, credits, step=max(credits, TOP_UP_CREDITS))
                raise StorageBusyError("The run's reservation kept running short while planning was paid")
            self._pay(lambda debit: self._transact([run_update, *debit]), credits, None, account_id)
        except ConditionFailed:
            return False
        return True
