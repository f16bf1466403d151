"""The canvas viewer's data: a run, its canvas laid out as a DAG (columns by longest path from a start block, a
row per block within its column), each block's content, sources, credits and models, and the task tree."""

from __future__ import annotations

from pydantic import Field

from canvas_core.adapters.artifacts import ArtifactStore
from canvas_core.adapters.store import Store
from canvas_core.canvas import get_task_tree, node_view
from canvas_core.content import with_full_content
from canvas_core.errors import RunNotFoundError
from canvas_core.models.api import NodeView, RunStatusResponse, TaskTreeResponse
from canvas_core.models.base import Model
from canvas_core.models.items import EdgeItem, NodeItem
from canvas_core.observability import tracer
from canvas_core.runs import get_run_status

NODE_WIDTH, NODE_HEIGHT = 170, 54
COLUMN_GAP, ROW_GAP, MARGIN = 50, 22, 16


class ViewerNode(NodeView):
    """A node of GET /v1/canvas/{canvas_id}/dag, with what the side panel shows and where it is drawn."""

    credits: int = 0
    models_used: list[str] = Field(default_factory=list)
    error: str | None = None
    # What the block was asked to do: the Re-run form starts from it.
    instructions: str | None = None
    x: int
    y: int


class ViewerEdge(Model):
    source_id: str
    target_id: str
    path: str = Field(description="SVG path data of the arrow, in the layout's coordinates")


class CanvasView(Model):
    run: RunStatusResponse
    canvas_name: str | None = None
    width: int
    height: int
    node_width: int = NODE_WIDTH
    node_height: int = NODE_HEIGHT
    nodes: list[ViewerNode]
    edges: list[ViewerEdge]
    tasks: TaskTreeResponse


@tracer.capture_method
def canvas_view(
    run_id: str, account_id: str, store: Store | None = None, files: ArtifactStore | None = None
) -> CanvasView:
    """Another account's run answers exactly as a missing one."""
    store = store or Store()
    run = get_run_status(run_id, account_id, store, files)
    canvas, nodes, edges = store.get_canvas(run.canvas_id)
    if canvas is not None and canvas.account_id != account_id:
        raise RunNotFoundError(run.run_id)
    nodes = with_full_content(nodes, account_id, files)
    positions, width, height = layout(nodes, edges)
    return CanvasView(
        run=run,
        canvas_name=canvas.canvas_name if canvas else None,
        width=width,
        height=height,
        nodes=[
            ViewerNode(
                **dict(node_view(n)),
                credits=n.credits,
                models_used=n.models_used,
                error=n.error,
                instructions=n.instructions,
                x=positions[n.block_id][0],
                y=positions[n.block_id][1],
            )
            for n in nodes
        ],
        edges=[
            ViewerEdge(source_id=e.source_id, target_id=e.target_id, path=_edge_path(positions, e))
            for e in edges
            if e.source_id in positions and e.target_id in positions
        ],
        tasks=get_task_tree(run.canvas_id, account_id, store),
    )


def layout(nodes: list[NodeItem], edges: list[EdgeItem]) -> tuple[dict[str, tuple[int, int]], int, int]:
    """Top-left corners of the nodes' boxes, and the drawing's size. A block's column is the length of the longest
    path reaching it, so every arrow points right; rows keep the canvas's order."""
    ids = [n.block_id for n in nodes]
    inputs: dict[str, list[str]] = {i: [] for i in ids}
    for edge in edges:
        if edge.source_id in inputs and edge.target_id in inputs:
            inputs[edge.target_id].append(edge.source_id)
    column: dict[str, int] = {}

    def column_of(block_id: str, seen: frozenset[str] = frozenset()) -> int:
        if block_id not in column:
            # A cycle (never planned, but cheap to survive) counts as no input.
            parents = [p for p in inputs[block_id] if p not in seen]
            column[block_id] = 1 + max((column_of(p, seen | {block_id}) for p in parents), default=-1)
        return column[block_id]

    rows: dict[int, int] = {}
    positions: dict[str, tuple[int, int]] = {}
    for block_id in ids:
        col = column_of(block_id)
        row = rows.get(col, 0)
        rows[col] = row + 1
        positions[block_id] = (
            MARGIN + col * (NODE_WIDTH + COLUMN_GAP),
            MARGIN + row * (NODE_HEIGHT + ROW_GAP),
        )
    columns, most_rows = (max(rows) + 1 if rows else 0), max(rows.values(), default=0)
    width = 2 * MARGIN + max(0, columns * (NODE_WIDTH + COLUMN_GAP) - COLUMN_GAP)
    height = 2 * MARGIN + max(0, most_rows * (NODE_HEIGHT + ROW_GAP) - ROW_GAP)
    return positions, width, height


def _edge_path(positions: dict[str, tuple[int, int]], edge: EdgeItem) -> str:
    (sx, sy), (tx, ty) = positions[edge.source_id], positions[edge.target_id]
    x1, y1 = sx + NODE_WIDTH, sy + NODE_HEIGHT // 2
    x2, y2 = tx, ty + NODE_HEIGHT // 2
    bend = max(20, (x2 - x1) // 2)
    return f"M {x1} {y1} C {x1 + bend} {y1}, {x2 - bend} {y2}, {x2} {y2}"
