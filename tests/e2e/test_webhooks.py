"""Webhooks end to end on the embedded stack: real deliveries to a receiver on loopback, verified with the
unchanged public `spine` client, for a completed, a partial and a failed run and a ping; an event too large for a
queue message; a rotated secret; retries with the same event id on the retry schedule (compressed), to the
dead-letter queue after the last; a 410 disabling the endpoint; the SSRF guard at registration; and another
account's endpoint answered as unknown.

The stack runs the production schedule scaled by WebhookRetryTimeScale, so a retry comes within a second or two
(SQS delays are whole seconds), lets endpoints be on loopback (WebhookAllowPrivateAddresses), and takes prompts
long enough to make a run's event larger than a queue message carries (MaxPromptChars)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from spine import SpineClient

from bench.dags import Block, Dag, scripted
from canvas_core.webhooks.schedule import MAX_ATTEMPTS
from canvas_local.stack import LocalStack
from tests.e2e.conftest import KEY_A, KEY_B, poll_until_finished

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

spine = SpineClient(api_key="sk_spine_unused")


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    """A webhook receiver on loopback; `answers[path]` lists the statuses it gives in turn (then 200)."""

    url: str = ""
    received: list[Received] = field(default_factory=list)
    answers: dict[str, list[int]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def at(self, path: str) -> list[Received]:
        with self.lock:
            return [r for r in self.received if r.path == path]

    def wait_for(self, path: str, count: int, timeout: float = 30) -> list[Received]:
        deadline = time.monotonic() + timeout
        while len(found := self.at(path)) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"{path}: {len(found)} deliveries of {count} after {timeout}s")
            time.sleep(0.05)
        return found


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    state = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with state.lock:
                state.received.append(Received(self.path, dict(self.headers), body))
                queued = state.answers.get(self.path) or []
                status = queued.pop(0) if queued else 200
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield state
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def service() -> Iterator[LocalStack]:
    overrides = {
        "WebhookAllowPrivateAddresses": "true",
        "WebhookRetryTimeScale": "0.00002",
        "MaxPromptChars": "30000",
    }
    with LocalStack(api_keys=[KEY_A, KEY_B], parameter_overrides=overrides) as stack:
        yield stack


@pytest.fixture(scope="module")
def http(service: LocalStack) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=service.base_url, headers={"X-API-KEY": KEY_A}, timeout=30) as client:
        yield client


@pytest.fixture
def add_endpoint(http: httpx.Client, receiver: Receiver) -> Iterator:
    """`add_endpoint(path, events)` registers the receiver's path; the endpoints are deleted after the test."""
    added: list[str] = []

    def add(path: str, events: list[str]) -> dict:
        response = http.post("/v1/webhook_endpoints", json={"url": receiver.url + path, "events": events})
        assert response.status_code == 200, response.text
        added.append(response.json()["data"]["id"])
        return response.json()["data"]

    yield add
    for endpoint_id in added:
        http.delete(f"/v1/webhook_endpoints/{endpoint_id}")


def verified(delivery: Received, secret: str):
    """The event, as the unchanged spine client verifies it from the raw bytes and the header."""
    assert delivery.headers["Content-Type"] == "application/json"
    assert delivery.headers["User-Agent"].startswith("CanvasRunService-Webhooks/")
    assert delivery.headers["Canvas-Signature"] == delivery.headers["Spine-Signature"]
    return spine.webhooks.construct_event(delivery.body, delivery.headers["Spine-Signature"], secret)


def run_events(receiver: Receiver, path: str, secret: str, run_id: str, count: int) -> list:
    deadline = time.monotonic() + 30
    while True:
        events = [verified(d, secret) for d in receiver.at(path)]
        mine = [e for e in events if e.data["object"]["run_id"] == run_id]
        if len(mine) >= count or time.monotonic() > deadline:
            return mine
        time.sleep(0.05)


