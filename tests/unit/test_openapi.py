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
        "/v1/canvas/{canvas_id}/dag",
        "/v1/canvas/{canvas_id}/tasks",
        "/v1/canvas/{canvas_id}/tasks/{task_id}",
        "/v1/run",
        "/v1/run/{run_id}",
        "/v1/runs",
    ]
    assert document["components"]["securitySchemes"]["ApiKey"]["name"] == "X-API-KEY"
    assert "multipart/form-data" in document["paths"]["/v1/run"]["post"]["requestBody"]["content"]
