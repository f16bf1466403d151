"""canvas_local.lambda_runtime: a function as a pool of execution environments, each with the handler's module
and canvas_core's logger to itself, serving one invocation at a time up to the function's concurrency."""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from canvas_core import observability
from canvas_core.settings import SettingsError
from canvas_local import lambda_runtime
from canvas_local.lambda_runtime import LocalFunction, Throttled
from canvas_local.template import FunctionSpec

pytestmark = [pytest.mark.unit, pytest.mark.timeout(60)]

# A handler file as a function folder holds it: its module globals are what an environment keeps between
# invocations. `barrier` makes two invocations overlap; the key is appended before it and read after it.
HANDLER_SOURCE = """
from canvas_core.observability import logger

INVOCATIONS = 0


def handler(event, context):
    global INVOCATIONS
    INVOCATIONS += 1
    if "marker" in event:
        logger.append_keys(marker=event["marker"])
    if "barrier" in event:
        event["barrier"].wait(timeout=5)
    logger.info(f"served {event.get('marker')}")
    return {"module": __name__, "invocations": INVOCATIONS, "keys": dict(logger.get_current_keys())}
"""


class Gate:
    """A handler that reports it has started, then holds its environment until released."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self._lock = threading.Lock()
        self.inside = 0
        self.most_inside = 0

    def handler(self, event: Any, context: Any) -> str:
        with self._lock:
            self.inside += 1
            self.most_inside = max(self.most_inside, self.inside)
        self.entered.set()
        try:
            assert self.release.wait(timeout=10), "the test never released the gate"
            return "done"
        finally:
            with self._lock:
                self.inside -= 1


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(max_workers=4, thread_name_prefix="caller") as executor:
        yield executor


@pytest.fixture
def gate() -> Iterator[Gate]:
    opened = Gate()
    yield opened
    opened.release.set()  # a failed test must not leave a caller blocked


@pytest.fixture
def handler_file(tmp_path: Path) -> Iterator[Callable[[str, int], LocalFunction]]:
    """`make(name, concurrency)`: a function over tmp_path/app.py, loaded as the stack loads template functions
    (each environment imports the file as a module of its own)."""
    (tmp_path / "app.py").write_text(HANDLER_SOURCE)
    before = set(sys.modules)

    def make(name: str, concurrency: int) -> LocalFunction:
        spec = FunctionSpec(name, code_dir=tmp_path, handler="app.handler", timeout_seconds=3, memory_mb=128)
        return spec.local_function(concurrency)

    yield make
    for module in set(sys.modules) - before:
        if module.startswith("canvas_fn_"):
            del sys.modules[module]


def wait_until(condition: Callable[[], bool], timeout: float = 5) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.01)


def overlapping(pool: ThreadPoolExecutor, function: LocalFunction, *events: dict[str, Any]) -> list[Any]:
    futures: list[Future] = [pool.submit(function.call, event) for event in events]
    return [future.result(timeout=10) for future in futures]


# ---------------------------------------------------------------- environments on demand


def test_environments_are_created_on_demand_up_to_the_concurrency_and_reused_after(pool, gate):
    # Given a function of concurrency 2
    loads: list[int] = []

    def load() -> Callable[[Any, Any], Any]:
        loads.append(1)
        return lambda event, context: gate.handler(event, context) if event.get("hold") else "quick"

    function = LocalFunction("Pooled", load, concurrency=2)

    # When it serves three calls one after another
    answers = [function.call({}) for _ in range(3)]

    # Then one environment served them all: one cold start, two warm ones
    assert answers == ["quick"] * 3
    assert (function.environments, function.cold_starts, len(loads)) == (1, 1, 1)

    # When three calls overlap
    held = [pool.submit(function.call, {"hold": True}) for _ in range(3)]
    wait_until(lambda: gate.inside == 2)
    time.sleep(0.2)  # the third caller is waiting for an environment meanwhile
    gate.release.set()

    # Then all are served, never more than two at once, by two environments
    assert [future.result(timeout=10) for future in held] == ["done"] * 3
    assert gate.most_inside == 2
    assert (function.environments, function.cold_starts, len(loads)) == (2, 2, 2)

    # And a later call is warm
    assert function.call({}) == "quick"
    assert (function.environments, function.cold_starts) == (2, 2)


def test_a_second_concurrent_call_gets_an_environment_whose_module_globals_are_its_own(pool, handler_file):
    # Given a function whose module counts its invocations, warmed by one call
    function = handler_file("Counter", 2)
    first = function.call({})
    assert first["invocations"] == 1

    # When two calls overlap (each waits for the other inside the handler)
    barrier = threading.Barrier(2)
    a, b = overlapping(pool, function, {"barrier": barrier}, {"barrier": barrier})

    # Then the second ran in a module of its own, counting from one, while the warm one counted on
    assert a["module"] != b["module"]
    assert first["module"] in (a["module"], b["module"])
    assert sorted([a["invocations"], b["invocations"]]) == [1, 2]
    assert function.environments == 2


def test_a_load_that_returns_a_fresh_closure_gives_each_environment_its_own_state(pool):
    # Given a load that builds the handler with state of its own, as a module import does
    def load() -> Callable[[Any, Any], Any]:
        seen: list[str] = []

        def handler(event: dict[str, Any], context: Any) -> list[str]:
            seen.append(event["name"])
            event["barrier"].wait(timeout=5)
            return list(seen)

        return handler

    function = LocalFunction("Closures", load, concurrency=2)

    # When two calls overlap
    barrier = threading.Barrier(2)
    a, b = overlapping(pool, function, {"name": "a", "barrier": barrier}, {"name": "b", "barrier": barrier})

    # Then neither environment saw the other's event
    assert (a, b) == (["a"], ["b"])


# ---------------------------------------------------------------- throttling and closing


def test_a_call_that_finds_every_environment_busy_for_its_wait_is_throttled(pool, gate):
    # Given a function of concurrency 1 whose one environment is busy
    function = LocalFunction.of("Busy", gate.handler, concurrency=1)
    busy = pool.submit(function.call, {})
    assert gate.entered.wait(timeout=5)

    # When another call waits at most 0.2 s
    started = time.monotonic()
    with pytest.raises(Throttled) as caught:
        function.call({}, wait=0.2)
    waited = time.monotonic() - started

    # Then it is throttled after its wait, as Lambda's TooManyRequestsException names the function
    assert 0.2 <= waited < 2
    assert caught.value.function_name == "Busy"
    assert str(caught.value) == "Rate exceeded: Busy is at its concurrency of 1"
    # And once the environment is free, calls go through again
    gate.release.set()
    assert busy.result(timeout=5) == "done"
    assert function.call({}, wait=0.2) == "done"
    assert function.environments == 1


def test_close_throttles_the_callers_waiting_and_those_after_and_lets_the_one_in_flight_finish(pool, gate):
    # Given a busy function of concurrency 1, and a caller waiting for it without a limit
    function = LocalFunction.of("Closing", gate.handler, concurrency=1)
    in_flight = pool.submit(function.call, {})
    assert gate.entered.wait(timeout=5)
    waiting = pool.submit(function.call, {})
    time.sleep(0.1)

    # When the function is closed
    function.close()

    # Then the waiting caller and any later one are throttled
    with pytest.raises(Throttled):
        waiting.result(timeout=5)
    with pytest.raises(Throttled):
        function.call({})
    # And the invocation in flight ends normally, after which no environment is left
    gate.release.set()
    assert in_flight.result(timeout=5) == "done"
    assert function.environments == 0


# ---------------------------------------------------------------- failures


def test_an_init_failure_discards_the_environment_and_the_next_call_retries_the_init():
    # Given a function whose first init fails (its module raises on import)
    attempts: list[int] = []

    def load() -> Callable[[Any, Any], Any]:
        attempts.append(1)
        if len(attempts) == 1:
            raise ImportError("No module named 'docx'")
        return lambda event, context: "ready"

    function = LocalFunction("Init", load, concurrency=1)

    # When it is called twice
    with pytest.raises(ImportError, match="docx"):
        function.call({})
    environments_after_failure = function.environments
    answer = function.call({}, wait=1)

    # Then the failed environment was dropped and the second call paid a new init, which succeeded
    assert environments_after_failure == 0
    assert answer == "ready"
    assert (len(attempts), function.cold_starts, function.environments) == (2, 2, 1)


def test_a_handler_exception_keeps_the_environment_warm():
    # Given a function whose handler raises for one event
    loads: list[int] = []

    def load() -> Callable[[Any, Any], Any]:
        loads.append(1)

        def handler(event: dict[str, Any], context: Any) -> str:
            if event.get("fail"):
                raise ValueError(event["fail"])
            return "ok"

        return handler

    function = LocalFunction("Raises", load, concurrency=1)

    # When the handler raises, then is called again
    with pytest.raises(ValueError, match="bad block"):
        function.call({"fail": "bad block"})
    answer = function.call({}, wait=1)

    # Then the same environment served both: no second init
    assert answer == "ok"
    assert (len(loads), function.cold_starts, function.environments) == (1, 1, 1)


def test_invoke_answers_lambdas_unhandled_payload_for_an_exception():
    # Given a handler that raises
    def plan_canvas(event: Any, context: Any) -> None:
        raise RuntimeError("planner unavailable")

    function = LocalFunction.of("PlanCanvas", plan_canvas)

    # When it is invoked as Lambda's Invoke would
    invocation = function.invoke({"run_id": "r-1"})

    # Then the error is the payload, marked Unhandled, with the handler's frames only
    assert invocation.function_error == "Unhandled"
    payload = invocation.payload
    assert payload["errorType"] == "RuntimeError"
    assert payload["errorMessage"] == "planner unavailable"
    assert payload["requestId"]
    assert any("plan_canvas" in frame for frame in payload["stackTrace"])
    assert not any("canvas_local/lambda_runtime.py" in frame for frame in payload["stackTrace"])
    # And the environment is kept
    assert function.environments == 1


def test_invoke_answers_unhandled_for_an_init_failure_and_drops_the_environment():
    # Given a function whose init fails
    def load() -> Callable[[Any, Any], Any]:
        raise ImportError("No module named 'pptx'")

    function = LocalFunction("BrokenInit", load)

    # When it is invoked
    invocation = function.invoke({})

    # Then
    assert invocation.function_error == "Unhandled"
    assert invocation.payload["errorType"] == "ImportError"
    assert function.environments == 0


def test_invoke_answers_json_as_lambda_does():
    # Given handlers returning a tuple and something JSON cannot hold
    tuple_function = LocalFunction.of("Tuple", lambda event, context: ("a", 1))
    set_function = LocalFunction.of("Set", lambda event, context: {"ids": {1, 2}})

    # When they are invoked
    # Then the tuple arrives as a list, the set as Lambda's marshalling error
    assert tuple_function.invoke({}).payload == ["a", 1]
    marshal = set_function.invoke({})
    assert marshal.function_error == "Unhandled"
    assert marshal.payload["errorType"] == "Runtime.MarshalError"


# ---------------------------------------------------------------- Lambda's limits


def test_an_invocation_past_the_functions_timeout_fails_as_lambdas_and_its_environment_is_discarded():
    # Given a function with a 1 s timeout whose handler takes longer the first time
    durations = iter([1.2, 0.0])

    def slow(event: Any, context: Any) -> str:
        time.sleep(next(durations))
        return "late"

    function = LocalFunction.of("Slow", slow, timeout_seconds=1)

    # When it is invoked
    invocation = function.invoke({})

    # Then Lambda's timeout is the answer, whatever the handler returned, and the environment is gone
    assert invocation.function_error == "Unhandled"
    assert invocation.payload["errorType"] == "Sandbox.Timedout"
    assert invocation.payload["errorMessage"].endswith("Error: Task timed out after 1.00 seconds")
    assert function.environments == 0
    # And the next invocation starts a new one
    assert function.invoke({}).payload == "late"
    assert (function.cold_starts, function.environments) == (2, 1)


def test_a_call_past_the_timeout_raises_lambdas_error_even_when_the_handler_raised():
    def slow_failure(event: Any, context: Any) -> None:
        time.sleep(1.1)
        raise RuntimeError("too late to be seen")

    function = LocalFunction.of("SlowFailure", slow_failure, timeout_seconds=1)
    with pytest.raises(lambda_runtime.FunctionError, match=r"Task timed out after 1\.00 seconds") as raised:
        function.call({})
    assert raised.value.payload["errorType"] == "Sandbox.Timedout"
    assert function.environments == 0


def test_a_response_over_six_megabytes_fails_as_lambdas_and_one_at_the_limit_does_not():
    # Given handlers answering just over and exactly at Lambda's limit (a JSON string: two quotes around it)
    limit = lambda_runtime.MAX_RESPONSE_BYTES
    over = LocalFunction.of("Over", lambda event, context: "x" * (limit - 1))
    at = LocalFunction.of("At", lambda event, context: "x" * (limit - 2))

    # When they are invoked
    too_large, fits = over.invoke({}), at.invoke({})

    # Then the larger fails with Lambda's error, naming both sizes, and its environment is dropped
    assert too_large.function_error == "Unhandled"
    assert too_large.payload == {
        "errorType": "Function.ResponseSizeTooLarge",
        "errorMessage": f"Response payload size ({limit + 1} bytes) exceeded maximum allowed payload size "
        f"({limit} bytes).",
    }
    assert over.environments == 0
    assert fits.function_error is None and len(fits.payload) == limit - 2
    # And called directly (API Gateway's path) it raises the same error
    with pytest.raises(lambda_runtime.FunctionError, match="Response payload size"):
        over.call({})


# ---------------------------------------------------------------- each function's environment

SETTINGS_HANDLER_SOURCE = """
from canvas_core.settings import state_machine_settings

