"""Release Dependents, where the state machine's Catch goes: record the block's failure, count the ended block as
an input of each block reading it, and release those ready (a block that ends without an error does this itself)."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from canvas_core.dataflow import release_dependents
from canvas_core.observability import EXECUTION_CORRELATION_ID, logger, metrics, tracer
from canvas_core.settings import orchestration_settings

orchestration_settings()  # read when the function starts: a bad setting fails it there, not a step


@logger.inject_lambda_context(correlation_id_path=EXECUTION_CORRELATION_ID, clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return release_dependents(event["canvas_id"], event["block_id"], event.get("dependents"), error=event.get("error"))
