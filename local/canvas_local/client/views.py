"""What the commands show: a canvas DAG as a tree, Mermaid or Graphviz DOT; a task tree; a run; a page of runs."""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

STATUS_STYLES = {
    "completed": "green",
    "running": "yellow",
    "idle": "dim",
    "skipped": "dim",
    "error": "red",
    "partial": "yellow",
    "failed": "red",
}
# Fill colours of Mermaid and DOT nodes by block status.
STATUS_FILLS = {
    "completed": "#dcfce7",
    "running": "#fef9c3",
    "idle": "#f3f4f6",
    "skipped": "#e5e7eb",
    "error": "#fee2e2",
}


def _status(status: str) -> str:
    return f"[{STATUS_STYLES.get(status, 'default')}]{escape(status)}[/]"


# ---------------------------------------------------------------- the DAG


def dag_tree(dag: dict[str, Any]) -> Tree:
    """Blocks under the blocks they read from; a block with several inputs is shown under the first and named
    under the others, so each appears once in full."""
    nodes = {n["id"]: n for n in dag.get("nodes", [])}
    children: dict[str, list[str]] = {}
    has_input: set[str] = set()
    for edge in dag.get("edges", []):
        children.setdefault(edge["source_id"], []).append(edge["target_id"])
        has_input.add(edge["target_id"])
    tree = Tree(f"[bold]{escape(dag.get('canvas_name', ''))}[/] [dim]{dag.get('canvas_id', '')}[/]")
    shown: set[str] = set()

    def add(parent: Tree, node_id: str) -> None:
        node = nodes.get(node_id, {"name": node_id, "type": "?", "status": "?"})
        if node_id in shown:
            parent.add(f"[dim]↳ {escape(node['name'])} (above)[/]")
            return
        shown.add(node_id)
        reused = " [dim](reused)[/]" if node.get("reused") else ""  # a re-run's block carried over, not run again
        branch = parent.add(f"{escape(node['name'])} [dim]{escape(node['type'])}[/] {_status(node['status'])}{reused}")
        for child in children.get(node_id, []):
            add(branch, child)

    for node_id in nodes:
        if node_id not in has_input:
            add(tree, node_id)
    return tree


def dag_mermaid(dag: dict[str, Any]) -> str:
    ids = {n["id"]: f"n{i}" for i, n in enumerate(dag.get("nodes", []))}
    lines = ["flowchart LR"]
    for node in dag.get("nodes", []):
        label = f"{_mermaid_text(node['name'])}<br/>{_mermaid_text(node['type'])} · {_mermaid_text(node['status'])}"
        lines.append(f'  {ids[node["id"]]}["{label}"]:::{_class_name(node["status"])}')
    for edge in dag.get("edges", []):
        if edge["source_id"] in ids and edge["target_id"] in ids:
            lines.append(f"  {ids[edge['source_id']]} --> {ids[edge['target_id']]}")
    for status in sorted({n["status"] for n in dag.get("nodes", [])}):
        lines.append(f"  classDef {_class_name(status)} fill:{STATUS_FILLS.get(status, '#ffffff')}")
    return "\n".join(lines) + "\n"


def _mermaid_text(text: str) -> str:
    """Text inside a quoted Mermaid label: its entity codes for what would end or mark up the label."""
    codes = {"#": "#35;", '"': "#quot;", "<": "#lt;", ">": "#gt;", "\n": " ", "\r": " "}
    return "".join(codes.get(c, c) for c in text)


def _class_name(status: str) -> str:
    return "status_" + "".join(c if c.isalnum() else "_" for c in status)


