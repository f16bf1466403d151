"""The portal function's routes: the pages (/portal, /runs/{run_id}), their files (/portal/assets/...) and the
JSON the pages call (/portal/api/...). The JSON calls reach the same service functions as /v1, for the account of
the caller's session, in the service's `{success, data}` / `{success: false, error}` shapes: each returns its model, as
the /v1 routes do (canvas_core.api)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any
from urllib.parse import quote

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types
from aws_lambda_powertools.event_handler.exceptions import NotFoundError as RouteNotFoundError
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.event_handler.openapi.params import Query
from aws_lambda_powertools.shared.cookies import Cookie, SameSite
from pydantic import Field

from canvas_core.accounts import get_account
from canvas_core.api import SuccessBody, create_app, ok
from canvas_core.api.app import error_response
from canvas_core.errors import ServiceError
from canvas_core.keys import create_key, list_keys, revoke_key
from canvas_core.models.accounts import AccountView, ApiKeyList, ApiKeyView, CreatedApiKey
from canvas_core.models.api import ApproveRunRequest, CreateRunResponse, ListRunsResponse, RunStatusResponse
from canvas_core.models.base import Model, refusal
from canvas_core.models.webhooks import (
    WebhookDeliveryList,
    WebhookEndpointCreated,
    WebhookEndpointDeleted,
    WebhookEndpointList,
    WebhookPingSent,
)
from canvas_core.portal.pages import asset_response, error_page
from canvas_core.portal.sessions import (
    SESSION_COOKIE,
    Session,
    SignInRequiredError,
    check_csrf,
    check_same_origin,
    current_session,
    sign_in,
    sign_out,
)
from canvas_core.portal.viewer import CanvasView, canvas_view
from canvas_core.reruns import rerun_block
from canvas_core.reviews import approve_run, cancel_run
from canvas_core.runs import get_run_status, list_runs
from canvas_core.settings import (
    GatherSettings,
    ProviderSettings,
    StateMachineSettings,
    WebhookQueueSettings,
    api_settings,
)
from canvas_core.validation import RerunBlockForm


class SignInRequest(Model):
    api_key: str = Field(max_length=512)


class SessionView(Model):
    account_id: str
    csrf_token: str
    expires_at: str


class SignedOut(Model):
    signed_out: bool = True


class CreateEndpointRequest(Model):
    url: str = Field(max_length=2048)
    events: list[str] | None = None


def create_portal_app() -> APIGatewayRestResolver:
    # The portal queues pings and starts re-runs, whose spend it estimates.
    app = create_app(WebhookQueueSettings, StateMachineSettings, ProviderSettings, GatherSettings)

    # Powertools leaves exception_handler's return unannotated; the handler keeps its own signature.
    @app.exception_handler(RequestValidationError)  # type: ignore[untyped-decorator]
    def handle_validation_error(exc: RequestValidationError) -> Response[dict[str, Any]]:
        errors = list(exc.errors())
        # A request model's rule refused it (a re-run's body): its status and text, as the API answers them.
        refused = refusal(errors)
        if refused is not None:
            return error_response(refused.status_code, refused.message)
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in errors)
        return error_response(400, f"Invalid request: {problems}")

    @app.exception_handler(RouteNotFoundError)  # type: ignore[untyped-decorator]
    def handle_unknown_route(_: RouteNotFoundError) -> Response[Any]:
        """The pages' JSON keeps the service's error body; any other path is a page a browser opened."""
        event = app.current_event
        if event.path.startswith("/portal/api/"):
            return error_response(404, f"Not found: {event.http_method} {event.path}")
        return error_page(404, "Page not found", f"There is no page at {event.path}.", event.path)

    def session() -> Session:
        return current_session(app.current_event.resolved_cookies_field.get(SESSION_COOKIE))

    def changing() -> Session:
        """The session of a call that changes state: same origin, and the session's CSRF token."""
        headers = app.current_event.headers
        check_same_origin(headers)
        live = session()
        check_csrf(live, headers)
        return live

    # ---- pages and their files

    @app.get("/portal")
    def portal_page() -> Response[str]:
        if app.current_event.path.endswith("/"):
            # The page's links are relative to /portal: /portal/ would resolve them one folder too deep.
            return Response(status_code=308, headers={"Location": "../portal"}, body="")
        return asset_response("portal.html")

    @app.get("/portal/assets/<name>")
    def portal_asset(name: str) -> Response[str]:
        return asset_response(name)

    @app.get("/runs/<run_id>")
    def viewer_page(run_id: str) -> Response[str]:
        try:
            account_id = session().account_id
        except SignInRequiredError:
            # To the sign-in, which returns here: `next` is relative to the portal's folder, as this page is.
            next_page = quote(f"runs/{quote(run_id, safe='')}", safe="")
            return Response(status_code=303, headers={"Location": f"../portal?next={next_page}"}, body="")
        try:
            get_run_status(run_id, account_id)  # another account's run is not found
        except ServiceError as refused:
            title = "Run not found" if refused.status_code == 404 else "This run cannot be shown"
            return error_page(refused.status_code, title, refused.message, app.current_event.path)
        return asset_response("viewer.html")

    # ---- session

    @app.post("/portal/api/session")
    def open_session(request: SignInRequest) -> Response[SuccessBody[SessionView]]:
        check_same_origin(app.current_event.headers)
        lifetime = api_settings().portal_session_seconds
        client_address = app.current_event.request_context.identity.source_ip
        token, opened = sign_in(request.api_key, lifetime, client_address=client_address)
        cookie = Cookie(
            name=SESSION_COOKIE,
            value=token,
            path="/",
            secure=True,
            http_only=True,
            same_site=SameSite.STRICT_MODE,
            max_age=lifetime,
        )
        return Response(
            status_code=200,
            content_type=content_types.APPLICATION_JSON,
            body=ok(_session_view(opened)),
            cookies=[cookie],
        )

    @app.get("/portal/api/session")
    def read_session() -> SuccessBody[SessionView]:
        return ok(_session_view(session()))

    @app.delete("/portal/api/session")
    def close_session() -> Response[SuccessBody[SignedOut]]:
        sign_out(changing())
        expired = Cookie(
            name=SESSION_COOKIE,
            value="",
            path="/",
            secure=True,
            http_only=True,
            same_site=SameSite.STRICT_MODE,
            max_age=0,
        )
        return Response(
            status_code=200,
            content_type=content_types.APPLICATION_JSON,
            body=ok(SignedOut()),
            cookies=[expired],
        )

    # ---- account, keys, runs

    @app.get("/portal/api/account")
    def account() -> SuccessBody[AccountView]:
        return ok(get_account(session().account_id))

    @app.get("/portal/api/keys")
    def keys() -> SuccessBody[ApiKeyList]:
        return ok(list_keys(session().account_id), exclude_none=False)

    @app.post("/portal/api/keys")
    def new_key() -> SuccessBody[CreatedApiKey]:
        return ok(create_key(changing().account_id), exclude_none=False)

    @app.delete("/portal/api/keys/<key_id>")
    def revoked_key(key_id: str) -> SuccessBody[ApiKeyView]:
        return ok(revoke_key(changing().account_id, key_id), exclude_none=False)

    @app.get("/portal/api/runs")
    def runs(
        limit: Annotated[int, Query(ge=1, le=100)] = 20,
        cursor: Annotated[str | None, Query()] = None,
    ) -> SuccessBody[ListRunsResponse]:
        return ok(list_runs(session().account_id, limit, cursor), exclude_none=False)

    @app.get("/portal/api/runs/<run_id>/canvas")
    def run_canvas(run_id: str) -> SuccessBody[CanvasView]:
        return ok(canvas_view(run_id, session().account_id))

    @app.post("/portal/api/canvas/<canvas_id>/blocks/<block_id>/rerun")
    def rerun(canvas_id: str, block_id: str, request: RerunBlockForm) -> SuccessBody[CreateRunResponse]:
        """The viewer's Re-run: POST /v1/canvas/{canvas_id}/blocks/{block_id}/rerun for the session's account."""
        return ok(rerun_block(canvas_id, block_id, request, changing().account_id))

    @app.post("/portal/api/runs/<run_id>/approve")
    def approved_run(run_id: str) -> SuccessBody[RunStatusResponse]:
        """The viewer's Approve: POST /v1/run/{run_id}/approve, the plan as it is, for the session's account."""
        return ok(approve_run(run_id, changing().account_id, ApproveRunRequest()))

    @app.post("/portal/api/runs/<run_id>/cancel")
    def cancelled_run(run_id: str) -> SuccessBody[RunStatusResponse]:
        """The viewer's Cancel: POST /v1/run/{run_id}/cancel for the session's account."""
        return ok(cancel_run(run_id, changing().account_id))

    # ---- webhook endpoints (canvas_core.webhooks.endpoints, shared with /v1/webhook_endpoints); nulls kept, as
    # the portal's pages have always read them

    @app.get("/portal/api/webhook_endpoints")
    def endpoints() -> SuccessBody[WebhookEndpointList]:
        listed = _webhooks().list_endpoints(session().account_id)
        return ok(WebhookEndpointList(endpoints=listed), exclude_none=False)

    @app.post("/portal/api/webhook_endpoints")
    def new_endpoint(request: CreateEndpointRequest) -> SuccessBody[WebhookEndpointCreated]:
        created = _webhooks().create_endpoint(changing().account_id, request.url, request.events)
        return ok(created, exclude_none=False)

    @app.delete("/portal/api/webhook_endpoints/<endpoint_id>")
    def removed_endpoint(endpoint_id: str) -> SuccessBody[WebhookEndpointDeleted]:
        _webhooks().delete_endpoint(changing().account_id, endpoint_id)
        return ok(WebhookEndpointDeleted(id=endpoint_id), exclude_none=False)

    @app.post("/portal/api/webhook_endpoints/<endpoint_id>/rotate_secret")
    def rotated_endpoint(endpoint_id: str) -> SuccessBody[WebhookEndpointCreated]:
        return ok(_webhooks().rotate_secret(changing().account_id, endpoint_id), exclude_none=False)

    @app.post("/portal/api/webhook_endpoints/<endpoint_id>/ping")
    def pinged_endpoint(endpoint_id: str) -> SuccessBody[WebhookPingSent]:
        event_id = _webhooks().ping(changing().account_id, endpoint_id)
        return ok(WebhookPingSent(event_id=event_id), exclude_none=False)

    @app.get("/portal/api/webhook_endpoints/<endpoint_id>/deliveries")
    def deliveries(endpoint_id: str) -> SuccessBody[WebhookDeliveryList]:
        listed = _webhooks().list_deliveries(session().account_id, endpoint_id)
        return ok(WebhookDeliveryList(deliveries=listed), exclude_none=False)

    return app


class WebhooksUnavailableError(ServiceError):
    status_code = 501

    def __init__(self) -> None:
        super().__init__("Webhook endpoints are not available in this deployment")


def _webhooks() -> Any:
    try:
        from canvas_core.webhooks import endpoints
    except ImportError:
        raise WebhooksUnavailableError() from None
    return endpoints


def _session_view(session: Session) -> SessionView:
    expires = datetime.fromtimestamp(session.expires_at, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    return SessionView(account_id=session.account_id, csrf_token=session.csrf_token, expires_at=expires)


__all__ = ["create_portal_app"]
