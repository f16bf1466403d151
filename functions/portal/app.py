"""The developer portal (/portal) and the canvas viewer (/runs/{run_id}): pages, files and the pages' JSON."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from canvas_core.api import handle
from canvas_core.observability import correlation_paths, logger, metrics, tracer
from canvas_core.portal.pages import with_security_headers
from canvas_core.portal.routes import create_portal_app

app = create_portal_app()


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return with_security_headers(handle(app, event, context))
