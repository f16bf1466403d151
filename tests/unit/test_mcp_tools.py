"""The MCP tools over an in-memory backend, through the SDK's in-process client: what a result holds (the REST data,
a line for the model, links to files), how a refusal reads, and the remote endpoint's key check."""

from __future__ import annotations

import base64
import json
from typing import Any

import anyio
import pytest
from mcp import Client

from canvas_core.errors import RunNotFoundError, ServiceError
from canvas_core.mcp.backend import ArtifactFile, CreateRunIn
from canvas_core.mcp.remote import answer
from canvas_core.mcp.tools import create_server

pytestmark = pytest.mark.unit

RUN_ID = "6f1c2a0e-3b7d-4c55-9a0e-2f4b8d1c7e90"
ARTIFACT_ID = "8c1d0f2e-5b7a-4c39-9e61-0a2b3c4d5e6f"
PAGE = "<!DOCTYPE html><title>Tide pools</title>"
ENDED_RUN = {
    "run_id": RUN_ID,
    "status": "completed",
    "canvas_id": "3f0c6a52-5b1e-4d8a-9c2f-7e4b1a6d9e01",
    "prompt": "A page on tide pools",
    "template": "landing_page",
    "duration_ms": 8100,
    "metadata": {"template_used": "landing_page", "models_used": [], "credits_consumed": 42},
    "errors": [],
    "result": {
        "final_output": "Tide pools hold life between the tides.",
        "artifacts": [
            {
                "id": ARTIFACT_ID,
                "type": "html",
                "name": "tide-pools.html",
                "download_url": "https://files.example/tide-pools.html?sig=1",
                "size_bytes": len(PAGE),
            }
        ],
    },
}


class FakeBackend:
    def __init__(self) -> None:
        self.created: list[CreateRunIn] = []

    def create_run(self, request: CreateRunIn) -> dict[str, Any]:
        self.created.append(request)
        return {"run_id": RUN_ID, "status": "running", "poll_url": f"/v1/run/{RUN_ID}", "estimated_duration_ms": 9000,
                "canvas_id": ENDED_RUN["canvas_id"]}  # fmt: skip

    def get_run(self, run_id: str) -> dict[str, Any]:
        if run_id != RUN_ID:
            raise RunNotFoundError(run_id)
        return ENDED_RUN

    def read_artifact(self, run_id: str, artifact_id: str) -> ArtifactFile:
        return ArtifactFile(name="tide-pools.html", type="html", data=PAGE.encode())

    def cancel_run(self, run_id: str) -> dict[str, Any]:
        raise ServiceError("The run has ended (completed); only a running run can be cancelled")


def call(backend: FakeBackend, tool: str, arguments: dict[str, Any]) -> Any:
    async def run() -> Any:
        async with Client(create_server(lambda: backend, max_wait_seconds=5)) as client:
            return await client.call_tool(tool, arguments)

    return anyio.run(run)


def test_an_ended_run_is_its_rest_data_a_line_with_its_answer_and_links_to_its_files():
    # When
    result = call(FakeBackend(), "get_run", {"run_id": RUN_ID})

    # Then
    assert not result.is_error
    assert result.structured_content == ENDED_RUN
    text, download, readable = result.content
    assert text.text.startswith(f"Run {RUN_ID} is completed.\nIt took 8.1 s and 42 credits.")
    assert "Tide pools hold life between the tides." in text.text
    assert (download.uri, download.mime_type) == ("https://files.example/tide-pools.html?sig=1", "text/html")
    assert str(readable.uri) == f"canvas://runs/{RUN_ID}/artifacts/{ARTIFACT_ID}.html"


