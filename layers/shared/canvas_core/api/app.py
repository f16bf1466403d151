"""The API resolver every endpoint function builds, with the one error map of the service: each domain
error becomes its status and a `{success: false, error}` body; anything unexpected becomes a 500. Routes declare
what they answer with `answers(...)`, so the OpenAPI document (scripts/generate_openapi.py) comes from them, and
return their model (`-> SuccessBody[RunStatusResponse]`, built by `ok()`): Powertools validates what a route returns
against that annotation before serializing it, and an answer that does not match is a 500, logged."""

from __future__ import annotations

from collections.abc import Mapping
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, cast

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types
from aws_lambda_powertools.event_handler.exceptions import NotFoundError as RouteNotFoundError
from aws_lambda_powertools.event_handler.middlewares.openapi_validation import OpenAPIRequestValidationMiddleware
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError, ResponseValidationError
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEvent
from aws_lambda_powertools.utilities.data_classes.common import BaseProxyEvent
from pydantic import BaseModel

from canvas_core.api.forms import FormBody, read_body
from canvas_core.auth import authenticate
from canvas_core.errors import BadRequestError, InvalidUuidError, ServiceBusyError, ServiceError, StorageBusyError
from canvas_core.models.api import ErrorBody, SuccessBody
from canvas_core.models.base import Model, RequestRefused, refusal
from canvas_core.observability import logger
from canvas_core.settings import EnvSettings, api_settings, load
from canvas_core.textsafety import MAX_JSON_DEPTH, json_depth

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler.openapi.models import OpenAPI
    from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse

# What each error status means, for the OpenAPI document; the body says which case it is.
ERROR_STATUSES = {
    400: "The request breaks a rule of the contract",
    401: "X-API-KEY missing, unknown or revoked",
    402: "Insufficient credits",
    404: "Not found in the caller's account",
    409: "In conflict with the current state",
    413: "The body, a file, or the files together are too large",
    415: "Unsupported Content-Type",
    429: "Too many runs running for the account",
    500: "Internal server error",
    503: "The service is busy: try again after Retry-After seconds",
}
# Statuses a client may retry later; the answer says when (canvas_core.errors: retry_after_seconds).
RETRY_AFTER_STATUSES = frozenset({429, 503})
# Powertools documents a 422 for invalid parameters; this resolver answers them 400 with the error body.
_VALIDATION_SCHEMAS = ("HTTPValidationError", "ValidationError", "ResponseValidationError")


def error_response(status_code: int, message: str, retry_after_seconds: int | None = None) -> Response[Any]:
    return Response(
        status_code=status_code,
        content_type=content_types.APPLICATION_JSON,
        body={"success": False, "error": message},
        headers={"Retry-After": str(retry_after_seconds)} if retry_after_seconds is not None else None,
    )


def refused_response(exc: ServiceError) -> Response[Any]:
    logger.info("Request refused", extra={"status": exc.status_code, "error": exc.message})
    return error_response(exc.status_code, exc.message, exc.retry_after_seconds)


def ok[DataT: BaseModel](data: DataT, exclude_none: bool = True) -> SuccessBody[DataT]:
    """The success body a route returns. Fields that are None are left out, unless the body promises them as null."""
    # The class the route's `-> SuccessBody[Model]` names when `data` is that model: checked without a copy.
    body = cast("type[SuccessBody[DataT]]", SuccessBody[type(data)])  # type: ignore[misc]
    return body(success=True, data=data, keep_nulls=not exclude_none)


def answers(model: type[Model], *errors: int) -> dict[int, OpenAPIResponse]:
    """A route's `responses`: 200 with `model` as `data` of the success body, and each error status (and 500 and
    503, which any route may answer) with the error body."""
    success: OpenAPIResponse = {
        "description": "Success",
        "content": {"application/json": {"model": SuccessBody[model]}},  # type: ignore[valid-type]
    }
    responses = {200: success}
    for status in (*errors, 500, 503):
        responses[status] = {
            "description": ERROR_STATUSES[status],
            "content": {"application/json": {"model": ErrorBody}},
        }
        if status in RETRY_AFTER_STATUSES:
            responses[status]["headers"] = {
                "Retry-After": {
                    "description": "Seconds to wait before trying again",
                    "schema": {"type": "integer", "minimum": 1},
                }
            }
    return responses


class _RequestValidation(OpenAPIRequestValidationMiddleware):
    """Powertools' request validation, with the bodies of FormBody routes read by canvas_core (forms.py says why).
    A body refused as it is read is raised as a validation error, so that authentication still answers first."""

    def _get_body(self, app: Any) -> dict[str, Any]:
        route = app.context["_route"]
        spec = route.body_field.field_info if route.body_field is not None else None
        if not isinstance(spec, FormBody):
            return super()._get_body(app)
        try:
            return read_body(app.current_event, spec)
        except ServiceError as refused:
            raise _refused_body(refused) from None

    def _parse_json_data(self, app: Any) -> dict[str, Any]:
        # Powertools' json.loads recurses per level: a body nested thousands deep would be a RecursionError, a 500.
        if json_depth(app.current_event.decoded_body or "") > MAX_JSON_DEPTH:
            raise _refused_body(
                BadRequestError(f"Request body is nested too deeply: more than {MAX_JSON_DEPTH} levels")
            )
        return super()._parse_json_data(app)


def _refused_body(refused: ServiceError) -> RequestValidationError:
    cause = {"error": RequestRefused(refused)}
    return RequestValidationError(
        [{"type": "refused", "loc": ("body",), "msg": refused.message, "input": None, "ctx": cause}]
    )


