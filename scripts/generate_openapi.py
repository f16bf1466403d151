"""Write docs/openapi.json from the endpoint functions: each function's Powertools resolver documents its routes
(summaries, typed parameters and bodies, the models it answers with, the statuses it may answer), and Powertools'
OpenAPIMerge joins them into one document. `--check` fails when the committed document differs from what the code
says (tests/unit/test_openapi.py runs it)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "docs" / "openapi.json"
FUNCTIONS = ROOT / "functions" / "api"
# POST /mcp is MCP's JSON-RPC endpoint, not a REST resource: what it takes and answers is the MCP specification's, and
# its tools describe their own inputs and outputs to a client (tools/list). docs/mcp.md documents it.
NOT_REST = {"mcp"}


def build() -> dict[str, Any]:
    os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
    from aws_lambda_powertools.event_handler.openapi.merge import OpenAPIMerge
    from aws_lambda_powertools.event_handler.openapi.models import APIKey, APIKeyIn

    from canvas_local.environments import Environment
    from canvas_local.template import Template

    # Each function reads its settings when it is loaded: it is given what template.yaml gives the API functions.
    variables = {
        name: value
        for spec in Template(ROOT / "template.yaml").functions()
        if spec.code_dir.is_relative_to(FUNCTIONS)
        for name, value in spec.environment.items()
    }

    merge = OpenAPIMerge(
        title="Canvas Run Service",
        version="1.0.0",
        security_schemes={"ApiKey": APIKey(in_=APIKeyIn.header, name="X-API-KEY")},
        security=[{"ApiKey": []}],
        on_conflict="error",
    )
    for app in sorted(FUNCTIONS.glob("*/app.py")):
        if app.parent.name not in NOT_REST:
            merge.add_file(app, resolver_name="app")
    with warnings.catch_warnings(), Environment({**os.environ, **variables}).scope():
        # OpenAPIMerge warns and goes on when a function cannot be loaded; the document would miss its routes.
        warnings.filterwarnings("error", message="Failed to load")
        document = json.loads(merge.get_openapi_json_schema())
    document["paths"] = dict(sorted(document["paths"].items()))
    document["components"]["schemas"] = dict(sorted(document["components"]["schemas"].items()))
    return document


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if docs/openapi.json is out of date")
    args = parser.parse_args()
    text = json.dumps(build(), indent=2) + "\n"
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