ARN = state_machine_settings().state_machine_arn


def handler(event, context):
    return {"at_start": ARN, "now": state_machine_settings().state_machine_arn}
"""


def test_each_function_reads_its_settings_from_its_own_environment(tmp_path, monkeypatch):
    # Given two functions of one handler file, one given a state machine, one given nothing, and the process's
    # environment naming another
    (tmp_path / "app.py").write_text(SETTINGS_HANDLER_SOURCE)
    monkeypatch.setenv("STATE_MACHINE_ARN", "arn:process")

    def function(name: str, environment: dict[str, str]) -> LocalFunction:
        spec = FunctionSpec(name, code_dir=tmp_path, handler="app.handler", timeout_seconds=3, memory_mb=128)
        return spec.local_function(1, environment)

    given, bare = function("Given", {"STATE_MACHINE_ARN": "arn:given"}), function("Bare", {})

    # When each is invoked
    answer, refusal = given.invoke({}), bare.invoke({})

    # Then each read its own environment, at its start and in its invocation; the one without the variable failed
    # its start, naming it
    assert answer.payload == {"at_start": "arn:given", "now": "arn:given"}
    assert refusal.payload["errorType"] == "SettingsError"
    assert "STATE_MACHINE_ARN is not set" in refusal.payload["errorMessage"]
    # And the start check says the same before any invocation
    with pytest.raises(SettingsError, match="STATE_MACHINE_ARN is not set"):
        bare.check_start()
    given.check_start()
    assert (given.environments, given.cold_starts) == (1, 1)


# ---------------------------------------------------------------- each environment's logger


def test_each_environment_logs_with_keys_of_its_own(pool, handler_file, log_lines):
    # Given a function whose handler appends a key to canvas_core's logger, then logs once both calls have
    function = handler_file("Logging", 2)
    barrier = threading.Barrier(2)

    # When two invocations overlap, each appending its own marker
    a, b = overlapping(pool, function, {"marker": "a", "barrier": barrier}, {"marker": "b", "barrier": barrier})

    # Then each environment's logger holds its own marker only
    assert a["keys"]["marker"] == "a"
    assert b["keys"]["marker"] == "b"
    # And each line written carries the marker of the invocation that wrote it
    served = {line["message"]: line.get("marker") for line in log_lines() if line["message"].startswith("served")}
    assert served == {"served a": "a", "served b": "b"}
    # And the process's own logger got neither
    assert "marker" not in observability.logger.get_current_keys()


def test_an_environment_that_could_not_be_created_gives_its_place_back(monkeypatch):
    # Given a function of concurrency 1 whose first environment fails while it is being set up
    failures = iter([RuntimeError("dictionary changed size during iteration")])
    real_isolation = lambda_runtime.isolation

    def isolation_failing_once(variables: Any) -> Any:
        for failure in failures:
            raise failure
        return real_isolation(variables)

    monkeypatch.setattr(lambda_runtime, "isolation", isolation_failing_once)
    function = LocalFunction.of("Fragile", lambda event, context: "served", concurrency=1)
    with pytest.raises(RuntimeError):
        function.call({})

    # When it is called again
    answer = function.call({}, wait=0.5)

    # Then a new environment serves it: the failed one holds no place in the pool
    assert answer == "served"
    assert function.environments == 1


class ReviewRequested(Exception):
    pass


def test_an_error_the_state_machine_catches_by_name_is_logged_as_info_and_others_as_errors(caplog):
    # Given a function whose state machine catches ReviewRequested by name
    def plan_canvas(event: Any, context: Any) -> None:
        if event["review"]:
            raise ReviewRequested("Run r-1 waits for approval")
        raise RuntimeError("planner unavailable")

    function = LocalFunction.of("PlanCanvasFunction", plan_canvas)
    function.caught_by_name = frozenset({"ReviewRequested"})

    # When it raises the caught error, then another
    with caplog.at_level(logging.INFO, logger=lambda_runtime.LOG.name):
        parked = function.invoke({"review": True})
        failed = function.invoke({"review": False})

    # Then both answer Lambda's Unhandled payload, as the state machine's Catch needs
    assert (parked.payload["errorType"], failed.payload["errorType"]) == ("ReviewRequested", "RuntimeError")
    # And only the other error is logged as an error
    logged = [(record.levelname, record.getMessage()) for record in caplog.records]
    assert ("INFO", "PlanCanvasFunction ended with ReviewRequested, which its state machine catches by name") in logged
    assert [message for level, message in logged if level == "ERROR"] == ["PlanCanvasFunction raised RuntimeError"]
