"""Record Block Failure: mark a block that failed after its retries, with the reason a user can act on."""

from aws_lambda_powertools.utilities.typing import LambdaContext

from canvas_core.observability import EXECUTION_CORRELATION_ID, logger, tracer
from canvas_core.orchestration import fail_block


@logger.inject_lambda_context(correlation_id_path=EXECUTION_CORRELATION_ID, clear_state=True)
@tracer.capture_lambda_handler
def handler(event: dict, context: LambdaContext) -> dict:
    return fail_block(event["canvas_id"], event["block_id"], event.get("error"))