@pytest.mark.parametrize(
    "prompt, dag, outcome",
    [
        ("webhooks e2e: all works", Dag([Block(0.05)]), "completed"),
        ("webhooks e2e: half works", Dag([Block(0.05), Block(0.05, fail="always")]), "partial"),
        ("webhooks e2e: nothing works", Dag([Block(fail="always")]), "failed"),
    ],
)
def test_a_run_start_and_end_are_delivered_signed_with_the_run_as_get_shows_it(
    http, receiver, add_endpoint, prompt, dag, outcome
):
    # Given an endpoint for every run event
    endpoint = add_endpoint(f"/runs-{outcome}", ["run.started", "run.completed", "run.partial", "run.failed"])

    # When a run starts and ends with this outcome
    with scripted({prompt: dag}):
        run_id = http.post("/v1/run", data={"prompt": prompt}).json()["data"]["run_id"]
        final = poll_until_finished(http, run_id)
    assert final["status"] == outcome

    # Then the receiver got run.started then run.<outcome>, each verified by spine with the endpoint's secret
    events = run_events(receiver, f"/runs-{outcome}", endpoint["secret"], run_id, 2)
    assert sorted(e.type for e in events) == sorted(["run.started", f"run.{outcome}"])
    ended = next(e for e in events if e.type == f"run.{outcome}")
    started = next(e for e in events if e.type == "run.started")
    assert ended.id.startswith("evt_") and ended.id != started.id
    assert ended.livemode is False and ended.api_version == "2026-11-01"
    # And the ended run's object is GET /v1/run/{run_id}'s data (download URLs are signed anew on each read)
    assert _without_urls(ended.data["object"]) == _without_urls(http.get(f"/v1/run/{run_id}").json()["data"])
    assert started.data["object"]["run_id"] == run_id

    # And the deliveries are listed, newest first (an attempt is recorded once its answer is in: a moment after the
    # receiver has it, longer when the write meets throttling)
    deadline = time.monotonic() + 15
    while True:
        listed = http.get(f"/v1/webhook_endpoints/{endpoint['id']}/deliveries").json()["data"]["deliveries"]
        recorded = {(d["event_id"], d["status_code"], d["attempt"]) for d in listed}
        if recorded >= {(ended.id, 200, 1)} or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert recorded >= {(ended.id, 200, 1)}


def test_a_reruns_start_and_end_are_delivered_with_what_it_reran(http, receiver, add_endpoint):
    # Given a finished run, and an endpoint for every run event
    prompt = "webhooks e2e: re-run"
    with scripted({prompt: Dag([Block(0.05), Block(0.05)], [(0, 1)])}):
        source = poll_until_finished(http, http.post("/v1/run", data={"prompt": prompt}).json()["data"]["run_id"])
        last = http.get(f"/v1/canvas/{source['canvas_id']}/dag").json()["data"]["nodes"][-1]
        endpoint = add_endpoint("/reruns", ["run.started", "run.completed", "run.partial", "run.failed"])

        # When its last block is re-run
        response = http.post(f"/v1/canvas/{source['canvas_id']}/blocks/{last['id']}/rerun", json={})
        assert response.status_code == 200, response.text
        run_id = response.json()["data"]["run_id"]
        assert poll_until_finished(http, run_id)["status"] == "completed"

    # Then the receiver got the re-run's run.started and run.completed, the latter with what it re-ran
    events = run_events(receiver, "/reruns", endpoint["secret"], run_id, 2)
    assert sorted(e.type for e in events) == ["run.completed", "run.started"]
    ended = next(e for e in events if e.type == "run.completed")
    assert ended.data["object"]["metadata"]["rerun_of"] == {
        "run_id": source["run_id"],
        "canvas_id": source["canvas_id"],
        "block_id": last["id"],
    }


def test_a_run_event_larger_than_a_queue_message_carries_is_delivered_whole(http, receiver, add_endpoint):
    # Given an endpoint for run starts and completions, and a prompt that makes the run's events larger than 96 KB
    endpoint = add_endpoint("/large", ["run.started", "run.completed"])
    prompt = "webhooks e2e: a long prompt " + "\N{WATER WAVE}" * 25_000

    # When the run starts and ends, with a document to download
    created = http.post("/v1/run", data={"prompt": prompt, "blocks": '["document-block"]'})
    run_id = created.json()["data"]["run_id"]
    assert poll_until_finished(http, run_id)["status"] == "completed"

    # Then both events arrive whole and verified, the completion with the document's download
    events = {e.type: e for e in run_events(receiver, "/large", endpoint["secret"], run_id, 2)}
    assert all(len(d.body) > 96 * 1024 for d in receiver.at("/large"))
    assert events["run.started"].data["object"]["prompt"] == prompt
    (document,) = events["run.completed"].data["object"]["result"]["artifacts"]
    assert document["name"].endswith(".docx") and document["download_url"]


