"""canvas_local.environments: execution environments sharing one process each have what a Lambda process has to
itself: the request its resolver is resolving, its Logger keys and metrics, and its function's variables in
`os.environ`; outside every environment the process keeps its own."""

from __future__ import annotations

import json
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any

import pytest

from canvas_core import observability
from canvas_core.api.app import create_app
from canvas_core.observability import count, metrics
from canvas_local.environments import Environment, function_environment
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


def resolve_in(environment: Environment, app: Any, event: dict, context: Any) -> dict:
    with environment.scope():
        return app.resolve(event, context)


def test_two_resolvers_resolving_at_once_each_see_their_own_event_and_context():
    # Given two resolvers, as two execution environments of one function hold them
    barrier = threading.Barrier(2, timeout=5)
    apps = [resolver_reporting_what_it_sees(barrier) for _ in range(2)]
    environments = [Environment(), Environment()]
    requests = [
        (load_event("get_run", path_parameters={"run_id": run_id}), SimpleNamespace(aws_request_id=f"req-{name}"))
        for name, run_id in (("a", RUN_A), ("b", RUN_B))
    ]

    # When each resolves its own request in its own thread, both inside their route at the same time
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = [
            pool.submit(resolve_in, environment, app, event, context)
            for environment, app, (event, context) in zip(environments, apps, requests, strict=True)
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
        event = load_event("get_run", path_parameters={"run_id": RUN_A})
        in_flight = pool.submit(resolve_in, Environment(), held, event, context)
        assert entered.wait(timeout=5)
        # When the other resolves a path no route matches, after the held one's request began
        missing = load_event("get_run", path="/v1/nowhere", resource="/v1/nowhere", pathParameters=None)
        response = resolve_in(Environment(), other, missing, SimpleNamespace(aws_request_id="req-other"))
        barrier.wait()
        held_response = in_flight.result(timeout=10)

    # Then the 404 names its own request, and the held resolver still reads its own
    assert response["statusCode"] == 404
    assert body_of(response) == {"success": False, "error": "Not found: GET /v1/nowhere"}
    assert body_of(held_response)["path"] == f"/v1/run/{RUN_A}"
    assert body_of(held_response)["request_id"] == "req-held"


# ---------------------------------------------------------------- Logger keys and metrics


@metrics.log_metrics
def counting_handler(event: dict, context: object) -> dict:
    count("BlocksCompleted", step=event["block_type"])
    return event


def emitted(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.startswith('{"_aws"')]


def test_each_environment_flushes_its_own_figures(capsys: pytest.CaptureFixture[str]) -> None:
    # Given two execution environments in one process with metrics on, the first with a figure added, not flushed
    variables = {
        "POWERTOOLS_METRICS_DISABLED": "false",
        "POWERTOOLS_METRICS_NAMESPACE": "CanvasRunService",
        "POWERTOOLS_SERVICE_NAME": "canvas-run-service",
    }
    memo, web = Environment(variables), Environment(variables)
    with memo.scope():
        count("BlockRetryableErrors", step="memo-block")
        # When the other environment's handler runs and returns meanwhile, then the first's
        with web.scope():
            counting_handler({"block_type": "web-block"}, None)
        counting_handler({"block_type": "memo-block"}, None)
    # Then each line holds its own environment's figures, under its own dimensions
    first, second = emitted(capsys.readouterr().out)
    assert (first["step"], "BlocksCompleted" in first, "BlockRetryableErrors" in first) == ("web-block", True, False)
    assert (second["step"], second["BlockRetryableErrors"], second["BlocksCompleted"]) == ("memo-block", [1.0], [1.0])
    assert second["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "CanvasRunService"
    # And the process's own figures are untouched
    assert observability.metrics.provider.metric_set == {}


def test_keys_one_environment_appends_are_its_own(log_lines: Any) -> None:
    # Given two environments, each appending a key of its own
    first, second = Environment(), Environment()
    with first.scope():
        observability.logger.append_keys(run_id="run-1")
        # When the other logs, then the first
        with second.scope():
            observability.logger.info("second")
        observability.logger.info("first")
    # Then each line carries its own environment's keys only, and the process keeps none of them
    lines = {line["message"]: line.get("run_id") for line in log_lines()}
    assert lines == {"second": None, "first": "run-1"}
    assert "run_id" not in observability.logger.get_current_keys()


# ---------------------------------------------------------------- os.environ


def test_a_function_sees_its_own_variables_over_the_hosts_and_none_given_only_to_others(monkeypatch):
    # Given the host's environment, holding a variable the template gives another function
    monkeypatch.setenv("CANVAS_TEST_HOST_ONLY", "host")
    monkeypatch.setenv("CANVAS_TEST_OTHERS", "the other function's")
    monkeypatch.delenv("CANVAS_TEST_OWN", raising=False)
    own = {"CANVAS_TEST_OWN": "own"}
    variables = function_environment(own, others={"CANVAS_TEST_OWN", "CANVAS_TEST_OTHERS"})
    # When the function reads os.environ in its environment
    with Environment(variables).scope():
        seen = {
            name: os.environ.get(name) for name in ("CANVAS_TEST_HOST_ONLY", "CANVAS_TEST_OTHERS", "CANVAS_TEST_OWN")
        }
        getenv = os.getenv("CANVAS_TEST_OWN")
    # Then it sees its own and the host's, never another function's; the process's environment is unchanged
    assert seen == {"CANVAS_TEST_HOST_ONLY": "host", "CANVAS_TEST_OTHERS": None, "CANVAS_TEST_OWN": "own"}
    assert getenv == "own"
    assert os.environ["CANVAS_TEST_OTHERS"] == "the other function's" and "CANVAS_TEST_OWN" not in os.environ


def test_a_variable_a_function_sets_is_its_own():
    # Given an environment
    environment = Environment({})
    # When its function sets a variable
    with environment.scope():
        os.environ["CANVAS_TEST_SET_INSIDE"] = "inside"
        inside = os.environ.get("CANVAS_TEST_SET_INSIDE")
    # Then it sees it, and the process does not
    assert inside == "inside" and "CANVAS_TEST_SET_INSIDE" not in os.environ
