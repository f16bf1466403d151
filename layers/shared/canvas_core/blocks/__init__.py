"""Block types. Each type's behaviour is a module here (`prompt.py`, `text.py`, ...) registered in
`registry.py`; `runner.py` is what every block Lambda runs around it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from canvas_core.blocks.runner import run_block
from canvas_core.models.blocks import BlockInput
from canvas_core.observability import EXECUTION_CORRELATION_ID, logger, metrics, tracer


def make_block_handler(block_type: str) -> Callable[[dict, Any], dict]:
    """The Lambda handler of one block type's function."""

    @logger.inject_lambda_context(correlation_id_path=EXECUTION_CORRELATION_ID, clear_state=True)
    @tracer.capture_lambda_handler
    @metrics.log_metrics
    def handler(event: dict, context: Any) -> dict:
        return run_block(BlockInput.model_validate(event), expected_type=block_type).model_dump()

    return handler
