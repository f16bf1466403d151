"""Every Lambda handler flushes the business metrics its invocation added (`count`): a handler that does not drops
them silently, whichever of the domain functions it calls adds one (a publish that failed, a run refused)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

FUNCTIONS = Path(__file__).resolve().parents[2] / "functions"


@pytest.mark.parametrize(
    "module", sorted(FUNCTIONS.glob("**/app.py")), ids=lambda p: str(p.parent.relative_to(FUNCTIONS))
)
def test_the_handler_flushes_its_metrics(module: Path):
    source = module.read_text(encoding="utf-8")
    # A block's handler is made by make_block_handler, which flushes them
    assert "@metrics.log_metrics\ndef handler" in source or "handler = make_block_handler(" in source
