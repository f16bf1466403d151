"""What an API function imports when Lambda loads it (its cold start, docs/benchmarks.md): not boto3, which comes
with its first client (canvas_core/adapters/aws.py), and no settings model but those it reads."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.support import ROOT, template

pytestmark = pytest.mark.unit

# Each handler loaded in turn, in one fresh interpreter, with its own environment: the modules each one imported
# first, and the settings models built so far.
_LOAD_HANDLERS = """
import importlib.util, json, os, sys
sys.path.insert(0, {layer!r})
from canvas_core import settings

def models(cls):
    return [cls] + [m for sub in cls.__subclasses__() for m in models(sub)]

found = {{}}
for logical_id, code_dir, environment in json.loads(sys.argv[1]):
    os.environ.update(environment)
    settings.reset()
    before = set(sys.modules)
    spec = importlib.util.spec_from_file_location("app_" + logical_id, os.path.join(code_dir, "app.py"))
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    built = sorted({{m.__name__ for m in models(settings.EnvSettings) if m.__pydantic_complete__}})
    found[logical_id] = {{"modules": sorted(set(sys.modules) - before), "built": built}}
print(json.dumps(found))
"""


@pytest.fixture(scope="module")
def loaded() -> dict[str, dict[str, list[str]]]:
    api = [f for f in template().functions() if f.code_dir.parent == ROOT / "functions" / "api"]
    assert len(api) > 5
    # The poll handler first: what it builds and imports is its own.
    api.sort(key=lambda f: f.logical_id != "GetRunFunction")
    functions = [(f.logical_id, str(f.code_dir), f.environment) for f in api]
    code = _LOAD_HANDLERS.format(layer=str(ROOT / "layers" / "shared"))
    environment = {"PATH": os.environ.get("PATH", ""), "AWS_DEFAULT_REGION": "us-east-1"}
    result = subprocess.run(
        [sys.executable, "-c", code, json.dumps(functions)],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    found: dict[str, dict[str, list[str]]] = json.loads(result.stdout.splitlines()[-1])
    return found


def test_no_api_function_imports_boto3_when_loaded(loaded):
    # Given every API function's handler, loaded one after another in one interpreter
    # Then none of them imported boto3 or botocore's client machinery
    heavy = {name: [m for m in what["modules"] if m in ("boto3", "botocore.client")] for name, what in loaded.items()}
    assert heavy == {name: [] for name in loaded}


def test_the_poll_handler_builds_only_the_settings_it_reads(loaded):
    # Given the poll handler, the first one loaded in its interpreter
    poll = loaded["GetRunFunction"]
    assert "canvas_core.api" in poll["modules"]
    # Then only the settings it reads were built: the API's, and whether to trace (every other family's wait)
    assert poll["built"] == ["ApiSettings", "TracingSettings"]
    assert "python_multipart" not in poll["modules"]
