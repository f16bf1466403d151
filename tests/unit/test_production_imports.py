"""Production code knows nothing of the embedded stack: no Lambda handler in functions/ imports canvas_local (the
layer's canvas_core is held to the same by import-linter's `production-apart-from-the-emulator` contract)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

FUNCTIONS = Path(__file__).resolve().parents[2] / "functions"


def imported_packages(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def test_no_handler_imports_the_embedded_stack():
    modules = sorted(FUNCTIONS.glob("**/*.py"))
    assert modules
    assert [str(p.relative_to(FUNCTIONS)) for p in modules if "canvas_local" in imported_packages(p)] == []


def test_the_check_sees_an_import_of_it(tmp_path):
    module = tmp_path / "app.py"
    module.write_text("from canvas_local.stack import LocalStack\nimport canvas_core.api\n")
    assert imported_packages(module) == {"canvas_local", "canvas_core"}
