"""The service as MCP tools, through clients nobody here wrote: the official Python SDK's client over Streamable HTTP
(POST /mcp) and over stdio (`canvas mcp`), and the TypeScript SDK's client against `canvas serve`. A run with a CSV
is created, waited for, its files read; a block is re-run; a run to review is approved, another cancelled; bad input
is a tool error with the contract's message, and creates nothing."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from tests.e2e.conftest import KEY_A, KEY_B, canvas_serve, poll_until_finished

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

ROOT = Path(__file__).resolve().parents[2]
TOOLS = {"create_run", "get_run", "wait_for_run", "list_runs", "get_canvas", "rerun_block", "approve_run", "cancel_run"}
SALES_CSV = b"month,region,revenue\n2025-01,North,120\n2025-01,South,80\n2025-02,North,150\n2025-02,South,95\n"
# `make mcp-sdk` installs the TypeScript SDK here (the e2e tier depends on it).
MCP_SDK_MODULES = ROOT / ".cache" / "mcp-sdk" / "node_modules"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@asynccontextmanager
async def remote(base_url: str, key: str) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {key}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        Client(streamable_http_client(f"{base_url}/mcp", http_client=http)) as client,
    ):
        yield client


@asynccontextmanager
async def stdio(base_url: str, key: str) -> AsyncIterator[Client]:
    env = {**os.environ, "CANVAS_BASE_URL": base_url, "CANVAS_API_KEY": key}
    params = StdioServerParameters(command=sys.executable, args=["-m", "canvas_local.cli", "mcp"], env=env)
    async with Client(params) as client:
        yield client


async def journey(client: Client, *, progress: list[float]) -> None:
    # Given the tools
    listed = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(listed) >= TOOLS
    assert listed["create_run"].input_schema["required"] == ["prompt"]
    assert "run_id" in listed["get_run"].output_schema["properties"]

    # When a run is created with a CSV, to make a web app from it
    created = await client.call_tool(
        "create_run",
        {
            "prompt": "Build a small app that shows revenue by month and region",
            "template": "app",
            "files": [{"name": "sales.csv", "content_base64": _b64(SALES_CSV)}],
        },
    )
    assert not created.is_error, created.content
    run_id = created.structured_content["run_id"]
    assert created.structured_content["poll_url"] == f"/v1/run/{run_id}"

    # Then waiting ends it, with its answer and its files as links, and the HTML one as a resource to read
    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(done)

    run = await wait(client, run_id, on_progress)
    assert run.structured_content["status"] == "completed"
    [artifact] = [a for a in run.structured_content["result"]["artifacts"] if a["type"] == "html"]
    links = {str(block.uri): block for block in run.content if block.type == "resource_link"}
    assert artifact["download_url"] in links
    resource_uri = f"canvas://runs/{run_id}/artifacts/{artifact['id']}.html"
    assert links[resource_uri].mime_type == "text/html"
    read = await client.read_resource(resource_uri)
    assert read.contents[0].mime_type == "text/html"
    assert read.contents[0].text.startswith("<!DOCTYPE html>")
    assert httpx.get(artifact["download_url"]).content.decode() == read.contents[0].text

    # When a block of its canvas is re-run with new instructions
    canvas = (await client.call_tool("get_canvas", {"run_id": run_id})).structured_content
    assert canvas["dag"]["canvas_id"] == canvas["canvas_id"] == canvas["tasks"]["canvas_id"]
    app_block = next(node for node in canvas["dag"]["nodes"] if node["type"] == "app-block")
    rerun = await client.call_tool(
        "rerun_block",
        {"canvas_id": canvas["canvas_id"], "block_id": app_block["id"], "instructions": "Title it Sales by region"},
    )
    assert not rerun.is_error, rerun.content
    rerun_run = await wait(client, rerun.structured_content["run_id"])

    # Then it ran in a new run that says what it re-ran
    assert rerun_run.structured_content["metadata"]["rerun_of"]["block_id"] == app_block["id"]
    listed_runs = (await client.call_tool("list_runs", {"limit": 100})).structured_content["runs"]
    assert {run_id, rerun.structured_content["run_id"]} <= {r["run_id"] for r in listed_runs}

    # When one run to review is approved and another cancelled
    approved = await reviewed_run(client)
    answer = await client.call_tool("approve_run", {"run_id": approved})
    assert not answer.is_error, answer.content
    assert (await wait(client, approved)).structured_content["status"] == "completed"
    cancelled = await reviewed_run(client)
    answer = await client.call_tool("cancel_run", {"run_id": cancelled})

    # Then the one ends completed, the other failed as cancelled
    assert answer.structured_content["status"] == "failed"
    assert answer.structured_content["errors"][0]["error"] == "Cancelled by the client"
    again = await client.call_tool("cancel_run", {"run_id": cancelled})
    assert again.is_error and again.content[0].text.startswith("The run has ended (failed)")


async def wait(client: Client, run_id: str, on_progress=None):
    for _ in range(10):
        run = await client.call_tool("wait_for_run", {"run_id": run_id}, progress_callback=on_progress)
        assert not run.is_error, run.content
        if run.structured_content["status"] != "running":
            return run
    raise AssertionError(f"run {run_id} still running")


async def reviewed_run(client: Client) -> str:
    created = await client.call_tool(
        "create_run", {"prompt": "A note on tide pools", "blocks": ["prompt-block", "text-block"], "review": True}
    )
    run_id = created.structured_content["run_id"]
    for _ in range(100):
        run = await client.call_tool("get_run", {"run_id": run_id})
        if run.structured_content.get("awaiting_approval"):
            assert "approve_run or cancel_run" in run.content[0].text
            return run_id
        await anyio.sleep(0.1)
    raise AssertionError(f"run {run_id} never waited for approval")


def test_an_agent_runs_the_service_over_streamable_http(service):
    progress: list[float] = []
    anyio.run(_remote_journey, service.base_url, progress)
    # A wait that asked for progress is answered as an event stream: its notifications, then its result
    assert progress and progress == sorted(set(progress))


async def _remote_journey(base_url: str, progress: list[float]) -> None:
    async with remote(base_url, KEY_A) as client:
        await journey(client, progress=progress)


def test_an_agent_runs_the_service_over_stdio_with_progress(service):
    progress: list[float] = []

    async def run() -> None:
        async with stdio(service.base_url, KEY_A) as client:
            await journey(client, progress=progress)

    anyio.run(run)
    # A wait on stdio reports the tasks done as they are done, each value greater than the last
    assert progress and progress == sorted(set(progress))


def test_bad_input_is_a_tool_error_and_creates_nothing(service, http):
    before = http.get("/v1/runs", params={"limit": 100}).json()["data"]["runs"]

    async def refusals() -> dict[str, str]:
        async with remote(service.base_url, KEY_A) as client:
            other = await client.call_tool("create_run", {"prompt": "Mine", "blocks": ["prompt-block"]})
            calls = {
                "unknown tool": ("delete_everything", {}),
                "missing argument": ("get_run", {}),
                "file too large": (
                    "create_run",
                    {"prompt": "Read it", "files": [{"name": "big.csv", "content_base64": _b64(b"a,b\n" * 1_100_000)}]},
                ),
                "invalid base64": (
                    "create_run",
                    {"prompt": "Read it", "files": [{"name": "a.csv", "content_base64": "%%"}]},
                ),
                "bad file type": (
                    "create_run",
                    {"prompt": "Run it", "files": [{"name": "x.exe", "content_base64": "TVo="}]},
                ),
                "bad template": ("create_run", {"prompt": "Hello", "template": "poem"}),
                "unknown run": ("get_run", {"run_id": "00000000-0000-4000-8000-000000000000"}),
            }
            answers = {}
            for case, (tool, arguments) in calls.items():
                result = await client.call_tool(tool, arguments)
                assert result.is_error, case
                answers[case] = result.content[0].text
        async with remote(service.base_url, KEY_B) as client:
            run_id = other.structured_content["run_id"]
            for tool in ("get_run", "get_canvas", "cancel_run", "approve_run"):
                result = await client.call_tool(tool, {"run_id": run_id})
                assert result.is_error and result.content[0].text == f"Run not found: {run_id}", tool
        return answers

    answers = anyio.run(refusals)

    assert answers["unknown tool"] == "Unknown tool: delete_everything"
    assert "run_id" in answers["missing argument"] and "Field required" in answers["missing argument"]
    assert answers["file too large"] == "Files too large: 4400000 bytes in all (maximum 4194304)"
    assert answers["invalid base64"] == "File a.csv: content_base64 is not valid base64"
    assert answers["bad file type"].startswith("Unsupported file type: x.exe")
    assert answers["bad template"].startswith("Input validation error") or "poem" in answers["bad template"]
    assert answers["unknown run"] == "Run not found: 00000000-0000-4000-8000-000000000000"
    after = http.get("/v1/runs", params={"limit": 100}).json()["data"]["runs"]
    assert len(after) == len(before) + 1  # the one run created to be another account's


def test_the_endpoint_wants_a_key_and_a_post(service):
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {"Accept": "application/json, text/event-stream"}
    # Without a key, with a wrong one, or a key not sent as a bearer token: 401 in the contract's shape
    for sent, error in (
        ({}, "X-API-KEY header required"),
        ({"Authorization": "Bearer sk_canvas_wrong"}, "Invalid or revoked API key"),
        ({"X-API-KEY": "sk_canvas_wrong"}, "Invalid or revoked API key"),
        ({"Authorization": f"Basic {KEY_A}"}, "X-API-KEY header required"),
    ):
        answer = httpx.post(f"{service.base_url}/mcp", json=message, headers=headers | sent)
        assert (answer.status_code, answer.json()) == (401, {"success": False, "error": error})
    # A stream or a session's end: stateless, 405
    answer = httpx.get(f"{service.base_url}/mcp", headers={"X-API-KEY": KEY_A})
    assert answer.status_code == 405 and answer.headers["Allow"] == "POST"


def test_the_typescript_sdk_client_lists_the_tools_and_gets_a_run():
    node = shutil.which("node")
    if node is None:
        pytest.fail("node (Node 20 or later) is needed for the TypeScript MCP client: install it, then `make mcp-sdk`")
    if not (MCP_SDK_MODULES / "@modelcontextprotocol" / "sdk" / "package.json").is_file():
        pytest.fail(f"the TypeScript MCP SDK is not in {MCP_SDK_MODULES}: run `make mcp-sdk`")
    with canvas_serve("--api-key", KEY_A) as served:
        created = httpx.post(
            f"{served.base_url}/v1/run",
            headers={"X-API-KEY": KEY_A},
            data={"prompt": "A line on tide pools", "blocks": '["prompt-block"]'},
        ).json()["data"]
        poll_until_finished(httpx.Client(base_url=served.base_url, headers={"X-API-KEY": KEY_A}), created["run_id"])
        script = [node, str(ROOT / "tests/e2e/mcp_client.mjs"), str(MCP_SDK_MODULES), f"{served.base_url}/mcp"]
        done = subprocess.run(
            [*script, KEY_A, created["run_id"]], capture_output=True, text=True, timeout=60, check=False
        )
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(answer["tools"]) >= TOOLS
    assert answer["output_schema"] == "object"
    assert answer["run"]["run_id"] == created["run_id"] and answer["run"]["status"] == "completed"
    assert answer["run_text"].startswith(f"Run {created['run_id']} is completed.")
    assert answer["missing"] == {"isError": True, "text": "Run not found: 00000000-0000-4000-8000-000000000000"}
