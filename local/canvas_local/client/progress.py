"""The live progress line of a run: the blocks running now, a bar of tasks ended out of tasks known, blocks
ended, time elapsed and the service's estimate.

    ⠼ Running: Gather sources, Outline ━━━━━━━━━━╸━━━━━━━━━ 7/12 tasks · 2/5 blocks · 0:00:41 · est. 0:03:05
"""

from __future__ import annotations

import math
import time
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, ProgressColumn, SpinnerColumn, Task, TextColumn
from rich.text import Text

from canvas_local.client.views import clock

ENDED_NODE_STATUSES = frozenset({"completed", "error", "skipped"})


def elapsed_ms(task: Task) -> float:
    """The run's elapsed time as the service last reported it, counted on between polls."""
    since = task.fields.get("elapsed_at")
    return float(task.fields.get("elapsed_ms", 0)) + ((time.monotonic() - since) * 1000 if since else 0)


class ElapsedColumn(ProgressColumn):
    def render(self, task: Task) -> Text:
        return Text(clock(elapsed_ms(task)), style="progress.elapsed")


class EstimateColumn(ProgressColumn):
    """The service's estimate, rounded up to the second (1.6 s is not "0:00:01"); a running run past it says so,
    rather than showing an estimate its own clock has overtaken."""

    def __init__(self, estimated_duration_ms: int | None):
        super().__init__()
        self.estimate_ms = estimated_duration_ms

    def render(self, task: Task) -> Text:
        if not self.estimate_ms:
            return Text("")
        estimate = clock(math.ceil(self.estimate_ms / 1000) * 1000)
        if task.fields.get("elapsed_at") is not None and elapsed_ms(task) > self.estimate_ms:
            return Text(f"over est. {estimate}", style="yellow")
        return Text(f"est. {estimate}", style="dim")


class RunProgress:
    """A context manager around rich's live Progress; `update()` after each poll."""

    def __init__(self, console: Console, estimated_duration_ms: int | None = None):
        self._progress = Progress(
            SpinnerColumn(finished_text="•"),
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[tasks]}"),
            TextColumn("{task.fields[blocks]}"),
            ElapsedColumn(),
            EstimateColumn(estimated_duration_ms),
            console=console,
            transient=False,
        )
        self._task = self._progress.add_task(
            "Planning", total=None, tasks="", blocks="", elapsed_ms=0, elapsed_at=time.monotonic()
        )

    def __enter__(self) -> RunProgress:
        self._progress.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._progress.stop()

    def update(self, run: dict[str, Any], dag: dict[str, Any] | None) -> None:
        nodes = (dag or {}).get("nodes", [])
        fields: dict[str, Any] = {"description": describe(run, nodes)}
        if progress := run.get("progress"):
            total, done = progress.get("tasks_total") or 0, progress.get("tasks_completed") or 0
            fields |= {"total": total or None, "completed": done, "tasks": f"{done}/{total} tasks" if total else ""}
            fields |= {"elapsed_ms": progress.get("elapsed_ms", 0), "elapsed_at": time.monotonic()}
        if nodes:
            ended = sum(1 for n in nodes if n.get("status") in ENDED_NODE_STATUSES)
            fields["blocks"] = f"{ended}/{len(nodes)} blocks"
        if run.get("status", "running") != "running":
            # An ended run reports no progress: the bar fills, the clock stops at the run's duration.
            total = self._progress.tasks[0].total or 1
            fields |= {"total": total, "completed": total, "tasks": ""}
            fields |= {"elapsed_ms": run.get("duration_ms", 0), "elapsed_at": None}
        self._progress.update(self._task, **fields)


def describe(run: dict[str, Any], nodes: list[dict[str, Any]]) -> str:
    """What the run is doing, from its blocks' statuses: the blocks running, or planning before there are any."""
    status = run.get("status", "running")
    if status != "running":
        return {"completed": "[green]Completed[/]", "partial": "[yellow]Partial[/]"}.get(status, "[red]Failed[/]")
    running = [n["name"] for n in nodes if n.get("status") == "running"]
    if running:
        names = ", ".join(running[:3]) + (f" +{len(running) - 3}" if len(running) > 3 else "")
        return f"Running: {escape(names)}"
    if not nodes:
        return "Planning"
    return "Waiting" if any(n.get("status") == "idle" for n in nodes) else "Finishing"
