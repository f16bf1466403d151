"""The service as MCP tools, defined once over a CanvasBackend: each tool's input and output have a JSON schema, its
`structuredContent` is the REST API's `data` and its text a short line for the model; a refusal is a tool result
with `isError: true` and the contract's message, never a protocol error. A run's files are links to their download
URLs, and text ones also resources (`canvas://runs/{run_id}/artifacts/{artifact_id}.html`, ...) a client can read."""

import base64
import binascii
import time
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, ContentBlock, ResourceLink, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

from canvas_core.errors import ServiceBusyError, ServiceError, StorageBusyError
from canvas_core.mcp.backend import CanvasBackend, CreateRunIn, UploadIn
from canvas_core.models.api import (
    CanvasDagResponse,
    CreateRunResponse,
    ListRunsResponse,
    RunStatusResponse,
    TaskTreeResponse,
)
from canvas_core.models.catalog import Template

SERVER_NAME = "canvas-run-service"
INSTRUCTIONS = (
    "Canvas Run Service: asynchronous multi-agent research runs that end with an answer and files. Start one with "
    "create_run, follow it with wait_for_run (or get_run), read its files from the links or resources it lists, "
    "re-run one block with rerun_block; a run created with review=true waits for approve_run or cancel_run."
)
TERMINAL_STATUSES = frozenset({"completed", "partial", "failed"})
# The formats whose files are also readable as resources (their bytes are UTF-8 text).
TEXT_ARTIFACT_TYPES = {
    "html": "text/html",
    "md": "text/markdown",
    "csv": "text/csv",
    "txt": "text/plain",
    "json": "application/json",
}
ARTIFACT_URI = "canvas://runs/{run_id}/artifacts/{artifact_id}.{extension}"
WAIT_POLL_SECONDS = 2.0
# The answer's final output is quoted whole up to this length; the whole is always in structuredContent.
ANSWER_EXCERPT_CHARS = 4000

RunId = Annotated[str, Field(description="The run_id create_run answered (a UUID)")]
CanvasId = Annotated[str, Field(description="The canvas_id a run reports (a UUID)")]


class FileIn(BaseModel):
    name: str = Field(description="The file name; its extension says the type (csv, pdf, docx, xlsx, png, md, ...)")
    content_base64: str = Field(description="The file's bytes, base64-encoded")


class CanvasView(BaseModel):
    """A run's canvas: the DAG of its blocks (GET /v1/canvas/{canvas_id}/dag) and its task tree (.../tasks)."""

    run_id: str
    canvas_id: str
    dag: CanvasDagResponse
    tasks: TaskTreeResponse


