"""Write docs/openapi.json from the endpoint functions: paths and parameters from their Powertools
resolvers, response bodies from the pydantic models they answer with. `--check` fails when the committed
document differs from what the code says (tests/unit/test_openapi.py runs it)."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "docs" / "openapi.json"

# (function folder, method) → (success model, error statuses, summary); a folder may serve several methods.
ROUTES = {
    ("create_run", "post"): ("CreateRunResponse", [400, 401, 402, 413, 415, 429, 500], "Create a run"),
    ("get_run", "get"): ("RunStatusResponse", [400, 401, 404, 500], "Get run status and results"),
    ("list_runs", "get"): ("ListRunsResponse", [400, 401, 500], "List the caller's runs, newest first (extension)"),
    ("get_canvas_dag", "get"): ("CanvasDagResponse", [400, 401, 404, 500], "Get the canvas DAG"),
    ("get_canvas_tasks", "get"): ("TaskTreeResponse", [400, 401, 404, 500], "Get the task tree"),
    ("get_canvas_task", "get"): ("TaskView", [400, 401, 404, 500], "Get a single task"),
    ("api_keys", "get"): ("ApiKeyList", [401, 500], "List the account's API keys (extension)"),
    ("api_keys", "post"): ("CreatedApiKey", [401, 500], "Create an API key, shown once (extension)"),
    ("api_keys", "delete"): ("ApiKeyView", [400, 401, 404, 500], "Revoke an API key (extension)"),
    ("account", "get"): ("AccountView", [401, 500], "Get the account's credits, usage and limits (extension)"),
    # A folder serving several routes of one method names each route.
    ("webhook_endpoints", "post", "/v1/webhook_endpoints"): (
        "WebhookEndpointCreated",
        [400, 401, 409, 413, 415, 500],
        "Add a webhook endpoint; its signing secret is shown once (extension)",
    ),
    ("webhook_endpoints", "get", "/v1/webhook_endpoints"): (
        "WebhookEndpointList",
        [401, 500],
        "List the account's webhook endpoints (extension)",
    ),
    ("webhook_endpoints", "delete", "/v1/webhook_endpoints/{endpoint_id}"): (
        "WebhookEndpointDeleted",
        [400, 401, 404, 500],
        "Delete a webhook endpoint (extension)",
    ),
    ("webhook_endpoints", "post", "/v1/webhook_endpoints/{endpoint_id}/rotate_secret"): (
        "WebhookEndpointCreated",
        [400, 401, 404, 500],
        "Replace a webhook endpoint's signing secret, shown once (extension)",
    ),
    ("webhook_endpoints", "post", "/v1/webhook_endpoints/{endpoint_id}/ping"): (
        "WebhookPingSent",
        [400, 401, 404, 409, 500],
        "Send a webhook.ping event to an endpoint (extension)",
    ),
    ("webhook_endpoints", "get", "/v1/webhook_endpoints/{endpoint_id}/deliveries"): (
        "WebhookDeliveryList",
        [400, 401, 404, 500],
        "List an endpoint's recent delivery attempts, newest first (extension)",
    ),
}
# Where the success models live (canvas_core.models.<module>).
MODEL_MODULES = ("api", "accounts", "webhooks")

CREATE_FORM = {
    "type": "object",
    "required": ["prompt"],
    "properties": {
        "prompt": {"type": "string", "maxLength": 20000},
        "template": {
            "type": "string",
            "enum": ["auto", "deep_research", "report", "slides", "memo", "excel", "app", "landing_page"],
            "default": "auto",
        },
        "blocks": {"type": "string", "description": "JSON-encoded array of block type identifiers"},
        "agent_instructions": {"type": "string", "maxLength": 10000},
        "webhook_url": {"type": "string", "format": "uri", "description": "reserved; not honored"},
        "files": {"type": "array", "items": {"type": "string", "format": "binary"}, "maxItems": 10},
    },
}

WEBHOOK_ENDPOINT_FORM = {
    "type": "object",
    "required": ["url"],
    "properties": {
        "url": {"type": "string", "format": "uri", "maxLength": 2048},
        "events": {
            "description": "Event types to deliver (default all): a list, or in a form a comma-separated string",
            "oneOf": [
                {"type": "array", "items": {"$ref": "#/components/schemas/WebhookEventType"}},
                {"type": "string"},
            ],
        },
    },
}

# Statuses a client may retry later; the answer says when (canvas_core.errors: retry_after_seconds).
RETRY_AFTER = {
    "Retry-After": {
        "description": "Seconds to wait before trying again",
        "schema": {"type": "integer", "minimum": 1},
    }
}


def build() -> dict:
    os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
    document: dict = {}
    schemas: dict = {}
    parts: dict[str, dict] = {}
    for (folder, method, *only), (model_name, errors, summary) in ROUTES.items():
        if folder not in parts:
            parts[folder] = _openapi_of(folder)
        part = parts[folder]
        if not document:
            document = {k: v for k, v in part.items() if k not in ("paths", "components")}
            document["paths"] = {}
        for route, operations in part["paths"].items():
            if method not in operations or (only and route != only[0]):
                continue
            operation = operations[method]
            operation["summary"] = summary
            operation["security"] = [{"ApiKey": []}]
            operation["responses"] = {"200": _response(model_name, "Success", data=True)}
            operation["responses"] |= {str(s): _response("ErrorBody", "Error") for s in errors}
            if "429" in operation["responses"]:
                operation["responses"]["429"]["headers"] = RETRY_AFTER
            if folder == "create_run":
                operation["requestBody"] = {
                    "required": True,
                    "content": {
                        "multipart/form-data": {"schema": CREATE_FORM},
                        "application/x-www-form-urlencoded": {"schema": CREATE_FORM},
                    },
                }
            if (folder, method, *only) == ("webhook_endpoints", "post", "/v1/webhook_endpoints"):
                operation["requestBody"] = {
                    "required": True,
                    "content": {
                        "application/json": {"schema": WEBHOOK_ENDPOINT_FORM},
                        "application/x-www-form-urlencoded": {"schema": WEBHOOK_ENDPOINT_FORM},
                    },
                }
            document["paths"].setdefault(route, {})[method] = operation
        model = _model(model_name)
        model_schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        schemas |= model_schema.pop("$defs", {})
        schemas[model_name] = model_schema
    schemas["ErrorBody"] = {
        "type": "object",
        "required": ["success", "error"],
        "properties": {"success": {"const": False}, "error": {"type": "string"}},
    }
    document["components"] = {
        "schemas": dict(sorted(schemas.items())),
        "securitySchemes": {"ApiKey": {"type": "apiKey", "in": "header", "name": "X-API-KEY"}},
    }
    document["paths"] = dict(sorted(document["paths"].items()))
    return document


def _openapi_of(folder: str) -> dict:
    path = ROOT / "functions" / "api" / folder / "app.py"
    spec = importlib.util.spec_from_file_location(f"openapi_{folder}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return json.loads(module.app.get_openapi_json_schema(title="Canvas Run Service", version="1.0.0"))


def _model(name: str) -> type:
    modules = [importlib.import_module(f"canvas_core.models.{module}") for module in MODEL_MODULES]
    return next(getattr(module, name) for module in modules if hasattr(module, name))


def _response(model_name: str, description: str, data: bool = False) -> dict:
    ref = {"$ref": f"#/components/schemas/{model_name}"}
    schema = (
        {"type": "object", "required": ["success", "data"], "properties": {"success": {"const": True}, "data": ref}}
        if data
        else ref
    )
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if docs/openapi.json is out of date")
    args = parser.parse_args()
    text = json.dumps(build(), indent=2, sort_keys=False) + "\n"
    if args.check:
        if not OUTPUT.exists() or OUTPUT.read_text() != text:
            print("docs/openapi.json is out of date: run `python scripts/generate_openapi.py`", file=sys.stderr)
            return 1
        print("docs/openapi.json is up to date")
        return 0
    OUTPUT.write_text(text)
    print(f"wrote {OUTPUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
