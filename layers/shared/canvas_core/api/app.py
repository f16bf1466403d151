"""The API resolver every endpoint function builds, with the one error map of the service: each domain
error becomes its status and a `{success: false, error}` body; anything unexpected becomes a 500."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types
from aws_lambda_powertools.event_handler.exceptions import NotFoundError as RouteNotFoundError
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.utilities.data_classes.common import BaseProxyEvent
from pydantic import BaseModel

from canvas_core.auth import authenticate
from canvas_core.errors import ServiceError
from canvas_core.observability import logger


def error_response(status_code: int, message: str, retry_after_seconds: int | None = None) -> Response:
    return Response(
        status_code=status_code,
        content_type=content_types.APPLICATION_JSON,
        body={"success": False, "error": message},
        headers={"Retry-After": str(retry_after_seconds)} if retry_after_seconds is not None else None,
    )


def ok(data: BaseModel, exclude_none: bool = True) -> dict[str, Any]:
    """The success body. Fields that are None are left out, unless the body promises them as null."""
    return {"success": True, "data": data.model_dump(mode="json", exclude_none=exclude_none)}


class Resolver(APIGatewayRestResolver):
    """An APIGatewayRestResolver that keeps the event and Lambda context it resolves on itself.

    Powertools keeps both on a class attribute that every resolver in the process shares: right on Lambda,
    where a process serves one invocation at a time, wrong where one process hosts several execution
    environments (the embedded stack), whose resolvers would read each other's requests.
    """

    _own_event: BaseProxyEvent | None = None
    _own_lambda_context: Any = None

    def _to_proxy_event(self, event: dict) -> BaseProxyEvent:
        self._own_event = super()._to_proxy_event(event)
        return self._own_event

    def resolve(self, event: Mapping[str, Any], context: Any) -> dict[str, Any]:
        self._own_lambda_context = context
        return super().resolve(event, context)

    @property  # type: ignore[override]
    def current_event(self) -> BaseProxyEvent:
        return self._own_event  # type: ignore[return-value]

    @current_event.setter
    def current_event(self, value: BaseProxyEvent) -> None:
        self._own_event = value

    @property  # type: ignore[override]
    def lambda_context(self) -> Any:
        return self._own_lambda_context

    @lambda_context.setter
    def lambda_context(self, value: Any) -> None:
        self._own_lambda_context = value


def create_app() -> APIGatewayRestResolver:
    app = Resolver(enable_validation=True)

    @app.exception_handler(ServiceError)
    def handle_service_error(exc: ServiceError) -> Response:
        logger.info("Request refused", extra={"status": exc.status_code, "error": exc.message})
        return error_response(exc.status_code, exc.message, exc.retry_after_seconds)

    @app.exception_handler(RequestValidationError)
    def handle_validation_error(exc: RequestValidationError) -> Response:
        # Parameters are validated before the route runs; authentication still answers first (docs/api.md).
        try:
            caller_account(app)
        except ServiceError as refused:
            return handle_service_error(refused)
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        return error_response(400, f"Invalid request: {problems}")

    @app.exception_handler(RouteNotFoundError)
    def handle_unknown_route(_: RouteNotFoundError) -> Response:
        event = app.current_event
        return error_response(404, f"Not found: {event.http_method} {event.path}")

    @app.exception_handler(Exception)
    def handle_unexpected(exc: Exception) -> Response:
        logger.exception("Unexpected error")
        return error_response(500, "Internal server error")

    return app


def caller_account(app: APIGatewayRestResolver) -> str:
    return authenticate(app.current_event.headers)


def handle(app: APIGatewayRestResolver, event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Resolve the event and tag the response with the request id clients report to support."""
    response = app.resolve(event, context)
    request_id = (event.get("requestContext") or {}).get("requestId") or getattr(context, "aws_request_id", "")
    if "multiValueHeaders" in response:
        response["multiValueHeaders"]["X-Request-ID"] = [request_id]
    else:
        response.setdefault("headers", {})["X-Request-ID"] = request_id
    return response