def create_server(backend_for: Callable[[], CanvasBackend], *, max_wait_seconds: float) -> MCPServer:
    """The MCP server: its tools call `backend_for()`, the caller's backend. A wait lasts at most `max_wait_seconds`
    (what the transport allows a request: API Gateway ends one after 29 s, stdio has no limit)."""
    server: MCPServer = MCPServer(SERVER_NAME, instructions=INSTRUCTIONS, subscriptions=False)

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, open_world_hint=True))
    async def create_run(
        prompt: Annotated[str, Field(description="What the agents are to do")],
        template: Annotated[
            Template | None, Field(description="What the run makes (default auto); ignored when blocks is given")
        ] = None,
        blocks: Annotated[
            list[str] | None,
            Field(description='Block types the run may use, e.g. ["prompt-block","table-block"]; overrides template'),
        ] = None,
        instructions: Annotated[
            str | None, Field(description="Guidance for every agent: tone, rigor, audience, citations")
        ] = None,
        review: Annotated[
            bool, Field(description="Plan, then wait for approve_run (or cancel_run) before any block runs")
        ] = False,
        files: Annotated[
            list[FileIn] | None,
            Field(description="Files for the run: at most 10, 4 MiB each and 4 MiB in all (before base64)"),
        ] = None,
    ) -> Annotated[CallToolResult, CreateRunResponse]:
        """Start a run: agents plan a canvas of blocks for the prompt and run it. Answers at once with the run's
        ids; follow it with wait_for_run or get_run."""
        uploads = []
        for file in files or []:
            try:
                data = base64.b64decode(file.content_base64, validate=True)
            except (binascii.Error, ValueError):
                return _refused(f"File {file.name}: content_base64 is not valid base64")
            uploads.append(UploadIn(name=file.name, data=data))
        request = CreateRunIn(
            prompt=prompt,
            template=template.value if template else None,
            blocks=blocks,
            instructions=instructions,
            review=review,
            files=tuple(uploads),
        )
        return await _answer(lambda: backend_for().create_run(request), _started)

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def get_run(run_id: RunId) -> Annotated[CallToolResult, RunStatusResponse]:
        """A run's status: its progress while running; its answer, files, credits and errors once ended."""
        return await _answer(lambda: backend_for().get_run(run_id), _run_content)

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def wait_for_run(
        run_id: RunId,
        timeout_seconds: Annotated[
            float, Field(ge=1, description=f"How long to wait at most (capped at {max_wait_seconds:g})")
        ] = max_wait_seconds,
        ctx: Context | None = None,
    ) -> Annotated[CallToolResult, RunStatusResponse]:
        """Wait until a run has ended, or the timeout has passed, and answer its status as get_run does. Reports
        progress (tasks done of tasks planned) when the client asks for it."""
        backend = backend_for()
        deadline = time.monotonic() + min(timeout_seconds, max_wait_seconds)
        reported = _Reported(ctx)
        while True:
            try:
                run = await _call(lambda: backend.get_run(run_id))
            except ServiceError as refused:
                return _refused(refused.message)
            await reported.progress(run)
            if run["status"] in TERMINAL_STATUSES or time.monotonic() + WAIT_POLL_SECONDS > deadline:
                return _result(run, _run_content(run))
            await anyio.sleep(WAIT_POLL_SECONDS)

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def list_runs(
        limit: Annotated[int, Field(ge=1, le=100, description="Runs per page")] = 20,
        cursor: Annotated[str | None, Field(description="The previous page's next_cursor")] = None,
    ) -> Annotated[CallToolResult, ListRunsResponse]:
        """The caller's runs, newest first, a page at a time."""
        return await _answer(lambda: backend_for().list_runs(limit, cursor), _listed)

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def get_canvas(run_id: RunId) -> Annotated[CallToolResult, CanvasView]:
        """A run's canvas: its blocks and their edges (the DAG), and its task tree (parent, persona, tool-call)."""

        def canvas() -> dict[str, Any]:
            backend = backend_for()
            canvas_id = backend.get_run(run_id)["canvas_id"]
            return {
                "run_id": run_id,
                "canvas_id": canvas_id,
                "dag": backend.get_dag(canvas_id),
                "tasks": backend.get_tasks(canvas_id),
            }

        return await _answer(canvas, _canvas_content)

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, open_world_hint=True))
    async def rerun_block(
        canvas_id: CanvasId,
        block_id: Annotated[str, Field(description="The id of a block of that canvas (a DAG node's id)")],
        instructions: Annotated[str | None, Field(description="The block's new instructions")] = None,
    ) -> Annotated[CallToolResult, CreateRunResponse]:
        """Run one block of an ended run again, with new instructions, and every block that reads it, in a new run
        that reuses the other blocks unpaid. Answers as create_run."""
        return await _answer(lambda: backend_for().rerun_block(canvas_id, block_id, instructions), _started)

    @server.tool(annotations=ToolAnnotations(read_only_hint=False))
    async def approve_run(
        run_id: RunId,
        instructions: Annotated[
            dict[str, str] | None, Field(description="New instructions for planned blocks, by block id")
        ] = None,
    ) -> Annotated[CallToolResult, RunStatusResponse]:
        """Let a run created with review=true, waiting with its plan, go on."""
        return await _answer(lambda: backend_for().approve_run(run_id, instructions or {}), _run_content)

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True))
    async def cancel_run(run_id: RunId) -> Annotated[CallToolResult, RunStatusResponse]:
        """End a running run: blocks not started never start and are not charged."""
        return await _answer(lambda: backend_for().cancel_run(run_id), _run_content)

    for extension, mime_type in TEXT_ARTIFACT_TYPES.items():
        # One template per format, so that a read answers with the file's MIME type.
        server.resource(
            ARTIFACT_URI.replace("{extension}", extension),
            name=f"{extension}-artifact",
            description=f"A {extension} file a run made, as text",
            mime_type=mime_type,
        )(_artifact_reader(backend_for))
    return server


def _artifact_reader(backend_for: Callable[[], CanvasBackend]) -> Callable[[str, str], Awaitable[str]]:
    async def artifact(run_id: str, artifact_id: str) -> str:
        file = await _call(lambda: backend_for().read_artifact(run_id, artifact_id))
        return file.data.decode("utf-8", errors="replace")

    return artifact


