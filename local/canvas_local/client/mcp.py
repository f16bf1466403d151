"""`canvas mcp`: the service's MCP tools (canvas_core.mcp.tools) on stdio for a local agent, each calling the REST
API of a deployment with the caller's key, as the other client commands do. What the service refuses is the tool's
refusal, with the service's message."""

from __future__ import annotations

import logging
import mimetypes
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from canvas_core.errors import ServiceError
from canvas_core.mcp.backend import ArtifactFile, CreateRunIn
from canvas_core.mcp.tools import create_server
from canvas_local.client.http import ApiError, CanvasClient, CanvasError

# A wait on stdio is held by nothing but the client: an hour, as long as one tool call should reasonably take.
MAX_WAIT_SECONDS = 3600.0


def serve_stdio(client: CanvasClient) -> None:
    # httpx logs every request at INFO, download URLs and their signatures included; stdout is the protocol's.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    backend = HttpBackend(client)
    create_server(lambda: backend, max_wait_seconds=MAX_WAIT_SECONDS).run("stdio")


class HttpBackend:
    def __init__(self, client: CanvasClient):
        self.client = client

    def create_run(self, request: CreateRunIn) -> dict[str, Any]:
        files = [(f.name, f.data, mimetypes.guess_type(f.name)[0] or "application/octet-stream") for f in request.files]
        return _refusing(
            lambda: self.client.create_run(
                request.prompt,
                template=request.template,
                blocks=request.blocks,
                instructions=request.instructions,
                files=files,
                # One key per tool call: the client's retries of it start one run.
                idempotency_key=str(uuid.uuid4()),
                review=request.review,
            )
        )

    def get_run(self, run_id: str) -> dict[str, Any]:
        return _refusing(lambda: self.client.get_run(run_id))

    def list_runs(self, limit: int, cursor: str | None) -> dict[str, Any]:
        return _refusing(lambda: self.client.list_runs(limit, cursor))

    def get_dag(self, canvas_id: str) -> dict[str, Any]:
        return _refusing(lambda: self.client.get_dag(canvas_id))

    def get_tasks(self, canvas_id: str) -> dict[str, Any]:
        return _refusing(lambda: self.client.get_tasks(canvas_id))

    def rerun_block(self, canvas_id: str, block_id: str, instructions: str | None) -> dict[str, Any]:
        return _refusing(
            lambda: self.client.rerun_block(canvas_id, block_id, instructions, idempotency_key=str(uuid.uuid4()))
        )

    def approve_run(self, run_id: str, instructions: dict[str, str]) -> dict[str, Any]:
        return _refusing(lambda: self.client.approve_run(run_id, instructions))

    def cancel_run(self, run_id: str) -> dict[str, Any]:
        return _refusing(lambda: self.client.cancel_run(run_id))

    def read_artifact(self, run_id: str, artifact_id: str) -> ArtifactFile:
        run = self.get_run(run_id)
        artifacts = (run.get("result") or {}).get("artifacts") or []
        artifact = next((a for a in artifacts if a["id"] == artifact_id), None)
        if artifact is None:
            raise ServiceError(f"Artifact not found: {artifact_id}")
        with _refusals():
            data = self.client.fetch(artifact["download_url"])
        return ArtifactFile(name=artifact["name"], type=artifact["type"], data=data)


def _refusing(call: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    with _refusals():
        return call()


@contextmanager
def _refusals() -> Iterator[None]:
    """The service's error answer as the ServiceError the tools report, with its status and message."""
    try:
        yield
    except ApiError as refused:
        error = ServiceError(refused.message)
        error.status_code = refused.status
        raise error from None
    except CanvasError as failed:
        raise ServiceError(str(failed)) from None
