"""docs/openapi.json and the server agree: schemathesis generates requests for every /v1 operation from the document
(valid ones and ones the document says are invalid), sends them to the embedded stack with a valid key, and checks
each answer against the document: no 5xx, a status the operation documents, a documented content type, and a body
its schema for that status accepts. The seed is fixed, so a run is repeatable and a failure names its case."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, seed, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from canvas_local.stack import LocalStack
from tests.e2e.conftest import KEY_A, KEY_B, poll_until_finished

pytestmark = [pytest.mark.e2e]

DOCUMENT = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"
SEED = 20261201
# Per operation; the document has 19, so 380 generated requests in all.
CASES_PER_OPERATION = 20
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


@pytest.fixture(scope="module")
def service() -> Iterator[LocalStack]:
    """The embedded stack, taking webhook endpoints on loopback (a generated public host name does not resolve)."""
    with LocalStack(api_keys=[KEY_A, KEY_B], parameter_overrides={"WebhookAllowPrivateAddresses": "true"}) as stack:
        yield stack


schema = schemathesis.openapi.from_path(DOCUMENT)


@schema.parametrize()
@seed(SEED)
@settings(
    max_examples=CASES_PER_OPERATION,
    deadline=None,
    database=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
def test_every_answer_is_one_the_openapi_document_describes(case: schemathesis.Case, service: LocalStack) -> None:
    case.call_and_validate(base_url=service.base_url, headers={"X-API-KEY": KEY_A}, checks=CHECKS)


# Generated ids name nothing, so the answers above about runs, canvases, tasks, keys and endpoints are errors. These
# requests name real ones, so that each operation's success answer is checked against the document too. They are
# another account's, whose concurrent runs and run starts the generated requests have not used up.


@pytest.fixture(scope="module")
def http(service: LocalStack) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=service.base_url, headers={"X-API-KEY": KEY_B}, timeout=30) as client:
        yield client


def call(service: LocalStack, method: str, path: str, expect: int = 200, **parts: Any) -> dict[str, Any]:
    """The operation's answer to a request of these parts, once schemathesis has checked it against the document."""
    case = schema[path][method].Case(**parts)
    response = case.call_and_validate(base_url=service.base_url, headers={"X-API-KEY": KEY_B}, checks=CHECKS)
    assert response.status_code == expect, f"{method} {path}: {response.status_code} {response.text}"
    answer: dict[str, Any] = response.json()
    return answer


FORM = "application/x-www-form-urlencoded"


def wait_until_planned(http: httpx.Client, run_id: str, timeout: float = 60) -> None:
    """Until the review run waits for its approval (or has ended)."""
    deadline = time.monotonic() + timeout
    while not (data := http.get(f"/v1/run/{run_id}").json()["data"]).get("awaiting_approval"):
        assert data["status"] == "running" and time.monotonic() < deadline, data
        time.sleep(0.1)


def test_a_run_its_canvas_its_tasks_and_a_rerun_are_answered_as_documented(service, http):
    # Given a run created through the document's operation
    created = call(
        service,
        "POST",
        "/v1/run",
        body={"prompt": "Tide pools", "blocks": '["prompt-block","text-block"]'},
        media_type=FORM,
    )["data"]
    run = {"run_id": created["run_id"]}
    canvas = {"canvas_id": created["canvas_id"]}

    # When it is read while it runs and once it has ended, with its canvas, its tasks and a page of runs
    call(service, "GET", "/v1/run/{run_id}", path_parameters=run)
    poll_until_finished(http, created["run_id"])
    call(service, "GET", "/v1/run/{run_id}", path_parameters=run)
    page = call(service, "GET", "/v1/runs", query={"limit": 1})["data"]
    call(service, "GET", "/v1/runs", query={"limit": 1, "cursor": page["next_cursor"]})
    dag = call(service, "GET", "/v1/canvas/{canvas_id}/dag", path_parameters=canvas)["data"]
    node = dag["nodes"][-1]["id"]
    call(service, "GET", "/v1/canvas/{canvas_id}/dag", path_parameters=canvas, query={"node": node, "offset": 0})
    tasks = call(service, "GET", "/v1/canvas/{canvas_id}/tasks", path_parameters=canvas)["data"]
    task = {**canvas, "task_id": tasks["completed"][0]["task_id"]}
    call(service, "GET", "/v1/canvas/{canvas_id}/tasks/{task_id}", path_parameters=task)
    # And a block of it is run again
    rerun = call(
        service,
        "POST",
        "/v1/canvas/{canvas_id}/blocks/{block_id}/rerun",
        path_parameters={**canvas, "block_id": node},
        body={"instructions": "Shorter"},
        media_type="application/json",
    )["data"]
    poll_until_finished(http, rerun["run_id"])
    call(service, "GET", "/v1/run/{run_id}", path_parameters={"run_id": rerun["run_id"]})

    # Then every answer was one the document describes (call_and_validate checked each)


def test_review_approve_and_cancel_are_answered_as_documented(service, http):
    # Given two runs waiting for approval
    body = {"prompt": "A memo on tide tables", "template": "memo", "review": True}
    waiting = [call(service, "POST", "/v1/run", body=body, media_type=FORM)["data"]["run_id"] for _ in range(2)]
    for run_id in waiting:
        wait_until_planned(http, run_id)
        # When one is read waiting
        call(service, "GET", "/v1/run/{run_id}", path_parameters={"run_id": run_id})

    # When one is approved and the other cancelled, then cancelled again once it has ended (409)
    approve, cancel = ({"run_id": run_id} for run_id in waiting)
    call(service, "POST", "/v1/run/{run_id}/approve", path_parameters=approve, body={}, media_type="application/json")
    call(service, "POST", "/v1/run/{run_id}/cancel", path_parameters=cancel)
    poll_until_finished(http, cancel["run_id"])
    call(service, "POST", "/v1/run/{run_id}/cancel", expect=409, path_parameters=cancel)
    poll_until_finished(http, approve["run_id"])
    call(service, "GET", "/v1/run/{run_id}", path_parameters=approve)

    # Then every answer was one the document describes


def test_keys_the_account_and_webhook_endpoints_are_answered_as_documented(service):
    # Given the account, its keys, and a key and an endpoint made through the document's operations
    call(service, "GET", "/v1/account")
    key = call(service, "POST", "/v1/api_keys")["data"]
    call(service, "GET", "/v1/api_keys")
    endpoint = call(
        service,
        "POST",
        "/v1/webhook_endpoints",
        body={"url": "http://127.0.0.1:9/hooks", "events": ["run.completed"]},
        media_type="application/json",
    )["data"]
    target = {"endpoint_id": endpoint["id"]}

    # When the endpoint is listed, pinged, given a new secret, its deliveries read, and it and the key deleted
    call(service, "GET", "/v1/webhook_endpoints")
    call(service, "POST", "/v1/webhook_endpoints/{endpoint_id}/ping", path_parameters=target)
    call(service, "POST", "/v1/webhook_endpoints/{endpoint_id}/rotate_secret", path_parameters=target)
    call(service, "GET", "/v1/webhook_endpoints/{endpoint_id}/deliveries", path_parameters=target, query={"limit": 5})
    call(service, "DELETE", "/v1/webhook_endpoints/{endpoint_id}", path_parameters=target)
    call(service, "DELETE", "/v1/api_keys/{key_id}", path_parameters={"key_id": key["id"]})

    # Then every answer was one the document describes
