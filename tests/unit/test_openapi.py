"""The committed OpenAPI document is the one the code generates."""

import json
import subprocess
import sys

import jsonschema
import pytest

from canvas_core.models.catalog import Template
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
        "/v1/canvas/{canvas_id}/blocks/{block_id}/rerun",
        "/v1/canvas/{canvas_id}/dag",
        "/v1/canvas/{canvas_id}/tasks",
        "/v1/canvas/{canvas_id}/tasks/{task_id}",
        "/v1/run",
        "/v1/run/{run_id}",
        "/v1/run/{run_id}/approve",
        "/v1/run/{run_id}/cancel",
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
    document = json.loads((ROOT / "docs" / "openapi.json").read_text())
    paths, schemas = document["paths"], document["components"]["schemas"]

    def answer(path: str, method: str) -> str:
        envelope = paths[path][method]["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
        body = schemas[envelope.rsplit("/", 1)[1]]
        assert body["required"] == ["success", "data"] and body["properties"]["success"]["const"] is True
        return body["properties"]["data"]["$ref"].rsplit("/", 1)[1]

    assert answer("/v1/webhook_endpoints", "post") == "WebhookEndpointCreated"
    assert answer("/v1/webhook_endpoints", "get") == "WebhookEndpointList"
    assert answer("/v1/webhook_endpoints/{endpoint_id}", "delete") == "WebhookEndpointDeleted"
    assert answer("/v1/webhook_endpoints/{endpoint_id}/rotate_secret", "post") == "WebhookEndpointCreated"
    assert answer("/v1/webhook_endpoints/{endpoint_id}/ping", "post") == "WebhookPingSent"
    assert answer("/v1/webhook_endpoints/{endpoint_id}/deliveries", "get") == "WebhookDeliveryList"
    assert "application/json" in paths["/v1/webhook_endpoints"]["post"]["requestBody"]["content"]


def test_path_ids_are_uuids_and_the_create_form_names_every_template():
    document = json.loads((ROOT / "docs" / "openapi.json").read_text())
    ids = [
        parameter
        for path in document["paths"].values()
        for operation in path.values()
        for parameter in operation.get("parameters", [])
        if parameter["in"] == "path"
    ]
    assert ids and all(p["schema"]["format"] == "uuid" for p in ids)
    form = document["paths"]["/v1/run"]["post"]["requestBody"]["content"]["multipart/form-data"]["schema"]["$ref"]
    assert form == "#/components/schemas/CreateRunForm"
    template = document["components"]["schemas"]["CreateRunForm"]["properties"]["template"]["$ref"]
    assert document["components"]["schemas"][template.rsplit("/", 1)[1]]["enum"] == [t.value for t in Template]


def test_the_check_fails_when_a_template_is_added_without_regenerating():
    # Given the code with a template the committed document does not name
    with_essay = (
        "import enum, runpy, sys\n"
        "from canvas_core.models import catalog\n"
        "members = {t.name: t.value for t in catalog.Template} | {'ESSAY': 'essay'}\n"
        "catalog.Template = enum.StrEnum('Template', members)\n"
        "sys.argv = ['scripts/generate_openapi.py', '--check']\n"
        "runpy.run_path('scripts/generate_openapi.py', run_name='__main__')\n"
    )
    # When the drift check runs
    result = subprocess.run([sys.executable, "-c", with_essay], cwd=ROOT, capture_output=True, text=True)
    # Then it fails
    assert result.returncode == 1, result.stdout + result.stderr
    assert "docs/openapi.json is out of date" in result.stderr


@pytest.mark.parametrize(
    ("schema", "body"),
    [
        ("ApproveRunForm", {"instructions": {}, "instruction": {"b": "x"}}),
        ("RerunBlockForm", {"instructions": "x", "instruction": "y"}),
        ("CreateRunForm", {"prompt": "x", "instructions": "be brief"}),
        ("CreateRunForm", {"prompt": "  \t "}),
        ("CreateRunForm", {"prompt": ""}),
    ],
)
def test_openapi_refuses_the_bodies_the_server_refuses(schema, body):
    # Given the committed document's schema of a request body, and a body the server answers 400
    # (tests/component/test_api.py, test_reviews.py; tests/e2e/test_rerun.py)
    document = json.loads((ROOT / "docs" / "openapi.json").read_text())
    validator = jsonschema.Draft202012Validator({**document["components"]["schemas"][schema], "components": {}})
    # Then the document says it is invalid too: an unknown field, a blank prompt
    assert not validator.is_valid(body)
    assert validator.is_valid({"prompt": "x"} if schema == "CreateRunForm" else {})


def test_openapi_says_a_cursor_other_than_next_cursor_is_refused():
    document = json.loads((ROOT / "docs" / "openapi.json").read_text())
    operation = document["paths"]["/v1/runs"]["get"]
    [cursor] = [p for p in operation["parameters"] if p["name"] == "cursor"]
    assert "refused (400, Invalid cursor)" in cursor["description"]
    assert "400" in operation["responses"]
