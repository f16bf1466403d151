"""`canvas run`, `rerun`, `status`, `wait`, `download`, `runs`, `dag`, `tasks`,
`approve` and `cancel`: the service from a terminal; and `canvas mcp`, the same service as MCP tools for an agent.

They talk to `--base-url` (else `CANVAS_BASE_URL`, else http://127.0.0.1:3000, where `canvas serve` listens) with
`--api-key` (else `CANVAS_API_KEY`). Answers go to standard output; progress, saved files and errors to
standard error, so `canvas run ... > answer.md` keeps the answer alone.

Exit codes: 0 the run completed (for other commands: done), 3 the run ended partial, 4 it failed, 2 a usage error
(a bad option, no API key, a file that cannot be read), 1 any other error: the service could not be reached, or
it answered with an error (401, 402, 404, ...), or a download failed. 130 after Ctrl-C, which leaves the run
running on the service.
"""

from __future__ import annotations

import argparse
import json
import mimetypes
import os
import shlex
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markdown import Markdown
from rich.markup import escape
from rich.table import Table

from canvas_core.models.catalog import BlockType, Template
from canvas_core.prompt_format import ANSWER_SOURCES_MARK
from canvas_local.client.downloads import download_artifact
from canvas_local.client.http import CanvasClient, CanvasError
from canvas_local.client.progress import RunProgress
from canvas_local.client.views import clock, dag_dot, dag_mermaid, dag_tree, run_table, runs_table, size, task_tree

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_PARTIAL = 3
EXIT_FAILED = 4
EXIT_INTERRUPTED = 130
OUTCOME_EXIT = {"completed": EXIT_OK, "partial": EXIT_PARTIAL, "failed": EXIT_FAILED}

DEFAULT_BASE_URL = "http://127.0.0.1:3000"
DAG_FORMATS = ("tree", "json", "mermaid", "dot")

Command = Callable[[argparse.Namespace], int]


class UsageError(Exception):
    """The command line asks for something that cannot be done; nothing was sent."""


