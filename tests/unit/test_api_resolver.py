"""canvas_core.api.app.Resolver: each resolver keeps the event and Lambda context it is resolving to itself,
so two execution environments in one process (the embedded stack) never read each other's request."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any

import pytest

from canvas_core.api.app import create_app
from tests.support import body_of, load_event

pytestmark = [pytest.mark.unit, pytest.mark.timeout(30)]


@pytest.fixture(autouse=True)
def api_environment(environment_of):
    """A resolver reads its function's settings when it is built."""
    environment_of("GetRunFunction")


RUN_A = "0a7f7c1e-1111-4c55-9a0e-2f4b8d1c7e90"
RUN_B = "0b7f7c1e-2222-4c55-9a0e-2f4b8d1c7e90"


def resolver_reporting_what_it_sees(barrier: threading.Barrier, entered: threading.Event | None = None) -> Any:
    """A resolver whose route waits until the other resolver is mid-request too, then reports what it reads."""
    app = create_app()

    @app.get("/v1/run/<run_id>")
    def seen(run_id: str) -> dict[str, Any]:
        if entered is not None:
            entered.set()
        barrier.wait()
        return {
            "run_id": run_id,
            "path": app.current_event.path,
            "request_id": app.lambda_context.aws_request_id,
        }

    return app


def test_two_resolvers_resolving_at_once_each_see_their_own_event_and_context():
    # Given two resolvers, as two execution environments of one function hold them
    barrier = threading.Barrier(2, timeout=5)
    apps = [resolver_reporting_what_it_sees(barrier) for _ in range(2)]
    requests = [
        (load_event("get_run", path_parameters={"run_id": run_id}), SimpleNamespace(aws_request_id=f"req-{name}"))
        for name, run_id in (("a", RUN_A), ("b", RUN_B))
    ]

    # When each resolves its own request in its own thread, both inside their route at the same time
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = [
            pool.submit(app.resolve, event, context) for app, (event, context) in zip(apps, requests, strict=True)
        ]
        responses = [future.result(timeout=10) for future in futures]

    # Then each read its own event and context
    assert [response["statusCode"] for response in responses] == [200, 200]
    assert body_of(responses[0]) == {"run_id": RUN_A, "path": f"/v1/run/{RUN_A}", "request_id": "req-a"}
    assert body_of(responses[1]) == {"run_id": RUN_B, "path": f"/v1/run/{RUN_B}", "request_id": "req-b"}


def test_an_unknown_route_is_reported_with_the_resolvers_own_request():
    # Given one resolver held inside its route, and another resolver
    barrier, entered = threading.Barrier(2, timeout=5), threading.Event()
    held = resolver_reporting_what_it_sees(barrier, entered)
    other = create_app()
    context = SimpleNamespace(aws_request_id="req-held")

    with ThreadPoolExecutor(max_workers=1) as pool:
        in_flight = pool.submit(held.resolve, load_event("get_run", path_parameters={"run_id": RUN_A}), context)
        assert entered.wait(timeout=5)
        # When the other resolves a path no route matches, after the held one's request began
        missing = load_event("get_run", path="/v1/nowhere", resource="/v1/nowhere", pathParameters=None)
        response = other.resolve(missing, SimpleNamespace(aws_request_id="req-other"))
        barrier.wait()
        held_response = in_flight.result(timeout=10)

    # Then the 404 names its own request, and the held resolver still reads its own
    assert response["statusCode"] == 404
    assert body_of(response) == {"success": False, "error": "Not found: GET /v1/nowhere"}
    assert body_of(held_response)["path"] == f"/v1/run/{RUN_A}"
    assert body_of(held_response)["request_id"] == "req-held"
