"""Webhooks without AWS: signatures the public spine client verifies, the retry schedule, the SSRF guard at
registration and at every delivery, and what each answer of an endpoint leads to (in-memory store and queue)."""

from __future__ import annotations

import json
import random
import socket
import threading
import uuid

import pytest
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEvent
from pydantic import ValidationError
from spine import SpineClient
from spine.exceptions import WebhookSignatureError

from canvas_core.api.forms import FormBody, read_body
from canvas_core.clock import now_ms
from canvas_core.errors import BadRequestError, PayloadTooLargeError
from canvas_core.gather.fetch import Page
from canvas_core.models.base import refusal
from canvas_core.models.items import RunItem
from canvas_core.models.webhooks import (
    MAX_ENDPOINT_REQUEST_BYTES,
    DeliveryMessage,
    EndpointItem,
    EndpointStatus,
    WebhookEndpointRequest,
    WebhookEventType,
)
from canvas_core.settings import webhook_settings
from canvas_core.webhooks import endpoints
from canvas_core.webhooks.delivery import GONE_REASON, Deliveries, Outcome
from canvas_core.webhooks.events import envelope, run_event_id
from canvas_core.webhooks.schedule import JITTER, MAX_ATTEMPTS, RETRY_DELAYS, retry_delay_seconds
from canvas_core.webhooks.signing import new_secret, signature_header

pytestmark = pytest.mark.unit

spine = SpineClient(api_key="sk_spine_unused")


@pytest.fixture(autouse=True)
def webhook_environment(monkeypatch, environment_of):
    environment_of("DeliverWebhooksFunction")
    monkeypatch.delenv("WEBHOOK_ALLOW_PRIVATE_ADDRESSES", raising=False)
    monkeypatch.delenv("WEBHOOK_RETRY_TIME_SCALE", raising=False)


# ---------------------------------------------------------------- signatures


def test_a_signed_body_verifies_with_the_unchanged_spine_client():
    # Given an event's bytes and a new secret
    secret = new_secret()
    body = envelope("evt_1", WebhookEventType.RUN_COMPLETED, 1_763_700_000, {"run_id": "r", "status": "completed"})

    # When it is signed as a delivery signs it
    header = signature_header(secret, body.encode())

    # Then spine verifies it and reads the envelope
    event = spine.webhooks.construct_event(body.encode(), header, secret)
    assert secret.startswith("whsec_")
    assert (event.id, event.type, event.created, event.data) == (
        "evt_1",
        "run.completed",
        1_763_700_000,
        {"object": {"run_id": "r", "status": "completed"}},
    )
    assert event.api_version == "2026-11-01"