# ---------------------------------------------------------------- the command line


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the client commands to the `canvas` parser; each sets `client_command`, what `main` runs."""
    service = argparse.ArgumentParser(add_help=False)
    service.add_argument(
        "--base-url", metavar="URL", help=f"the service (default: $CANVAS_BASE_URL, else {DEFAULT_BASE_URL})"
    )
    service.add_argument("--api-key", metavar="KEY", help="the API key (default: $CANVAS_API_KEY)")
    follow = argparse.ArgumentParser(add_help=False)
    follow.add_argument(
        "--out", type=Path, default=Path("."), metavar="DIR", help="where artifacts are saved (default: here)"
    )
    follow.add_argument("--json", action="store_true", help="print the final run status as JSON, without progress")

    run = commands.add_parser(
        "run", parents=[service, follow], help="start a run, show its progress, print its answer and save its files"
    )
    run.add_argument("prompt", help='what the agents are to do ("-" reads it from standard input)')
    run.add_argument("--template", choices=[t.value for t in Template], help="default: auto")
    run.add_argument(
        "--blocks", type=_block_types, metavar="A,B", help="block types the agents may use, e.g. prompt,text"
    )
    run.add_argument(
        "--file", dest="files", type=Path, action="append", default=[], metavar="F", help="upload F (repeatable)"
    )
    run.add_argument("--instructions", metavar="TEXT", help="behavioural guidance for the agents")
    run.add_argument("--no-wait", action="store_true", help="print the run id and return once the run has started")
    run.add_argument(
        "--review",
        action="store_true",
        help="plan the run, print its blocks and estimated credits, and ask before any block runs",
    )
    run.add_argument("--yes", action="store_true", help="with --review: approve the plan without asking")
    run.set_defaults(client_command=_guarded(run_run))

    approve = commands.add_parser(
        "approve", parents=[service], help="let a run created with --review (review=true) go on from its plan"
    )
    approve.add_argument("run_id", type=_uuid)
    approve.add_argument(
        "--instructions",
        dest="block_instructions",
        type=_block_instructions,
        action="append",
        default=[],
        metavar="BLOCK_ID=TEXT",
        help="new instructions for a planned block (repeatable)",
    )
    approve.set_defaults(client_command=_guarded(approve_run))

    cancel = commands.add_parser(
        "cancel", parents=[service], help="end a running run; blocks not started never run and are not charged"
    )
    cancel.add_argument("run_id", type=_uuid)
    cancel.set_defaults(client_command=_guarded(cancel_run))

    rerun = commands.add_parser(
        "rerun",
        parents=[service, follow],
        help="run a block of a finished run's canvas again, with what depends on it, and follow the new run",
    )
    rerun.add_argument("canvas_id", type=_uuid, help="the canvas of a run that has ended")
    rerun.add_argument("block_id", type=_uuid, help="the block to run again (its id: canvas dag --format json)")
    rerun.add_argument("--instructions", metavar="TEXT", help="the block's new instructions (default: its own)")
    rerun.add_argument("--no-wait", action="store_true", help="print the run id and return once the run has started")
    rerun.set_defaults(client_command=_guarded(rerun_block))

    wait = commands.add_parser(
        "wait", parents=[service, follow], help="follow a run to its end, print its answer and save its files"
    )
    wait.add_argument("run_id", type=_uuid)
    wait.set_defaults(client_command=_guarded(wait_run))

    status = commands.add_parser("status", parents=[service], help="a run's status")
    status.add_argument("run_id", type=_uuid)
    status.add_argument("--json", action="store_true")
    status.set_defaults(client_command=_guarded(show_status))

    download = commands.add_parser("download", parents=[service], help="save a finished run's artifacts")
    download.add_argument("run_id", type=_uuid)
    download.add_argument("--out", type=Path, default=Path("."), metavar="DIR", help="default: here")
    download.set_defaults(client_command=_guarded(download_run))

    runs = commands.add_parser("runs", parents=[service], help="your runs, newest first")
    runs.add_argument("--limit", type=_page_size, default=20, metavar="N", help="runs per page, 1 to 100 (20)")
    runs.add_argument("--cursor", help="the page after the one that printed this cursor")
    runs.add_argument("--json", action="store_true")
    runs.set_defaults(client_command=_guarded(list_runs))

    dag = commands.add_parser("dag", parents=[service], help="a canvas's blocks and edges")
    dag.add_argument("canvas_id", type=_uuid)
    dag.add_argument("--format", choices=DAG_FORMATS, default="tree")
    dag.set_defaults(client_command=_guarded(show_dag))

    tasks = commands.add_parser("tasks", parents=[service], help="a canvas's task tree")
    tasks.add_argument("canvas_id", type=_uuid)
    tasks.add_argument("--json", action="store_true")
    tasks.set_defaults(client_command=_guarded(show_tasks))

    mcp = commands.add_parser(
        "mcp",
        parents=[service],
        help="the service's tools for a local agent: an MCP server on standard input and output (docs/mcp.md)",
    )
    mcp.set_defaults(client_command=_guarded(serve_mcp))


def _block_types(text: str) -> list[str]:
    known = {b.value for b in BlockType}
    blocks = [b if b.endswith("-block") else f"{b}-block" for b in (p.strip() for p in text.split(",")) if b]
    unknown = [b for b in blocks if b not in known]
    if not blocks or unknown:
        raise argparse.ArgumentTypeError(
            f"unknown block type {', '.join(unknown) or '(none given)'}; "
            f"known: {', '.join(sorted(b.removesuffix('-block') for b in known))}"
        )
    return blocks


def _block_instructions(text: str) -> tuple[str, str]:
    block_id, equals, instructions = text.partition("=")
    if not equals or not instructions.strip():
        raise argparse.ArgumentTypeError(f"expected BLOCK_ID=TEXT, not {text!r}")
    return _uuid(block_id.strip()), instructions.strip()


def _page_size(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 100:
        raise argparse.ArgumentTypeError(f"must be an integer from 1 to 100, not {text!r}")
    return int(text)


def _uuid(text: str) -> str:
    try:
        return str(uuid.UUID(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a UUID: {text!r}") from None


def _guarded(command: Command) -> Command:
    """The command, with its errors as one line on standard error and an exit code."""

    def run(args: argparse.Namespace) -> int:
        try:
            return command(args)
        except UsageError as exc:
            _say(f"canvas {args.command}: {exc}")
            return EXIT_USAGE
        except CanvasError as exc:
            _say(f"canvas {args.command}: {exc}")
            return EXIT_ERROR
        except KeyboardInterrupt:
            _say(f"canvas {args.command}: interrupted")
            return EXIT_INTERRUPTED

    return run


def _say(line: str) -> None:
    # print, not rich: an error stays one line whatever the terminal's width.
    print(line, file=sys.stderr, flush=True)


def _client(args: argparse.Namespace) -> CanvasClient:
    base_url = args.base_url or os.environ.get("CANVAS_BASE_URL") or DEFAULT_BASE_URL
    api_key = args.api_key or os.environ.get("CANVAS_API_KEY")
    if not api_key:
        raise UsageError("no API key: set CANVAS_API_KEY or pass --api-key")
    if not base_url.startswith(("http://", "https://")):
        raise UsageError(f"the base URL must start with http:// or https://, not {base_url!r}")
    return CanvasClient(base_url, api_key)


# ---------------------------------------------------------------- runs


def serve_mcp(args: argparse.Namespace) -> int:
    """`canvas mcp`: the MCP server on stdio, its tools calling the service at --base-url with --api-key, until the
    client closes standard input. The SDK is imported here: the other commands do without it."""
    from canvas_local.client.mcp import serve_stdio

    with _client(args) as client:
        serve_stdio(client)
    return EXIT_OK


def run_run(args: argparse.Namespace) -> int:
    if args.yes and not args.review:
        raise UsageError("--yes approves a plan: it goes with --review")
    if args.review and args.prompt == "-" and not args.yes:
        raise UsageError("--review asks on standard input, which holds the prompt: pass --yes, or the prompt itself")
    prompt = sys.stdin.read() if args.prompt == "-" else args.prompt
    if not prompt.strip():
        raise UsageError("the prompt is empty")
    _check_uploads(args.files)
    files = [_read_upload(path) for path in args.files]
    _check_out_dir(args.out)
    with _client(args) as client:
        try:
            created = client.create_run(
                prompt,
                template=args.template,
                blocks=args.blocks,
                instructions=args.instructions,
                files=files,
                idempotency_key=str(uuid.uuid4()),
                review=args.review,
            )
        except KeyboardInterrupt:
            _say("\nInterrupted while starting the run; it may have started: see canvas runs")
            return EXIT_INTERRUPTED
        if args.review and not args.no_wait:
            return _review(client, created, args)
        return _started(client, created, args)


def _review(client: CanvasClient, created: dict[str, Any], args: argparse.Namespace) -> int:
    """A run created with review: wait for its plan, print it, approve it (asked, or --yes) and follow the run; a plan
    declined is cancelled, so that nothing more is spent on it."""
    run_id = created["run_id"]
    try:
        run = _last(_until_planned(client.poll_run(run_id)))
        if run.get("awaiting_approval"):
            _print_plan(client.get_dag(run["canvas_id"]), run)
            if not (args.yes or _confirm("Approve this plan and run it?")):
                ended = client.cancel_run(run_id)
                _say(f"Run {run_id} cancelled")
                _print_outcome(ended)
                return OUTCOME_EXIT.get(ended["status"], EXIT_ERROR)
            client.approve_run(run_id)
            _say(f"Run {run_id} approved")
    except KeyboardInterrupt:
        _say(f"\nInterrupted: run {run_id} waits for approval. Approve it with: canvas approve {run_id}")
        return EXIT_INTERRUPTED
    return _follow(client, run_id, args, created.get("estimated_duration_ms"))


def _until_planned(polls: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """The run's polls until it waits for approval or has ended."""
    for run in polls:
        yield run
        if run.get("awaiting_approval"):
            return


