"""Block types. Each type's behaviour is a module here (`prompt.py`, `text.py`, ...) registered in
`registry.py`; `runner.py` is what every block Lambda runs around it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from canvas_core.adapters.aws import invocation_credentials
from canvas_core.blocks.runner import run_block
from canvas_core.models.blocks import BlockInput
from canvas_core.observability import EXECUTION_CORRELATION_ID, logger, metrics, tracer
from canvas_core.settings import block_settings


def make_block_handler(block_type: str) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    """The Lambda handler of one block type's function, made when the function starts: its settings are read
    then, so that a bad one fails the start, not a block."""
    block_settings()

    @logger.inject_lambda_context(correlation_id_path=EXECUTION_CORRELATION_ID, clear_state=True)
    @tracer.capture_lambda_handler
    @metrics.log_metrics
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        block = BlockInput.model_validate(event)
        # Every AWS call of the block is made with the credentials vended for its run, which reach only that run.
        with invocation_credentials(block.credentials):
            return run_block(block, expected_type=block_type).model_dump()

    return handler
