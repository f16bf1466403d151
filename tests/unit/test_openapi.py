"""The committed OpenAPI document is the one the code generates."""

import json
import subprocess
import sys

import pytest

from tests.support import ROOT

pytestmark = pytest.mark.unit


def test_committed_openapi_matches_the_code():
    result = subprocess.run(
        [sys.executable, "scripts/generate_openapi.py", "--check"], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


def test_openapi_lists_the_routes_with_the_api_key_scheme():
    document = json.loads((ROOT / "docs" / "openapi.json").read_text())
    assert sorted(document["paths"]) == [
        "/v1/account",
        "/v1/api_keys",
        "/v1/api_keys/{key_id}",
        "/v1/canvas/{canvas_id}/dag",
        "/v1/canvas/{canvas_id}/tasks",
        "/v1/canvas/{canvas_id}/tasks/{task_id}",
        "/v1/run",
        "/v1/run/{run_id}",
        "/v1/runs",
        "/v1/webhook_endpoints",
        "/v1/webhook_endpoints/{endpoint_id}",
        "/v1/webhook_endpoints/{endpoint_id}/deliveries",
        "/v1/webhook_endpoints/{endpoint_id}/ping",
        "/v1/webhook_endpoints/{endpoint_id}/rotate_secret",
    ]
    assert document["components"]["securitySchemes"]["ApiKey"]["name"] == "X-API-KEY"
    assert "multipart/form-data" in document["paths"]["/v1/run"]["post"]["requestBody"]["content"]


def test_openapi_describes_each_webhook_route_with_its_own_answer():
    paths = json.loads((ROOT / "docs" / "openapi.json").read_text())["paths"]

    def answer(path: str, method: str) -> str:
        schema = paths[path][method]["responses"]["200"]["content"]["application/json"]["schema"]
        return schema["properties"]["data"]["$ref"].rsplit("/", 1)[1]

    assert answer("/v1/webhook_endpoints", "post") == "WebhookEndpointCreated"
    assert answer("/v1/webhook_endpoints", "get") == "WebhookEndpointList"
    assert answer("/v1/webhook_endpoints/{endpoint_id}", "delete") == "WebhookEndpointDeleted"
    assert answer("/v1/webhook_endpoints/{endpoint_id}/rotate_secret", "post") == "WebhookEndpointCreated"
    assert answer("/v1/webhook_endpoints/{endpoint_id}/ping", "post") == "WebhookPingSent"
    assert answer("/v1/webhook_endpoints/{endpoint_id}/deliveries", "get") == "WebhookDeliveryList"
    assert "application/json" in paths["/v1/webhook_endpoints"]["post"]["requestBody"]["content"]