@pytest.mark.parametrize("tamper", ["body", "secret", "stale"])
def test_spine_refuses_a_changed_body_another_secret_or_an_old_signature(tamper):
    secret, body = new_secret(), b'{"id":"evt_1","type":"webhook.ping","created":1,"data":{}}'
    header = signature_header(secret, body, timestamp=None if tamper != "stale" else now_ms() // 1000 - 301)
    if tamper == "body":
        body = body.replace(b"ping", b"pong")
    if tamper == "secret":
        secret = new_secret()
    with pytest.raises(WebhookSignatureError):
        spine.webhooks.construct_event(body, header, secret)


def test_run_event_ids_are_stable_per_run_and_status():
    run_id = str(uuid.uuid4())
    assert run_event_id(run_id, "completed") == run_event_id(run_id, "completed")
    assert run_event_id(run_id, "completed") != run_event_id(run_id, "running")
    assert run_event_id(run_id, "failed").startswith("evt_")


# ---------------------------------------------------------------- schedule


def test_the_retry_schedule_lasts_at_least_72_hours_even_at_its_shortest():
    # The jitter only lengthens a delay, so the bases are the shortest schedule there is.
    assert sum(RETRY_DELAYS) >= 72 * 3600
    assert list(RETRY_DELAYS) == sorted(RETRY_DELAYS)
    assert len(RETRY_DELAYS) + 1 == MAX_ATTEMPTS


def test_each_delay_is_jittered_above_its_base_and_scaled():
    rng = random.Random(7)
    for attempt, base in enumerate(RETRY_DELAYS, start=1):
        for _ in range(50):
            delay = retry_delay_seconds(attempt, rng=rng)
            assert base <= delay < base * (1 + JITTER)
        assert base * 0.001 <= retry_delay_seconds(attempt, scale=0.001, rng=rng) < base * 0.001 * (1 + JITTER)
    assert retry_delay_seconds(MAX_ATTEMPTS) is None


def test_a_retry_scale_outside_zero_to_one_is_refused(monkeypatch):
    monkeypatch.setenv("WEBHOOK_RETRY_TIME_SCALE", "0")
    with pytest.raises(ValueError, match="WEBHOOK_RETRY_TIME_SCALE"):
        webhook_settings()


# ---------------------------------------------------------------- registration


@pytest.mark.parametrize(
    "url, why",
    [
        ("http://127.0.0.1:8080/hook", "loopback"),
        ("http://10.1.2.3/hook", "private"),
        ("http://169.254.169.254/latest/meta-data", "metadata"),
        ("ftp://hooks.example.com/x", "not an http or https URL"),
        ("hooks.example.com/x", "not an http or https URL"),
        ("https://user:pw@hooks.example.com/x", "credentials"),
        ("", "required"),
        ("http://[::1/hook", "not a valid URL"),
        ("https://hooks.example.com:99999/x", "Not a valid URL"),
    ],
)
def test_a_url_the_ssrf_guard_refuses_is_a_400_at_registration(url, why):
    with pytest.raises(BadRequestError, match=why):
        endpoints.check_url(url)


def test_the_private_opt_in_allows_loopback_but_never_metadata(monkeypatch):
    monkeypatch.setenv("WEBHOOK_ALLOW_PRIVATE_ADDRESSES", "true")
    assert endpoints.check_url("http://127.0.0.1:8080/hook") == "http://127.0.0.1:8080/hook"
    with pytest.raises(BadRequestError, match="metadata"):
        endpoints.check_url("http://169.254.169.254/")
    with pytest.raises(BadRequestError, match="link-local"):
        endpoints.check_url("http://169.254.10.10/")


def test_unknown_event_types_are_a_400_and_none_means_all():
    with pytest.raises(BadRequestError, match=r"Unknown event type: run\.exploded"):
        endpoints.parse_events(["run.completed", "run.exploded"])
    assert endpoints.parse_events(None) == list(WebhookEventType)
    assert endpoints.parse_events(["run.failed", "run.completed", "run.failed"]) == [
        WebhookEventType.RUN_COMPLETED,
        WebhookEventType.RUN_FAILED,
    ]


URL = "https://a.example/h"
FORM_URL = "url=https%3A%2F%2Fa.example%2Fh"


def parse_endpoint_request(content_type, body):
    """The body of POST /v1/webhook_endpoints as the API reads and validates it: (url, events), or the error."""
    headers = {"Content-Type": content_type} if content_type else {}
    event = APIGatewayProxyEvent({"headers": headers, "body": body.decode(), "isBase64Encoded": False})
    fields = read_body(event, FormBody(max_bytes=MAX_ENDPOINT_REQUEST_BYTES, accepts_json=True))
    try:
        request = WebhookEndpointRequest.model_validate(fields)
    except ValidationError as exc:
        raise refusal(exc.errors()) or exc from None
    return request.url, request.events


@pytest.mark.parametrize(
    "content_type, body, expected",
    [
        ("application/json", b'{"url": "https://a.example/h"}', (URL, None)),
        ("application/json", b'{"url": "https://a.example/h", "events": ["run.failed"]}', (URL, ["run.failed"])),
        (
            "application/json",
            b'{"url": "https://a.example/h", "events": "run.failed, webhook.ping"}',
            (URL, ["run.failed", "webhook.ping"]),
        ),
        (
            "application/x-www-form-urlencoded",
            FORM_URL.encode() + b"&events=run.started%2Crun.failed",
            (URL, ["run.started", "run.failed"]),
        ),
        (None, FORM_URL.encode(), (URL, None)),
    ],
)
def test_the_create_body_is_json_or_a_form(content_type, body, expected):
    assert parse_endpoint_request(content_type, body) == expected


@pytest.mark.parametrize(
    "content_type, body, error",
    [
        ("application/json", b"[1]", BadRequestError),
        ("application/json", b"{not json", BadRequestError),
        ("application/json", b'{"events": ["run.failed"]}', BadRequestError),
        ("application/json", b'{"url": "https://a.example/h", "events": [1]}', BadRequestError),
        ("application/json", b'{"url": "' + b"a" * 20000 + b'"}', PayloadTooLargeError),
    ],
)
def test_a_malformed_create_body_is_refused(content_type, body, error):
    with pytest.raises(error):
        parse_endpoint_request(content_type, body)


# ---------------------------------------------------------------- delivery


class MemoryStore:
    def __init__(self, endpoint: EndpointItem):
        self.endpoints = {endpoint.endpoint_id: endpoint}
        self.deliveries: list = []

    def get_endpoint(self, endpoint_id):
        return self.endpoints.get(endpoint_id)

    def list_endpoints(self, account_id):
        return [e for e in self.endpoints.values() if e.account_id == account_id]

    def record_delivery(self, endpoint_id, delivery, attempted_ms):
        self.deliveries.append(delivery)

    def disable_endpoint(self, endpoint_id, reason):
        self.endpoints[endpoint_id] = self.endpoints[endpoint_id].model_copy(
            update={"status": EndpointStatus.DISABLED, "disabled_reason": reason}
        )
        return True


class MemoryQueue:
    def __init__(self):
        self.sent: list[tuple[dict, float]] = []

    def send(self, message, delay_seconds=0):
        self.sent.append((message, delay_seconds))


class Answering:
    """A fetcher whose endpoint answers `status` (checks of the real guard are not involved)."""

    def __init__(self, status: int):
        self.status = status
        self.requests: list[dict] = []

    def send(self, url, **kwargs):
        self.requests.append({"url": url, **kwargs})
        return Page(url=url, status=self.status, content_type="text/plain", charset=None, body=b"")


def endpoint(url: str = "https://hooks.example.com/canvas") -> EndpointItem:
    return EndpointItem(
        endpoint_id=str(uuid.uuid4()),
        account_id="acct",
        url=url,
        events=list(WebhookEventType),
        secret=new_secret(),
        created_at=1,
    )


def message(target: EndpointItem, attempt: int = 1, not_before_ms: int = 0) -> DeliveryMessage:
    body = envelope("evt_fixed", WebhookEventType.RUN_FAILED, 1, {"run_id": "r"})
    return DeliveryMessage(
        endpoint_id=target.endpoint_id,
        event_id="evt_fixed",
        type=WebhookEventType.RUN_FAILED,
        body=body,
        attempt=attempt,
        not_before_ms=not_before_ms,
    )


def deliveries(target: EndpointItem, fetcher) -> tuple[Deliveries, MemoryStore, MemoryQueue, MemoryQueue]:
    store, queue, dead = MemoryStore(target), MemoryQueue(), MemoryQueue()
    return Deliveries(store=store, queue=queue, dead_letters=dead, fetcher=fetcher), store, queue, dead


def test_a_2xx_counts_and_the_request_is_signed_with_the_fixed_bytes():
    target = endpoint()
    fetcher = Answering(204)
    service, store, queue, _ = deliveries(target, fetcher)

    assert service.deliver(message(target)) == Outcome.DELIVERED

    request = fetcher.requests[0]
    headers = request["headers"]
    assert request["body"] == message(target).body.encode()
    assert headers["Spine-Signature"] == headers["Canvas-Signature"]
    assert headers["Content-Type"] == "application/json"
    assert headers["User-Agent"].startswith("CanvasRunService-Webhooks/")
    assert headers["Canvas-Event-Id"] == "evt_fixed"
    spine.webhooks.construct_event(request["body"], headers["Spine-Signature"], target.secret)
    assert request["timeout"] == 10
    assert [(d.status_code, d.next_retry, d.error) for d in store.deliveries] == [(204, None, None)]
    assert queue.sent == []


def test_a_410_disables_the_endpoint_and_nothing_follows():
    target = endpoint()
    service, store, queue, dead = deliveries(target, Answering(410))

    assert service.deliver(message(target)) == Outcome.DISABLED

    assert store.endpoints[target.endpoint_id].status == EndpointStatus.DISABLED
    assert store.endpoints[target.endpoint_id].disabled_reason == GONE_REASON
    assert queue.sent == dead.sent == []
    # And a retry already queued for it is dropped
    assert service.deliver(message(target, attempt=2)) == Outcome.DROPPED


@pytest.mark.parametrize("status", [500, 429, 404, 301])
def test_any_other_answer_schedules_the_next_attempt_with_the_same_event(status):
    target = endpoint()
    service, store, queue, _ = deliveries(target, Answering(status))

    assert service.deliver(message(target)) == Outcome.RETRYING

    (sent, delay), = queue.sent  # fmt: skip
    again = DeliveryMessage.model_validate(sent)
    assert (again.event_id, again.body, again.attempt) == ("evt_fixed", message(target).body, 2)
    assert RETRY_DELAYS[0] - 1 <= delay <= RETRY_DELAYS[0] * (1 + JITTER)
    assert store.deliveries[0].next_retry == again.not_before_ms // 1000
    assert store.deliveries[0].error == f"The endpoint answered HTTP {status}"


def test_after_the_last_attempt_the_delivery_goes_to_the_dead_letter_queue():
    target = endpoint()
    service, store, queue, dead = deliveries(target, Answering(503))

    assert service.deliver(message(target, attempt=MAX_ATTEMPTS)) == Outcome.DEAD_LETTERED

    assert queue.sent == []
    assert DeliveryMessage.model_validate(dead.sent[0][0]).attempt == MAX_ATTEMPTS
    assert store.deliveries[0].next_retry is None


def test_an_attempt_not_yet_due_waits_in_hops_of_at_most_15_minutes():
    target = endpoint()
    fetcher = Answering(200)
    service, store, queue, _ = deliveries(target, fetcher)

    due_in_an_hour = message(target, attempt=5, not_before_ms=now_ms() + 3600_000)
    assert service.deliver(due_in_an_hour) == Outcome.WAITING

    (sent, delay), = queue.sent  # fmt: skip
    assert sent == due_in_an_hour.model_dump(mode="json")
    assert delay > 3590  # the queue adapter caps one hop at 900 s
    assert fetcher.requests == [] and store.deliveries == []


def test_an_endpoint_whose_dns_now_points_at_a_private_address_is_never_contacted():
    # Given an endpoint registered on a public name, whose DNS answer has since changed to a private address
    target = endpoint("https://hooks.example.com/canvas")
    contacted = []

    def connect(address, port, timeout):
        contacted.append(address)
        raise AssertionError("the guard let a refused address through")

    fetcher = endpoints.delivery_fetcher(resolver=lambda host, port: ["10.0.0.7"], connector=connect)
    service, store, queue, _ = deliveries(target, fetcher)

    # When its delivery is due
    outcome = service.deliver(message(target))

    # Then nothing connected; the attempt is recorded as refused and will be tried again (DNS can change back)
    assert contacted == []
    assert outcome == Outcome.RETRYING
    assert store.deliveries[0].status_code is None
    assert "a private address" in store.deliveries[0].error
    assert len(queue.sent) == 1


def test_a_delivery_does_not_follow_redirects(monkeypatch):
    # Given a receiver on loopback (allowed) that redirects elsewhere
    monkeypatch.setenv("WEBHOOK_ALLOW_PRIVATE_ADDRESSES", "true")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]

    def answer():
        conn, _ = server.accept()
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 302 Found\r\nLocation: http://169.254.169.254/\r\nContent-Length: 0\r\n\r\n")
        conn.close()

    thread = threading.Thread(target=answer)
    thread.start()
    target = endpoint(f"http://127.0.0.1:{port}/hook")
    service, store, _, _ = deliveries(target, None)

    # When it is delivered to, the redirect is an answer that does not count
    assert service.deliver(message(target)) == Outcome.RETRYING
    thread.join(5)
    server.close()
    assert store.deliveries[0].status_code == 302