def test_a_run_started_event_shows_the_run_running_with_its_progress(http, receiver, add_endpoint):
    # Given an endpoint for run starts, and a run whose block works until the test lets it end
    endpoint = add_endpoint("/started", ["run.started"])
    prompt = "webhooks e2e: still going"
    with scripted({prompt: Dag([Block(hang=True)])}) as script:
        run_id = http.post("/v1/run", data={"prompt": prompt}).json()["data"]["run_id"]

        # When its start is delivered
        (event,) = run_events(receiver, "/started", endpoint["secret"], run_id, 1)
        script.release()
        poll_until_finished(http, run_id)

    # Then the event's run is running, with its progress, as GET /v1/run/{run_id} showed it then
    run = event.data["object"]
    assert run["status"] == "running" and "tasks_total" in run["progress"], run


def test_a_rotated_secret_signs_the_next_delivery(http, receiver, add_endpoint):
    endpoint = add_endpoint("/rotated", ["webhook.ping"])

    rotated = http.post(f"/v1/webhook_endpoints/{endpoint['id']}/rotate_secret")
    http.post(f"/v1/webhook_endpoints/{endpoint['id']}/ping")

    assert rotated.status_code == 200, rotated.text
    secret = rotated.json()["data"]["secret"]
    assert secret not in (None, endpoint["secret"])
    (delivery,) = receiver.wait_for("/rotated", 1)
    assert verified(delivery, secret).type == "webhook.ping"


def test_a_ping_is_delivered_with_the_endpoint_as_its_object(http, receiver, add_endpoint):
    endpoint = add_endpoint("/ping", ["webhook.ping"])

    response = http.post(f"/v1/webhook_endpoints/{endpoint['id']}/ping")

    assert response.status_code == 200, response.text
    (delivery,) = receiver.wait_for("/ping", 1)
    event = verified(delivery, endpoint["secret"])
    assert (event.id, event.type) == (response.json()["data"]["event_id"], "webhook.ping")
    assert event.data["object"] == {k: v for k, v in endpoint.items() if k != "secret"}
    assert delivery.headers["Canvas-Event-Id"] == event.id


def test_a_receiver_that_fails_twice_gets_the_same_event_three_times_and_then_no_more(http, receiver, add_endpoint):
    # Given a receiver that answers 500, then 503, then 200
    receiver.answers["/flaky"] = [500, 503]
    endpoint = add_endpoint("/flaky", ["webhook.ping"])

    # When it is pinged
    event_id = http.post(f"/v1/webhook_endpoints/{endpoint['id']}/ping").json()["data"]["event_id"]

    # Then it got the same event, same bytes, three times, each signed validly
    deliveries = receiver.wait_for("/flaky", 3)
    assert [verified(d, endpoint["secret"]).id for d in deliveries] == [event_id] * 3
    assert len({d.body for d in deliveries}) == 1
    # And no more after the 200
    time.sleep(3)
    assert len(receiver.at("/flaky")) == 3
    listed = http.get(f"/v1/webhook_endpoints/{endpoint['id']}/deliveries").json()["data"]["deliveries"]
    assert [(d["attempt"], d["status_code"]) for d in listed] == [(3, 200), (2, 503), (1, 500)]
    assert listed[1]["next_retry"] is not None and listed[0]["next_retry"] is None


def test_a_receiver_that_always_fails_gets_every_attempt_then_the_event_is_set_aside(
    service, http, receiver, add_endpoint
):
    # Given a receiver that answers 500 to every attempt of the schedule
    receiver.answers["/down"] = [500] * MAX_ATTEMPTS
    endpoint = add_endpoint("/down", ["webhook.ping"])

    # When it is pinged
    event_id = http.post(f"/v1/webhook_endpoints/{endpoint['id']}/ping").json()["data"]["event_id"]

    # Then it got every attempt, the last listed with no retry to come, and no more
    receiver.wait_for("/down", MAX_ATTEMPTS, timeout=60)
    time.sleep(1.5)
    assert len(receiver.at("/down")) == MAX_ATTEMPTS
    newest = http.get(f"/v1/webhook_endpoints/{endpoint['id']}/deliveries").json()["data"]["deliveries"][0]
    assert (newest["attempt"], newest["status_code"], newest["next_retry"]) == (MAX_ATTEMPTS, 500, None)
    # And the delivery is set aside in the dead-letter queue
    sqs = service.client("sqs")
    queue_url = service.queue_urls["WebhookDeadLetterQueue"]
    messages = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get("Messages", [])
    assert event_id in {json.loads(m["Body"]).get("event_id") for m in messages}


