"""What the MCP tools call: the service's operations, answered as the REST API's `data`. Two implementations: the
domain functions in-process, for the account a request authenticated (canvas_core.mcp.domain, the MCP Lambda), and
the REST API over HTTP with the caller's key (canvas_local.client.mcp, `canvas mcp`). A refusal is a ServiceError
carrying the contract's message, whichever side refused."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class UploadIn:
    """A file sent with a run: its name and its bytes (the tool decoded them from base64)."""

    name: str
    data: bytes


@dataclass(frozen=True)
class CreateRunIn:
    prompt: str
    template: str | None = None
    blocks: list[str] | None = None
    instructions: str | None = None
    review: bool = False
    files: tuple[UploadIn, ...] = ()


@dataclass(frozen=True)
class ArtifactFile:
    name: str
    type: str
    data: bytes


class CanvasBackend(Protocol):
    def create_run(self, request: CreateRunIn) -> dict[str, Any]: ...

    def get_run(self, run_id: str) -> dict[str, Any]: ...

    def list_runs(self, limit: int, cursor: str | None) -> dict[str, Any]: ...

    def get_dag(self, canvas_id: str) -> dict[str, Any]: ...

    def get_tasks(self, canvas_id: str) -> dict[str, Any]: ...

    def rerun_block(self, canvas_id: str, block_id: str, instructions: str | None) -> dict[str, Any]: ...

    def approve_run(self, run_id: str, instructions: dict[str, str]) -> dict[str, Any]: ...

    def cancel_run(self, run_id: str) -> dict[str, Any]: ...

    def read_artifact(self, run_id: str, artifact_id: str) -> ArtifactFile: ...
