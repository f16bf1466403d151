"""A library whose internals the code reaches into is pinned to one version, in pyproject.toml and in the layer it
ships in: moto (canvas_local/moto_patch/, moto_server.py), waitress (canvas_local/frontdoor.py) and Powertools
(canvas_core/api/app.py overrides members of its resolver that are not its public API)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
PATCHED = {"moto", "waitress", "aws-lambda-powertools"}


def pins(lines: list[str]) -> dict[str, str]:
    found = {}
    for line in lines:
        line = line.split("#")[0].strip()
        if line and not line.startswith("-"):
            requirement = Requirement(line)
            found[requirement.name] = str(requirement.specifier)
    return found


def test_every_library_whose_internals_are_patched_is_pinned_exactly():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = [r for extra in project["optional-dependencies"].values() for r in extra]
    wanted = pins([*project["dependencies"], *extras])
    layer = pins((ROOT / "layers" / "shared" / "requirements.txt").read_text(encoding="utf-8").splitlines())
    for name in PATCHED:
        assert wanted.get(name, "").startswith("=="), f"pyproject.toml: {name} {wanted.get(name)}"
    assert layer["aws-lambda-powertools"] == wanted["aws-lambda-powertools"]