def _print_plan(dag: dict[str, Any], run: dict[str, Any]) -> None:
    """The planned blocks, their types and estimated credits, and the total, on standard error."""
    table = Table(title="Plan", title_justify="left", show_edge=False)
    table.add_column("Block")
    table.add_column("Type")
    table.add_column("Credits (est.)", justify="right")
    for node in dag.get("nodes", []):
        table.add_row(escape(node["name"]), node["type"], str(node.get("estimated_credits", "?")))
    console = Console(stderr=True)
    console.print(table)
    console.print(
        f"{len(dag.get('nodes', []))} blocks · estimated {run.get('estimated_credits', 0)} credits", highlight=False
    )


def _confirm(question: str) -> bool:
    _say(f"{question} [y/N] ")
    try:
        answer = sys.stdin.readline()
    except OSError:
        answer = ""
    return answer.strip().lower() in ("y", "yes")


def approve_run(args: argparse.Namespace) -> int:
    with _client(args) as client:
        run = client.approve_run(args.run_id, dict(args.block_instructions))
    _say(f"Run {run['run_id']} approved; follow it with: canvas wait {run['run_id']}")
    return EXIT_OK


def cancel_run(args: argparse.Namespace) -> int:
    with _client(args) as client:
        run = client.cancel_run(args.run_id)
    _say(f"Run {args.run_id} cancelled")
    _print_outcome(run)
    return EXIT_OK


