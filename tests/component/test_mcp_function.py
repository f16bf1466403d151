"""POST /mcp through its Lambda handler (events/mcp_tools_call.json): a tool call answers JSON-RPC with the REST data,
a run created as a tool is the run the REST API shows, and a request without a valid key is refused before the SDK
reads it."""

from __future__ import annotations

import base64
import json

import pytest

from tests.support import body_of, load_event

pytestmark = pytest.mark.component


def call_tool(function, context, api_key, name, arguments, **headers):
    event = load_event("mcp_tools_call", api_key=api_key)
    event["body"] = json.dumps(
        {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    )
    event["headers"] |= headers
    response = function("api/mcp")(event, context)
    return response["statusCode"], json.loads(response["body"])


def test_a_run_created_as_a_tool_is_the_run_the_rest_api_shows(function, context, account):
    # Given a CSV, base64-encoded as MCP carries files
    files = [{"name": "sales.csv", "content_base64": base64.b64encode(b"month,revenue\n2025-01,100\n").decode()}]

    # When a run is created through the MCP function
    status, answer = call_tool(
        function, context, account.api_key, "create_run", {"prompt": "Sum the revenue", "files": files}
    )

    # Then it answers JSON-RPC, with the REST create's data as structured content
    assert status == 200 and answer["id"] == 7
    created = answer["result"]["structuredContent"]
    assert created["status"] == "running" and answer["result"].get("isError") is not True
    assert answer["result"]["content"][0]["text"].startswith(f"Run {created['run_id']} started")
    # And GET /v1/run/{run_id} shows that run, for the same account
    event = load_event("get_run", api_key=account.api_key, path_parameters={"run_id": created["run_id"]})
    rest = body_of(function("api/get_run")(event, context))["data"]
    assert (rest["run_id"], rest["prompt"], rest["canvas_id"]) == (
        created["run_id"],
        "Sum the revenue",
        created["canvas_id"],
    )
    # And get_run as a tool answers what the REST route answers
    _, polled = call_tool(function, context, account.api_key, "get_run", {"run_id": created["run_id"]})
    assert polled["result"]["structuredContent"]["run_id"] == rest["run_id"]


def test_a_refusal_is_a_tool_result_not_a_protocol_error(function, context, account):
    # When an unknown run is asked for
    status, answer = call_tool(
        function, context, account.api_key, "get_run", {"run_id": "6f1c2a0e-3b7d-4c55-9a0e-2f4b8d1c7e90"}
    )

    # Then the call succeeds with a tool error carrying the contract's message
    assert status == 200 and "error" not in answer
    assert answer["result"]["isError"] is True
    assert answer["result"]["content"] == [
        {"type": "text", "text": "Run not found: 6f1c2a0e-3b7d-4c55-9a0e-2f4b8d1c7e90"}
    ]


@pytest.mark.parametrize(
    ("api_key", "error"),
    [(None, "X-API-KEY header required"), ("sk_canvas_unknown", "Invalid or revoked API key")],
)
def test_a_request_without_a_valid_key_is_401_in_the_contracts_shape(function, context, aws, api_key, error):
    status, answer = call_tool(function, context, api_key, "list_runs", {})

    assert (status, answer) == (401, {"success": False, "error": error})


def test_a_bearer_token_is_a_key_too(function, context, account):
    status, answer = call_tool(function, context, None, "list_runs", {}, Authorization=f"Bearer {account.api_key}")

    assert status == 200
    assert answer["result"]["structuredContent"] == {"runs": [], "next_cursor": None}