def test_fan_out_ignores_an_unknown_status():
    target = endpoint()
    service, _, queue, _ = deliveries(target, Answering(200))
    assert service.fan_out({"account_id": "acct", "run_id": "r", "status": "paused", "changed_at_ms": 1}) == (
        Outcome.DROPPED
    )
    assert queue.sent == []


def test_the_envelope_is_compact_json_with_the_fixed_fields():
    body = json.loads(envelope("evt_x", WebhookEventType.WEBHOOK_PING, 5, {"id": "e"}))
    assert body == {
        "id": "evt_x",
        "type": "webhook.ping",
        "created": 5,
        "livemode": True,
        "api_version": "2026-11-01",
        "data": {"object": {"id": "e"}},
    }


class MemoryRuns:
    def __init__(self, run: RunItem):
        self.run = run

    def get_run(self, run_id):
        return self.run if run_id == self.run.run_id else None

    def get_tasks(self, canvas_id):
        return []


class MemoryFiles:
    def __init__(self):
        self.objects: dict[str, bytes] = {}

    def put(self, key, data, content_type):
        self.objects[key] = data

    def get(self, key):
        return self.objects[key]

    def download_url(self, key, name):
        return f"https://files.example/{key}"


@pytest.mark.parametrize("output_chars, spilled", [(1_000, False), (300_000, True)])
def test_a_body_too_large_for_a_queue_message_waits_in_s3_and_is_sent_whole(output_chars, spilled):
    # Given an endpoint and a completed run whose answer is short, or too long for SQS
    target = endpoint()
    run = RunItem(
        run_id=str(uuid.uuid4()),
        account_id="acct",
        canvas_id=str(uuid.uuid4()),
        status="completed",
        prompt="Tide pools",
        template="memo",
        created_at_ms=1_763_700_000_000,
        finished_at_ms=1_763_700_060_000,
        estimated_duration_ms=60_000,
        final_output="é" * output_chars,
    )
    fetcher, files = Answering(200), MemoryFiles()
    store, queue = MemoryStore(target), MemoryQueue()
    service = Deliveries(
        store=store, queue=queue, dead_letters=MemoryQueue(), fetcher=fetcher, runs=MemoryRuns(run), files=files
    )

    # When its completion is fanned out and delivered
    detail = {"account_id": "acct", "run_id": run.run_id, "status": "completed", "changed_at_ms": run.finished_at_ms}
    assert service.fan_out(detail) == Outcome.FANNED_OUT
    ((sent, _),) = queue.sent
    assert len(json.dumps(sent)) < 256 * 1024
    assert ("body_key" in sent) is spilled
    assert service.deliver(DeliveryMessage.model_validate(sent)) == Outcome.DELIVERED

    # Then the endpoint got the whole run, signed
    request = fetcher.requests[0]
    event = spine.webhooks.construct_event(request["body"], request["headers"]["Spine-Signature"], target.secret)
    assert event.data["object"]["result"]["final_output"] == run.final_output
    assert list(files.objects) == ([f"webhooks/acct/{event.id}.json"] if spilled else [])