def rerun_block(args: argparse.Namespace) -> int:
    """A new run in which the block, with new instructions, and what depends on it run again; followed as `run`."""
    _check_out_dir(args.out)
    with _client(args) as client:
        try:
            created = client.rerun_block(
                args.canvas_id, args.block_id, args.instructions, idempotency_key=str(uuid.uuid4())
            )
        except KeyboardInterrupt:
            _say("\nInterrupted while starting the re-run; it may have started: see canvas runs")
            return EXIT_INTERRUPTED
        return _started(client, created, args)


def _started(client: CanvasClient, created: dict[str, Any], args: argparse.Namespace) -> int:
    """A run that has just started: its id printed (--no-wait), else followed to its end."""
    run_id = created["run_id"]
    if args.no_wait:
        if args.json:
            print(json.dumps(created, indent=2))
        else:
            print(run_id)
            _say(f"Run started; follow it with: canvas wait {run_id}")
        return EXIT_OK
    return _follow(client, run_id, args, created.get("estimated_duration_ms"))


def wait_run(args: argparse.Namespace) -> int:
    _check_out_dir(args.out)
    with _client(args) as client:
        return _follow(client, args.run_id, args, None)


def _follow(client: CanvasClient, run_id: str, args: argparse.Namespace, estimate_ms: int | None) -> int:
    """Poll the run to its end (with the live bar unless --json), print it, save its artifacts."""
    try:
        run = _last(client.poll_run(run_id)) if args.json else _watch(client, run_id, estimate_ms)
    except KeyboardInterrupt:
        _say(f"\nInterrupted: run {run_id} goes on running on the service. Resume with: {_resume(run_id, args)}")
        return EXIT_INTERRUPTED
    except CanvasError as exc:
        raise CanvasError(f"{exc}; the run goes on: follow it again with {_resume(run_id, args)}") from None
    if args.json:
        print(json.dumps(run, indent=2))
    else:
        _print_outcome(run)
    try:
        _save_artifacts(client, run, args.out)
    except KeyboardInterrupt:
        _say(f"\nInterrupted; save the files with: canvas download {run_id} --out {shlex.quote(str(args.out))}")
        return EXIT_INTERRUPTED
    return OUTCOME_EXIT.get(run["status"], EXIT_ERROR)


def _resume(run_id: str, args: argparse.Namespace) -> str:
    out = f" --out {shlex.quote(str(args.out))}" if args.out != Path(".") else ""
    return f"canvas wait {run_id}{out}"


def _last(polls: Iterator[dict[str, Any]]) -> dict[str, Any]:
    *_, last = polls
    return last


def _watch(client: CanvasClient, run_id: str, estimate_ms: int | None) -> dict[str, Any]:
    """Poll with the live bar on standard error. The DAG (what shows the blocks running) is read again only
    when the run's progress has moved: a block starting or ending changes the task counts."""
    run: dict[str, Any] = {}
    dag: dict[str, Any] | None = None
    seen: tuple[Any, ...] | None = None
    with RunProgress(Console(stderr=True), estimate_ms) as bar:
        for run in client.poll_run(run_id):
            progress = run.get("progress") or {}
            moved = (run["status"], progress.get("tasks_completed"), progress.get("tasks_total"))
            if moved != seen:
                dag, seen = _dag_or(client, run.get("canvas_id"), dag), moved
            bar.update(run, dag)
    return run


def _dag_or(client: CanvasClient, canvas_id: str | None, previous: dict[str, Any] | None) -> dict[str, Any] | None:
    if not canvas_id:
        return previous
    try:
        return client.get_dag(canvas_id)
    except CanvasError:
        return previous  # the bar only loses its block names until the next read; the run is followed all the same


def _print_outcome(run: dict[str, Any]) -> None:
    output = (run.get("result") or {}).get("final_output")
    if output:
        console = Console()
        # Rendered on a terminal; elsewhere (a file, a pipe) the markdown itself, which is what a file wants.
        if console.is_terminal:
            # The sources a line each: markdown would join the lines of the list into one paragraph.
            body, heading, sources = output.rpartition(ANSWER_SOURCES_MARK)
            console.print(Markdown(body if heading else output))
            if heading:
                console.print()
                console.print(heading.strip(), style="bold")
                for line in sources.strip("\n").splitlines():
                    console.print(line, markup=False, highlight=False)
        else:
            print(output.rstrip("\n"))
    err = Console(stderr=True)
    metadata = run.get("metadata") or {}
    summary = f"{run['status'].capitalize()} in {clock(run.get('duration_ms', 0))}"
    if "credits_consumed" in metadata:
        summary += f" · {metadata['credits_consumed']} credits"
    style = {"completed": "green", "partial": "yellow"}.get(run["status"], "red")
    err.print(f"[{style}]{summary}[/]", highlight=False)
    for error in run.get("errors", []):
        where = f"{error['block_type']}: " if error.get("block_type") else ""
        err.print(f"[red]✗[/] {escape(where + error['error'])}", highlight=False)


