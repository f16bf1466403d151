"""Canvases: the block graph (DAG) a run built, and its task tree, read-only and scoped to the caller."""

from __future__ import annotations

from canvas_core.adapters.store import Store
from canvas_core.clock import parse_uuid
from canvas_core.content import with_full_content
from canvas_core.errors import CanvasNotFoundError, TaskNotFoundError
from canvas_core.models.api import CanvasDagResponse, EdgeView, NodeView, TaskTreeResponse, TaskView
from canvas_core.models.catalog import TaskStatus
from canvas_core.models.items import NodeItem, TaskItem


def get_canvas_dag(canvas_id: str, account_id: str, store: Store | None = None) -> CanvasDagResponse:
    store = store or Store()
    canvas_id = parse_uuid("canvas_id", canvas_id)
    canvas, nodes, edges = store.get_canvas(canvas_id)
    if canvas is None or canvas.account_id != account_id:
        raise CanvasNotFoundError(canvas_id)
    nodes = with_full_content(nodes)
    return CanvasDagResponse(
        canvas_id=canvas.canvas_id,
        canvas_name=canvas.canvas_name,
        nodes=[node_view(n) for n in nodes],
        edges=[EdgeView(source_id=e.source_id, target_id=e.target_id) for e in edges],
    )


def node_view(node: NodeItem) -> NodeView:
    """A node as the DAG endpoint (and the canvas viewer) show it."""
    return NodeView(
        id=node.block_id,
        name=node.name,
        type=node.type,
        status=node.status,
        content=node.content or "",
        url=node.url,
        sources=[s.model_dump(mode="json", exclude_none=True) for s in node.sources],
        estimated_credits=node.estimated_credits,
        reused=True if node.reused else None,
    )


def get_task_tree(canvas_id: str, account_id: str, store: Store | None = None) -> TaskTreeResponse:
    store = store or Store()
    canvas_id = parse_uuid("canvas_id", canvas_id)
    tasks = _owned_tasks(store, canvas_id, account_id)
    roots = [_subtree(t, tasks) for t in tasks if t.parent_id is None]
    return TaskTreeResponse(
        canvas_id=canvas_id,
        completed=[r for r in roots if _fully_completed(r)],
        not_completed=[r for r in roots if not _fully_completed(r)],
    )


def get_task(canvas_id: str, task_id: str, account_id: str, store: Store | None = None) -> TaskView:
    store = store or Store()
    canvas_id = parse_uuid("canvas_id", canvas_id)
    task_id = parse_uuid("task_id", task_id)
    tasks = _owned_tasks(store, canvas_id, account_id)
    task = next((t for t in tasks if t.task_id == task_id), None)
    if task is None:
        raise TaskNotFoundError(task_id)
    return _subtree(task, tasks)


def _owned_tasks(store: Store, canvas_id: str, account_id: str) -> list[TaskItem]:
    canvas = store.get_canvas_item(canvas_id)
    if canvas is None or canvas.account_id != account_id:
        raise CanvasNotFoundError(canvas_id)
    return store.get_tasks(canvas_id)


def _subtree(task: TaskItem, tasks: list[TaskItem]) -> TaskView:
    return TaskView(
        task_id=task.task_id,
        name=task.name,
        task_type=task.task_type,
        status=task.status,
        children=[_subtree(t, tasks) for t in tasks if t.parent_id == task.task_id],
    )


def _fully_completed(view: TaskView) -> bool:
    return view.status == TaskStatus.COMPLETED and all(_fully_completed(c) for c in view.children)


__all__ = ["get_canvas_dag", "get_task", "get_task_tree"]