def test_a_receiver_that_answers_410_is_disabled(http, receiver, add_endpoint):
    receiver.answers["/gone"] = [410]
    endpoint = add_endpoint("/gone", ["webhook.ping"])

    http.post(f"/v1/webhook_endpoints/{endpoint['id']}/ping")

    receiver.wait_for("/gone", 1)
    deadline = time.monotonic() + 10
    while True:
        (listed,) = [
            e for e in http.get("/v1/webhook_endpoints").json()["data"]["endpoints"] if e["id"] == endpoint["id"]
        ]
        if listed["status"] == "disabled" or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert listed["status"] == "disabled" and "410" in listed["disabled_reason"]
    assert http.post(f"/v1/webhook_endpoints/{endpoint['id']}/ping").status_code == 409
    time.sleep(1.5)
    assert len(receiver.at("/gone")) == 1


def test_metadata_addresses_are_refused_at_registration_even_with_private_addresses_allowed(http):
    response = http.post("/v1/webhook_endpoints", json={"url": "http://169.254.169.254/latest/meta-data"})
    assert response.status_code == 400
    assert "cloud metadata address" in response.json()["error"]


def test_another_accounts_endpoint_and_deliveries_are_404(service, http, add_endpoint):
    endpoint = add_endpoint("/private", ["webhook.ping"])
    with httpx.Client(base_url=service.base_url, headers={"X-API-KEY": KEY_B}, timeout=30) as other:
        assert other.get(f"/v1/webhook_endpoints/{endpoint['id']}/deliveries").status_code == 404
        assert other.post(f"/v1/webhook_endpoints/{endpoint['id']}/ping").status_code == 404
        assert other.delete(f"/v1/webhook_endpoints/{endpoint['id']}").status_code == 404
        assert endpoint["id"] not in {e["id"] for e in other.get("/v1/webhook_endpoints").json()["data"]["endpoints"]}
    assert http.get(f"/v1/webhook_endpoints/{endpoint['id']}/deliveries").status_code == 200


def _without_urls(run: dict) -> dict:
    artifacts = [
        {k: v for k, v in a.items() if k != "download_url"} for a in (run.get("result") or {}).get("artifacts", [])
    ]
    return run | ({"result": run["result"] | {"artifacts": artifacts}} if "result" in run else {})


def test_a_run_the_stack_stops_in_flight_is_delivered_as_failed(receiver):
    # Given a stack of its own, an endpoint for failures, and a run that takes longer than the test waits
    overrides = {"WebhookAllowPrivateAddresses": "true", "WebhookRetryTimeScale": "0.0001"}
    stack = LocalStack(api_keys=[KEY_A], parameter_overrides=overrides).start()
    try:
        with httpx.Client(base_url=stack.base_url, headers={"X-API-KEY": KEY_A}, timeout=30) as client:
            response = client.post(
                "/v1/webhook_endpoints", json={"url": receiver.url + "/stopped", "events": ["run.failed"]}
            )
            secret = response.json()["data"]["secret"]
            prompt = "webhooks e2e: still working"
            with scripted({prompt: Dag([Block(30)])}):
                run_id = client.post("/v1/run", data={"prompt": prompt}).json()["data"]["run_id"]
                time.sleep(1)
                # When the stack stops with the run in flight
                stack.stop(grace_seconds=1)
    finally:
        stack.stop()

    # Then the run's failure was delivered before it stopped
    (delivery,) = receiver.at("/stopped")
    event = verified(delivery, secret)
    assert (event.type, event.data["object"]["run_id"]) == ("run.failed", run_id)
    assert "stopped while this run was in flight" in event.data["object"]["errors"][0]["error"]