def _save_artifacts(client: CanvasClient, run: dict[str, Any], out: Path) -> None:
    artifacts = (run.get("result") or {}).get("artifacts", [])
    if artifacts:
        out.mkdir(parents=True, exist_ok=True)
    for artifact in artifacts:
        path = download_artifact(client, artifact, out)
        _say(f"Saved {path} ({size(path.stat().st_size)})")


def _check_uploads(paths: list[Path]) -> None:
    """Refuse, before anything is read or sent, files the service would refuse for their number or size (its
    limits, docs/api.md): a request past them would be sent whole only to be answered 413."""
    from canvas_core.settings.api import ApiSettings

    limits = {
        name: ApiSettings.model_fields[name].default for name in ("max_files", "max_file_bytes", "max_upload_bytes")
    }
    if len(paths) > limits["max_files"]:
        raise UsageError(f"too many files: {len(paths)} (the service takes at most {limits['max_files']})")
    sizes = []
    for path in paths:
        try:
            sizes.append(path.stat().st_size)
        except OSError as exc:
            raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
        if sizes[-1] > limits["max_file_bytes"]:
            raise UsageError(
                f"{path} is {_mib(sizes[-1])}: the service takes files of at most {_mib(limits['max_file_bytes'])}"
            )
    if sum(sizes) > limits["max_upload_bytes"]:
        raise UsageError(
            f"the files are {_mib(sum(sizes))} in all: the service takes at most {_mib(limits['max_upload_bytes'])}"
        )


def _mib(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MiB".replace(".0 MiB", " MiB")


def _read_upload(path: Path) -> tuple[str, bytes, str]:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    return path.name, data, mimetypes.guess_type(path.name)[0] or "application/octet-stream"


def _check_out_dir(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is not a directory")


# ---------------------------------------------------------------- reads


def _show(args: argparse.Namespace, data: dict[str, Any], render: Callable[[dict[str, Any]], Any]) -> int:
    """The answer as JSON with --json, else as `render` draws it."""
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        Console().print(render(data))
    return EXIT_OK


def show_status(args: argparse.Namespace) -> int:
    with _client(args) as client:
        run = client.get_run(args.run_id)
    return _show(args, run, run_table)


def download_run(args: argparse.Namespace) -> int:
    _check_out_dir(args.out)
    with _client(args) as client:
        run = client.get_run(args.run_id)
        if run["status"] == "running":
            raise CanvasError(f"run {args.run_id} is still running; wait for it with: canvas wait {args.run_id}")
        if not (run.get("result") or {}).get("artifacts"):
            _say(f"Run {args.run_id} ({run['status']}) has no artifacts")
            return EXIT_OK
        _save_artifacts(client, run, args.out)
    return EXIT_OK


def list_runs(args: argparse.Namespace) -> int:
    with _client(args) as client:
        page = client.list_runs(limit=args.limit, cursor=args.cursor)
    if args.json:
        print(json.dumps(page, indent=2))
        return EXIT_OK
    if not page.get("runs"):
        _say("No runs")
        return EXIT_OK
    console = Console()
    console.print(runs_table(page, console.width))
    if page.get("next_cursor"):
        # The cursor on a line of its own, after a shell line continuation: an 80-column terminal does not break it.
        _say(f"More: canvas runs --cursor \\\n  {page['next_cursor']}")
    return EXIT_OK


def show_dag(args: argparse.Namespace) -> int:
    with _client(args) as client:
        dag = client.get_dag(args.canvas_id)
    if args.format == "tree":
        Console().print(dag_tree(dag))
    elif args.format == "json":
        print(json.dumps(dag, indent=2))
    else:
        sys.stdout.write(dag_mermaid(dag) if args.format == "mermaid" else dag_dot(dag))
    return EXIT_OK


def show_tasks(args: argparse.Namespace) -> int:
    with _client(args) as client:
        tasks = client.get_tasks(args.canvas_id)
    return _show(args, tasks, task_tree)
