"""The re-run of tests/e2e/test_rerun.py on a stack that injects AWS's failures: cancelled transactions, throttled
calls and Lambda service errors change nothing a user sees of a re-run. The rates are above the Makefile's E2E_FAULTS
so that each kind is met within one run and its re-run, not only most of the time."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from canvas_local.faults import Faults
from canvas_local.stack import LocalStack
from tests.e2e.conftest import KEY_A, KEY_B
from tests.e2e.reruns import rerun_analysis_and_check, three_level_plan

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

FAULTS = "transaction_conflict=0.3,throttle=0.25,lambda_error=0.02"


@pytest.fixture(scope="module")
def service() -> Iterator[LocalStack]:
    with LocalStack(api_keys=[KEY_A, KEY_B], faults=Faults.parse(FAULTS)) as stack:
        yield stack


def test_a_rerun_with_faults_injected_reuses_the_files_and_runs_what_depends_on_it_again(service, http, monkeypatch):
    monkeypatch.setattr("canvas_core.orchestration.plan_canvas", three_level_plan)
    rerun_analysis_and_check(http)
    # And faults were injected meanwhile: conflicts and throttling at least
    injected = service.fault_injector.injected if service.fault_injector else {}
    assert {"transaction_conflict", "throttle"} <= {kind for kind, n in injected.items() if n}, injected
