"""Task trees: one partition of the tasks table per canvas."""

from __future__ import annotations

from canvas_core.adapters.dynamodb import ConditionFailed, dynamodb_errors, expression_values
from canvas_core.adapters.store.reviews import RunReviews
from canvas_core.models.items import TaskItem


class TasksTable(RunReviews):
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
