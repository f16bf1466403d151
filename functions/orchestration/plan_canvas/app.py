"""Plan Canvas: turn the run's prompt into blocks, edges and the task tree; list the blocks to run."""

from aws_lambda_powertools.utilities.typing import LambdaContext

from canvas_core.observability import logger, tracer
from canvas_core.orchestration import plan_run


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def handler(event: dict, context: LambdaContext) -> dict:
    return plan_run(event["run_id"], event["canvas_id"])
