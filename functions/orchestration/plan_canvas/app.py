"""Plan Canvas: turn the run's prompt into blocks, edges and the task tree; list the blocks to run."""

from aws_lambda_powertools.utilities.typing import LambdaContext

from canvas_core.observability import EXECUTION_CORRELATION_ID, logger, tracer
from canvas_core.orchestration import plan_run


@logger.inject_lambda_context(correlation_id_path=EXECUTION_CORRELATION_ID, clear_state=True)
@tracer.capture_lambda_handler
def handler(event: dict, context: LambdaContext) -> dict:
    # The API request's id travels on through every task of the execution (the state machine passes it along).
    return {
        **plan_run(event["run_id"], event["canvas_id"]),
        "correlation_id": logger.get_correlation_id() or event["run_id"],
    }