class _ProxyEvent(APIGatewayProxyEvent):
    """The REST event, whose header parameters are read from `headers`, where authentication reads the key (Powertools
    reads them from `multiValueHeaders`), so that a request is judged on one view of its headers."""

    @property
    def resolved_headers_field(self) -> dict[str, Any]:
        return self.headers


class Resolver(APIGatewayRestResolver):
    """An APIGatewayRestResolver that validates what routes return, reads form bodies with canvas_core's reader,
    judges header parameters on `headers`, and documents what its error map answers."""

    def __init__(self) -> None:
        # What a route returns is validated against its return annotation; one that does not match raises
        # ResponseValidationError, answered 500 by create_app's handler (not Powertools' 422 for a request).
        super().__init__(enable_validation=True, response_validation_error_http_code=HTTPStatus.INTERNAL_SERVER_ERROR)
        # Powertools leaves the middleware's constructor unannotated.
        self._request_validation_middleware = _RequestValidation()  # type: ignore[no-untyped-call]

    def _to_proxy_event(self, event: dict[str, Any]) -> BaseProxyEvent:
        return _ProxyEvent(event, self._json_body_deserializer)

    def get_openapi_schema(self, **kwargs: Any) -> OpenAPI:
        """Powertools' document, without the 422 this resolver never answers, with the route's own 500 (the error body)
        where Powertools puts its response validation error, and with each media type a FormBody route reads."""
        from aws_lambda_powertools.event_handler.openapi.models import RequestBody
        from aws_lambda_powertools.event_handler.openapi.models import Response as DocumentedResponse

        document = super().get_openapi_schema(**kwargs)
        internal_error = DocumentedResponse.model_validate(
            {
                "description": ERROR_STATUSES[500],
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}},
            }
        )
        for route in self._static_routes + self._dynamic_routes:
            operation = getattr((document.paths or {}).get(route.openapi_path), route.method.lower(), None)
            if operation is None:
                continue
            (operation.responses or {}).pop(422, None)
            if operation.responses and 500 in operation.responses:
                operation.responses[500] = internal_error
            spec = route.body_field.field_info if route.body_field is not None else None
            if isinstance(spec, FormBody) and isinstance(operation.requestBody, RequestBody):
                read_as = operation.requestBody.content[spec.media_type]
                operation.requestBody.content = dict.fromkeys(spec.media_types, read_as)
        schemas = document.components.schemas if document.components else None
        for name in _VALIDATION_SCHEMAS:
            (schemas or {}).pop(name, None)
        return document


def create_app(*settings: type[EnvSettings]) -> APIGatewayRestResolver:
    """The function's resolver. Its settings are read when the function starts (the API's, and `settings`, those of
    the resources only some API functions are given): a bad or missing one fails it there, not a request."""
    api_settings()
    for model in settings:
        load(model)
    app = Resolver()

    @app.exception_handler(ServiceError)  # type: ignore[untyped-decorator]
    def handle_service_error(exc: ServiceError) -> Response[Any]:
        return refused_response(exc)

    @app.exception_handler(StorageBusyError)  # type: ignore[untyped-decorator]
    def handle_busy_storage(exc: StorageBusyError) -> Response[Any]:
        # DynamoDB kept cancelling or throttling a write past its retries: nothing of it was written.
        logger.warning("Storage busy", extra={"error": str(exc)})
        return refused_response(ServiceBusyError())

    @app.exception_handler(RequestValidationError)  # type: ignore[untyped-decorator]
    def handle_validation_error(exc: RequestValidationError) -> Response[Any]:
        # Parameters and bodies are validated before the route runs; authentication still answers first (docs/api.md).
        try:
            caller_account(app)
        except ServiceError as refused:
            return refused_response(refused)
        errors = list(exc.errors())
        # A request model's validator refused the request with the contract's status and text.
        refused_by_model = refusal(errors)
        if refused_by_model is not None:
            return refused_response(refused_by_model)
        # A malformed id in the path answers the contract's text, unless something else is wrong too.
        problems = [e for e in errors if not _malformed_id(e)]
        if not problems:
            return refused_response(InvalidUuidError(str(errors[0]["loc"][-1]), errors[0]["input"]))
        listed = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in problems)
        return error_response(400, f"Invalid request: {listed}")

    @app.exception_handler(RouteNotFoundError)  # type: ignore[untyped-decorator]
    def handle_unknown_route(_: RouteNotFoundError) -> Response[Any]:
        event = app.current_event
        return error_response(404, f"Not found: {event.http_method} {event.path}")

    @app.exception_handler(ResponseValidationError)  # type: ignore[untyped-decorator]
    def handle_wrong_answer(exc: ResponseValidationError) -> Response[Any]:
        # A route returned something other than its declared model: a bug, never a body the contract does not have.
        event = app.current_event
        mismatch = [{"loc": e.get("loc"), "type": e.get("type"), "msg": e.get("msg")} for e in exc.errors()]
        request = f"{event.http_method} {event.path}"
        logger.error("Answer does not match the route's model", extra={"request": request, "mismatch": mismatch})
        return error_response(500, "Internal server error")

    @app.exception_handler(Exception)  # type: ignore[untyped-decorator]
    def handle_unexpected(exc: Exception) -> Response[Any]:
        logger.exception("Unexpected error")
        return error_response(500, "Internal server error")

    return app


def _malformed_id(error: Mapping[str, Any]) -> bool:
    return error["loc"][0] == "path" and str(error["type"]).startswith("uuid")


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
