"""Canvases: the block graph (DAG) a run built, and its task tree, read-only and scoped to the caller."""

from __future__ import annotations

from canvas_core.adapters.store import Store
from canvas_core.clock import parse_uuid
from canvas_core.content import with_full_content
from canvas_core.errors import BadRequestError, CanvasNotFoundError, TaskNotFoundError
from canvas_core.models.api import CanvasDagResponse, EdgeView, NodeView, TaskTreeResponse, TaskView
from canvas_core.models.catalog import TaskStatus
from canvas_core.models.items import NodeItem, TaskItem

# What the DAG answers of each node's output, in characters: 40 nodes of it stay far inside Lambda's 6 MB response
# even for text JSON escapes to 6 bytes a character (CJK). A node's whole output is read a page at a time.
DAG_CONTENT_CHARS = 12_000
CONTENT_PAGE_CHARS = 500_000


def get_canvas_dag(
    canvas_id: str, account_id: str, node: str | None = None, offset: int = 0, store: Store | None = None
) -> CanvasDagResponse:
    """The canvas's nodes and edges, each node's content cut to DAG_CONTENT_CHARS (`content_truncated`,
    `content_length` say so); with `node`, that node alone, its content from `offset` for up to CONTENT_PAGE_CHARS."""
    store = store or Store()
    canvas_id = parse_uuid("canvas_id", canvas_id)
    canvas, nodes, edges = store.get_canvas(canvas_id)
    if canvas is None or canvas.account_id != account_id:
        raise CanvasNotFoundError(canvas_id)
    if node is not None:
        nodes = [n for n in nodes if n.block_id == node]
        if not nodes:
            raise BadRequestError(f"Invalid node: {node} is not a block of this canvas")
        edges = [e for e in edges if node in (e.source_id, e.target_id)]
    size, start = (CONTENT_PAGE_CHARS, offset) if node is not None else (DAG_CONTENT_CHARS, 0)
    nodes = with_full_content(nodes, account_id)
    return CanvasDagResponse(
        canvas_id=canvas.canvas_id,
        canvas_name=canvas.canvas_name,
        nodes=[_part(node_view(n), start, size) for n in nodes],
        edges=[EdgeView(source_id=e.source_id, target_id=e.target_id) for e in edges],
    )


def _part(view: NodeView, start: int, size: int) -> NodeView:
    """The node with `size` characters of its content from `start`, saying so when that is not all of it."""
    whole = view.content
    if start == 0 and len(whole) <= size:
        return view
    part = whole[start : start + size]
    return view.model_copy(
        update={"content": part, "content_truncated": start + len(part) < len(whole), "content_length": len(whole)}
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