def dag_dot(dag: dict[str, Any]) -> str:
    lines = [
        "digraph canvas {",
        f"  label={_dot_text(dag.get('canvas_name', ''))};",
        "  rankdir=LR;",
        '  node [shape=box, style="rounded,filled"];',
    ]
    for node in dag.get("nodes", []):
        label = _dot_text(f"{node['name']}\n{node['type']} · {node['status']}")
        fill = STATUS_FILLS.get(node["status"], "#ffffff")
        lines.append(f'  {_dot_text(node["id"])} [label={label}, fillcolor="{fill}"];')
    for edge in dag.get("edges", []):
        lines.append(f"  {_dot_text(edge['source_id'])} -> {_dot_text(edge['target_id'])};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _dot_text(text: str) -> str:
    """A DOT quoted string: backslashes and quotes escaped, line breaks as DOT's centred line break."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\r", "")
    return '"' + escaped.replace("\n", "\\n") + '"'


# ---------------------------------------------------------------- tasks, runs


def task_tree(tasks: dict[str, Any]) -> Tree:
    tree = Tree(f"[bold]Tasks[/] [dim]{tasks.get('canvas_id', '')}[/]")

    def add(parent: Tree, task: dict[str, Any]) -> None:
        branch = parent.add(f"{escape(task['name'])} [dim]{escape(task['task_type'])}[/] {_status(task['status'])}")
        for child in task.get("children", []):
            add(branch, child)

    for task in [*tasks.get("completed", []), *tasks.get("not_completed", [])]:
        add(tree, task)
    return tree


def run_table(run: dict[str, Any]) -> Table:
    """A run's status, at a glance (`canvas status`)."""
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    table.add_row("run", run["run_id"])
    table.add_row("status", _status(run["status"]))
    if run.get("awaiting_approval"):
        table.add_row("review", f"waiting for approval: canvas approve {run['run_id']}, or canvas cancel")
    if "estimated_credits" in run:
        table.add_row("estimate", f"{run['estimated_credits']} credits")
    table.add_row("canvas", run.get("canvas_id", ""))
    table.add_row("prompt", escape(_clip(run.get("prompt", ""), 200)))
    if progress := run.get("progress"):
        table.add_row("tasks", f"{progress['tasks_completed']}/{progress['tasks_total']}")
        table.add_row("elapsed", clock(progress["elapsed_ms"]))
    if "duration_ms" in run:
        table.add_row("duration", clock(run["duration_ms"]))
    if metadata := run.get("metadata"):
        table.add_row("template", escape(metadata.get("template_used", "")))
        table.add_row("credits", str(metadata.get("credits_consumed", 0)))
    for artifact in (run.get("result") or {}).get("artifacts", []):
        table.add_row("artifact", f"{escape(artifact['name'])} [dim]({size(artifact['size_bytes'])})[/]")
    for error in run.get("errors", []):
        table.add_row("[red]error[/]", escape(error["error"]))
    return table


# Widths of the runs listing's fixed columns: a minute in UTC, the longest status and template, a whole run id (so
# that it can be pasted into `canvas status` and the rest). Together with two spaces between them: 80 columns.
RUN_COLUMNS = (("created (UTC)", 16), ("status", 9), ("template", 13), ("run", 36))


def runs_table(page: dict[str, Any], width: int = 80) -> RenderableType:
    """A page of runs. From 120 columns, one line a run with its prompt; narrower, the prompt goes on a line of its
    own under the run, indented; under 80 columns, the run id too. Every id is shown whole."""
    if width >= 120:
        table = Table(box=None, header_style="bold", pad_edge=False, padding=(0, 2, 0, 0))
        for name, column_width in RUN_COLUMNS:
            table.add_column(name, no_wrap=True, min_width=column_width, max_width=column_width)
        table.add_column("prompt", no_wrap=True, overflow="ellipsis", ratio=1)
        for run in page.get("runs", []):
            prompt = Text(_clip(run.get("prompt", ""), 200), style="dim", no_wrap=True, overflow="ellipsis")
            if note := _rerun_note(run):
                prompt = Text.assemble((note + " ", "cyan"), prompt, no_wrap=True, overflow="ellipsis")
            table.add_row(*_run_fields(run), prompt)
        return table
    fields = RUN_COLUMNS if width >= 80 else RUN_COLUMNS[:3]
    lines = [Text("  ".join(name.ljust(w) for name, w in fields).rstrip(), style="bold")]
    for run in page.get("runs", []):
        cells = _run_fields(run)
        line = Text()
        for (_, column_width), cell in zip(fields, cells, strict=False):
            text = Text.from_markup(cell)
            line.append_text(text)
            line.append(" " * (column_width - len(text.plain) + 2))
        line.rstrip()
        lines.append(line)
        if width < 80:
            lines.append(Text("  " + run["run_id"]))
        if note := _rerun_note(run):
            lines.append(Text("  " + note, style="cyan"))
        lines.append(Text("  " + _clip(run.get("prompt", ""), max(width - 2, 10)), style="dim"))
    return Group(*lines)


def _run_fields(run: dict[str, Any]) -> list[str]:
    return [
        run["created_at"].replace("T", " ")[:16],
        _status(run["status"]),
        escape(run.get("template_used", "")),
        run["run_id"],
    ]


def _rerun_note(run: dict[str, Any]) -> str:
    """ "re-run of <run> block <block>" for a re-run, so that it does not read as a copy of the run it re-ran."""
    source = run.get("rerun_of")
    return f"re-run of {source['run_id']} block {source['block_id']}" if source else ""


def _clip(text: str, length: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= length else flat[: length - 1] + "…"


def clock(ms: int | float) -> str:
    seconds = int(ms // 1000)
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def size(count: int) -> str:
    value = float(count)
    for unit in ("B", "kB", "MB"):
        if value < 1000 or unit == "MB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    raise AssertionError("unreachable")
