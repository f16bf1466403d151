"""POST /mcp: the service's tools for agents, over MCP's Streamable HTTP transport (stateless, JSON responses)."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from canvas_core.mcp.domain import DomainBackend
from canvas_core.mcp.remote import answer, create_remote_server
from canvas_core.observability import correlation_paths, logger, metrics, tracer

server = create_remote_server()


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return answer(server, event, DomainBackend)
