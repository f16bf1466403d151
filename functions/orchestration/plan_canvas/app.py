"""Plan Canvas: turn the run's prompt into blocks, edges and the task tree; list the blocks to run. Also Await
Approval, for a run created with `review=true`: the same step invoked with its task token parks the run with its plan
until it is approved or cancelled."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from canvas_core.observability import EXECUTION_CORRELATION_ID, logger, metrics, tracer
from canvas_core.reviews import plan_step
from canvas_core.settings import orchestration_settings

orchestration_settings()  # read when the function starts: a bad setting fails it there, not a step


# The state machine hands over its input as `execution`, beside what names the block functions (their prefix).
@logger.inject_lambda_context(correlation_id_path=f"execution.{EXECUTION_CORRELATION_ID}", clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    execution = event.get("execution", event)
    # The API request's id travels on through every task of the execution (the state machine passes it along).
    correlation_id = logger.get_correlation_id() or execution.get(EXECUTION_CORRELATION_ID) or execution["run_id"]
    return plan_step(execution, event.get("block_function_prefix"), correlation_id, task_token=event.get("task_token"))
