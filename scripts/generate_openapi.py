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

# function folder → (method, success model, error statuses, summary)
ROUTES = {
    "create_run": ("post", "CreateRunResponse", [400, 401, 402, 413, 415, 429, 500], "Create a run"),
    "get_run": ("get", "RunStatusResponse", [400, 401, 404, 500], "Get run status and results"),
    "list_runs": ("get", "ListRunsResponse", [400, 401, 500], "List the caller's runs, newest first (extension)"),
    "get_canvas_dag": ("get", "CanvasDagResponse", [400, 401, 404, 500], "Get the canvas DAG"),
    "get_canvas_tasks": ("get", "TaskTreeResponse", [400, 401, 404, 500], "Get the task tree"),
    "get_canvas_task": ("get", "TaskView", [400, 401, 404, 500], "Get a single task"),
}

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

# Statuses a client may retry later; the answer says when (canvas_core.errors: retry_after_seconds).
RETRY_AFTER = {
    "Retry-After": {
        "description": "Seconds to wait before trying again",
        "schema": {"type": "integer", "minimum": 1},
    }
}


def build() -> dict:
    from canvas_core.models import api as models

    os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
    document: dict = {}
    schemas: dict = {}
    for folder, (method, model_name, errors, summary) in ROUTES.items():
        path = ROOT / "functions" / "api" / folder / "app.py"
        spec = importlib.util.spec_from_file_location(f"openapi_{folder}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        part = json.loads(module.app.get_openapi_json_schema(title="Canvas Run Service", version="1.0.0"))
        if not document:
            document = {k: v for k, v in part.items() if k not in ("paths", "components")}
            document["paths"] = {}
        for route, operations in part["paths"].items():
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
            document["paths"].setdefault(route, {})[method] = operation
        model = getattr(models, model_name)
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