class _Reported:
    """A wait's progress notifications (the SDK sends none unless the call carried a progressToken): tasks done of
    tasks planned, each time more are done, and the whole once the run has ended; MCP wants each value greater than
    the last."""

    def __init__(self, ctx: Context | None):
        self.ctx = ctx
        self.done = 0.0
        self.total = 0.0

    async def progress(self, run: dict[str, Any]) -> None:
        if self.ctx is None:
            return
        counts = run.get("progress") or {}
        self.total = float(counts.get("tasks_total") or self.total)
        if run["status"] in TERMINAL_STATUSES:
            # An ended run reports no counts: its end is the whole of what was planned.
            done = max(self.total, 1.0)
            self.total = done
        else:
            done = float(counts.get("tasks_completed") or 0)
        if done > self.done:
            self.done = done
            await self.ctx.report_progress(
                done, self.total or None, f"{run['status']}: {done:g} of {self.total:g} tasks"
            )


async def _call[T](operation: Callable[[], T]) -> T:
    """The backend's calls block (boto3, httpx): a worker thread keeps the server's loop free for its messages."""
    try:
        return await anyio.to_thread.run_sync(operation)
    except StorageBusyError:
        raise ServiceBusyError() from None


async def _answer(
    operation: Callable[[], dict[str, Any]], content: Callable[[dict[str, Any]], list[ContentBlock]]
) -> CallToolResult:
    try:
        data = await _call(operation)
    except ServiceError as refused:
        return _refused(refused.message)
    return _result(data, content(data))


def _result(data: dict[str, Any], content: list[ContentBlock]) -> CallToolResult:
    return CallToolResult(content=content, structured_content=data)


def _refused(message: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)


def _text(text: str) -> TextContent:
    return TextContent(type="text", text=text)


def _started(data: dict[str, Any]) -> list[ContentBlock]:
    seconds = round(data.get("estimated_duration_ms", 0) / 1000)
    return [
        _text(
            f"Run {data['run_id']} started (canvas {data['canvas_id']}), about {seconds} s; "
            "follow it with wait_for_run."
        )
    ]


def _run_content(run: dict[str, Any]) -> list[ContentBlock]:
    status = run["status"]
    lines = [f"Run {run['run_id']} is {status}."]
    if run.get("awaiting_approval"):
        lines.append(
            f"It waits for approval of its plan ({run.get('estimated_credits', 0)} credits estimated): "
            "approve_run or cancel_run."
        )
    progress = run.get("progress")
    if status == "running" and progress:
        lines.append(f"{progress['tasks_completed']} of {progress['tasks_total']} tasks done.")
    metadata = run.get("metadata")
    if metadata:
        lines.append(f"It took {run.get('duration_ms', 0) / 1000:.1f} s and {metadata['credits_consumed']} credits.")
    lines += [f"Error: {error['error']}" for error in run.get("errors") or []]
    result = run.get("result") or {}
    answer = result.get("final_output") or ""
    if answer:
        cut = answer if len(answer) <= ANSWER_EXCERPT_CHARS else answer[:ANSWER_EXCERPT_CHARS] + " [...]"
        lines += ["", cut]
    content: list[ContentBlock] = [_text("\n".join(lines))]
    for artifact in result.get("artifacts") or []:
        content += _artifact_links(run["run_id"], artifact)
    return content


def _artifact_links(run_id: str, artifact: dict[str, Any]) -> list[ContentBlock]:
    """A link to the file's download URL; for a text format, also a link to the resource that reads it."""
    mime_type = TEXT_ARTIFACT_TYPES.get(artifact["type"])
    links: list[ContentBlock] = [
        ResourceLink(
            type="resource_link",
            uri=artifact["download_url"],
            name=artifact["name"],
            description=f"Download {artifact['name']} (a link that expires)",
            mime_type=mime_type,
            size=artifact["size_bytes"],
        )
    ]
    if mime_type:
        links.append(
            ResourceLink(
                type="resource_link",
                uri=ARTIFACT_URI.format(run_id=run_id, artifact_id=artifact["id"], extension=artifact["type"]),
                name=artifact["name"],
                description=f"Read {artifact['name']} as text",
                mime_type=mime_type,
                size=artifact["size_bytes"],
            )
        )
    return links


def _listed(data: dict[str, Any]) -> list[ContentBlock]:
    runs = data.get("runs") or []
    lines = [f"{len(runs)} runs" + (", more with next_cursor." if data.get("next_cursor") else ".")]
    lines += [f"{run['run_id']} {run['status']} {run['created_at']} {run['prompt'][:80]}" for run in runs]
    return [_text("\n".join(lines))]


def _canvas_content(data: dict[str, Any]) -> list[ContentBlock]:
    nodes = data["dag"]["nodes"]
    lines = [f"Canvas {data['canvas_id']} of run {data['run_id']}: {len(nodes)} blocks."]
    lines += [f"{node['id']} {node['type']} {node['status']}: {node['name']}" for node in nodes]
    return [_text("\n".join(lines))]