class RunningThenEnded(FakeBackend):
    """A run polled three times: 1 of 3 tasks done, again 1 of 3, then ended."""

    def __init__(self) -> None:
        super().__init__()
        self.polls = [
            {**ENDED_RUN, "status": "running", "progress": {"tasks_completed": 1, "tasks_total": 3, "elapsed_ms": 1}},
            {**ENDED_RUN, "status": "running", "progress": {"tasks_completed": 1, "tasks_total": 3, "elapsed_ms": 2}},
            ENDED_RUN,
        ]

    def get_run(self, run_id: str) -> dict[str, Any]:
        return self.polls.pop(0) if len(self.polls) > 1 else self.polls[0]


def test_a_wait_reports_progress_when_asked_each_value_greater_than_the_last(monkeypatch):
    monkeypatch.setattr("canvas_core.mcp.tools.WAIT_POLL_SECONDS", 0.01)
    notified: list[tuple[float, float | None, str | None]] = []

    async def run() -> Any:
        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            notified.append((done, total, message))

        async with Client(create_server(RunningThenEnded, max_wait_seconds=5)) as client:
            return await client.call_tool("wait_for_run", {"run_id": RUN_ID}, progress_callback=on_progress)

    result = anyio.run(run)

    assert result.structured_content["status"] == "completed"
    assert notified == [(1.0, 3.0, "running: 1 of 3 tasks"), (3.0, 3.0, "completed: 3 of 3 tasks")]


def test_a_text_file_reads_as_a_resource_with_its_mime_type():
    async def run() -> Any:
        async with Client(create_server(FakeBackend, max_wait_seconds=5)) as client:
            return await client.read_resource(f"canvas://runs/{RUN_ID}/artifacts/{ARTIFACT_ID}.html")

    [content] = anyio.run(run).contents
    assert (content.mime_type, content.text) == ("text/html", PAGE)


def test_files_are_decoded_before_the_backend_sees_them_and_bad_base64_is_refused():
    backend = FakeBackend()
    files = [{"name": "a.csv", "content_base64": base64.b64encode(b"x,y\n1,2\n").decode()}]

    created = call(backend, "create_run", {"prompt": "Sum y", "files": files, "review": True})
    refused = call(backend, "create_run", {"prompt": "Sum y", "files": [{"name": "b.csv", "content_base64": "a$b"}]})

    assert created.structured_content["run_id"] == RUN_ID
    assert [(f.name, f.data) for f in backend.created[0].files] == [("a.csv", b"x,y\n1,2\n")]
    assert backend.created[0].review is True
    assert refused.is_error and refused.content[0].text == "File b.csv: content_base64 is not valid base64"
    assert len(backend.created) == 1


@pytest.mark.parametrize(
    ("tool", "arguments", "message"),
    [
        (
            "get_run",
            {"run_id": "6f1c2a0e-0000-4c55-9a0e-2f4b8d1c7e90"},
            "Run not found: 6f1c2a0e-0000-4c55-9a0e-2f4b8d1c7e90",
        ),
        ("cancel_run", {"run_id": RUN_ID}, "The run has ended (completed); only a running run can be cancelled"),
        ("no_such_tool", {}, "Unknown tool: no_such_tool"),
    ],
)
def test_a_refusal_is_a_tool_error_with_the_services_message(tool, arguments, message):
    result = call(FakeBackend(), tool, arguments)

    assert result.is_error
    assert result.content[0].text == message


@pytest.mark.parametrize(
    ("headers", "error"),
    [
        ({}, "X-API-KEY header required"),
        ({"Authorization": "Basic abc"}, "X-API-KEY header required"),
        ({"Authorization": "Bearer  "}, "X-API-KEY header required"),
    ],
)
def test_the_remote_endpoint_answers_401_in_the_contracts_shape_without_a_key(headers, error):
    event = {"httpMethod": "POST", "path": "/mcp", "headers": headers, "body": "{}"}

    response = answer(create_server(FakeBackend, max_wait_seconds=5), event, lambda account: FakeBackend())

    assert response["statusCode"] == 401
    assert json.loads(response["body"]) == {"success": False, "error": error}
