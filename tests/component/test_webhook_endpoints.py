"""Webhook endpoints through their Lambda handler, and the delivery function on the webhook queue, against moto:
the per-account limit under concurrent creates, cross-account 404s, a run status change published to
EventBridge and fanned out to the subscribed endpoints only, and a batch whose bad message fails alone."""

from __future__ import annotations

import json
import socket
import threading
import uuid

import boto3
import pytest

from canvas_core import settings
from canvas_core.adapters.events import Events
from canvas_core.adapters.store import Store
from canvas_core.adapters.webhook_store import WebhookStore
from canvas_core.auth import create_account_with_key
from canvas_core.models.api import CreateRunRequest
from canvas_core.models.items import RunItem
from canvas_core.models.webhooks import DeliveryMessage, EndpointStatus, WebhookEventType
from canvas_core.webhooks import endpoints
from canvas_core.webhooks.delivery import Deliveries, Outcome
from canvas_core.webhooks.endpoints import delivery_fetcher
from canvas_core.webhooks.settings import MAX_ENDPOINTS_PER_ACCOUNT
from canvas_local.queues import TemplateQueues
from tests.support import body_of, load_event

pytestmark = pytest.mark.component

HOOK = "https://93.184.215.14/canvas"  # a public address: registration resolves nothing


@pytest.fixture
def queues(aws, template, monkeypatch):
    """The template's queues and its rule, as the stack provisions them (moto's EventBridge delivers to SQS)."""
    monkeypatch.delenv("WEBHOOK_ALLOW_PRIVATE_ADDRESSES", raising=False)
    settings.reset()
    sqs, events = boto3.client("sqs", region_name="us-east-1"), boto3.client("events", region_name="us-east-1")
    spec = TemplateQueues(template)
    declared = spec.queues()
    urls = {
        name: sqs.create_queue(QueueName=name, Attributes=declared[name])["QueueUrl"]
        for name in sorted(declared, key=lambda n: "RedrivePolicy" in declared[n])
    }
    for rule in spec.rules():
        targets = rule.pop("Targets")
        events.put_rule(**rule)
        events.put_targets(Rule=rule["Name"], EventBusName=rule["EventBusName"], Targets=targets)
    yield sqs, urls


def call(function, context, name: str, api_key: str, endpoint_id: str | None = None, body: dict | None = None):
    changes: dict = {"api_key": api_key}
    if endpoint_id is not None:
        changes["path_parameters"] = {"endpoint_id": endpoint_id}
    if body is not None:
        changes["body"] = json.dumps(body)
    response = function("api/webhook_endpoints")(load_event(name, **changes), context)
    return response["statusCode"], body_of(response)


def receive_all(sqs, url: str) -> list[dict]:
    found = []
    while messages := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []):
        found += messages
        sqs.delete_message_batch(
            QueueUrl=url, Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)]
        )
    return found


def sqs_event(*bodies: str) -> dict:
    template = load_event("deliver_webhooks")["Records"][0]
    return {"Records": [template | {"messageId": f"m{i}", "body": body} for i, body in enumerate(bodies)]}


def test_an_endpoint_is_created_listed_rotated_and_deleted(queues, account, function, context):
    # When an endpoint is added
    status, created = call(function, context, "create_webhook_endpoint", account.api_key, body={"url": HOOK})

    # Then its secret is shown once, and the listing never shows it
    assert status == 200, created
    data = created["data"]
    assert data["secret"].startswith("whsec_") and data["url"] == HOOK and data["status"] == "enabled"
    assert data["events"] == ["run.started", "run.completed", "run.partial", "run.failed", "webhook.ping"]
    status, listed = call(function, context, "list_webhook_endpoints", account.api_key)
    assert status == 200
    assert listed["data"]["endpoints"] == [{k: v for k, v in data.items() if k != "secret"}]

    # And a rotation answers a new secret
    status, rotated = call(function, context, "rotate_webhook_secret", account.api_key, data["id"])
    assert status == 200 and rotated["data"]["secret"] not in (None, data["secret"])

    # And once deleted it is gone, and its count is given back
    status, deleted = call(function, context, "delete_webhook_endpoint", account.api_key, data["id"])
    assert (status, deleted["data"]) == (200, {"id": data["id"], "deleted": True})
    assert call(function, context, "delete_webhook_endpoint", account.api_key, data["id"])[0] == 404
    assert Store().get_account(account.account_id)["webhook_endpoints"] == 0


def test_an_endpoint_on_a_refused_address_or_for_unknown_events_is_a_400(queues, account, function, context):
    status, body = call(
        function, context, "create_webhook_endpoint", account.api_key, body={"url": "http://127.0.0.1:9000/hook"}
    )
    assert status == 400
    assert "loopback address" in body["error"]
    status, body = call(
        function, context, "create_webhook_endpoint", account.api_key, body={"url": HOOK, "events": ["run.paused"]}
    )
    assert (status, body["error"].split(".")[0]) == (400, "Unknown event type: run")
    assert call(function, context, "ping_webhook_endpoint", account.api_key, "not-a-uuid")[0] == 400


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://[::169.254.169.254]/", "a cloud metadata address"),
        ("http://[::a9fe:a9fe]/", "a cloud metadata address"),
        ("http://[::ffff:169.254.169.254]/", "a cloud metadata address"),
        ("http://[2002:a9fe:a9fe::1]/", "a cloud metadata address"),
        ("http://255.255.255.255/", "the broadcast address"),
        ("http://240.0.0.1/", "a reserved address"),
    ],
)
def test_metadata_in_any_form_is_refused_even_with_private_addresses_allowed(
    queues, account, function, context, monkeypatch, url, reason
):
    # Given the operator's opt-in for private receivers
    monkeypatch.setenv("WEBHOOK_ALLOW_PRIVATE_ADDRESSES", "true")
    settings.reset()
    private = call(function, context, "create_webhook_endpoint", account.api_key, body={"url": "http://10.0.0.7/"})
    assert private[0] == 200

    # When an endpoint is registered on a metadata, broadcast or reserved address, however written
    status, body = call(function, context, "create_webhook_endpoint", account.api_key, body={"url": url})

    # Then it is a 400 saying why
    assert status == 400 and reason in body["error"], body


def test_no_more_than_ten_endpoints_even_when_created_at_once(queues, account, function, context):
    # Given 15 creates racing each other
    results: list[int] = []

    def create():
        results.append(endpoints.create_endpoint(account.account_id, HOOK) and 200)

    def attempt():
        try:
            create()
        except Exception as exc:
            results.append(getattr(exc, "status_code", 500))

    threads = [threading.Thread(target=attempt) for _ in range(15)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    # Then exactly ten were added and the others were a 409 that says why
    assert sorted(results) == [200] * MAX_ENDPOINTS_PER_ACCOUNT + [409] * 5
    assert len(endpoints.list_endpoints(account.account_id)) == MAX_ENDPOINTS_PER_ACCOUNT
    status, body = call(function, context, "create_webhook_endpoint", account.api_key, body={"url": HOOK})
    assert status == 409 and "limit is 10 per account" in body["error"]


def test_another_accounts_endpoint_and_its_deliveries_are_404(queues, account, function, context):
    # Given an endpoint of account A
    mine = endpoints.create_endpoint(account.account_id, HOOK)
    _, other_key = create_account_with_key()

    # Then to account B it does not exist, in any route
    for name in (
        "delete_webhook_endpoint",
        "rotate_webhook_secret",
        "ping_webhook_endpoint",
        "list_webhook_deliveries",
    ):
        status, body = call(function, context, name, other_key, mine.id)
        assert (status, body["error"]) == (404, f"Webhook endpoint not found: {mine.id}"), name
    assert call(function, context, "list_webhook_endpoints", other_key)[1]["data"]["endpoints"] == []
    # And it is untouched
    assert [e.id for e in endpoints.list_endpoints(account.account_id)] == [mine.id]


def test_a_ping_is_queued_with_the_endpoint_as_its_object(queues, account, function, context):
    sqs, urls = queues
    mine = endpoints.create_endpoint(account.account_id, HOOK)

    status, body = call(function, context, "ping_webhook_endpoint", account.api_key, mine.id)

    assert status == 200 and body["data"]["event_id"].startswith("evt_")
    (queued,) = receive_all(sqs, urls["WebhookQueue"])
    message = DeliveryMessage.model_validate_json(queued["Body"])
    event = json.loads(message.body)
    assert (message.endpoint_id, message.event_id, message.attempt) == (mine.id, body["data"]["event_id"], 1)
    assert event["type"] == "webhook.ping"
    assert event["data"]["object"] == mine.model_dump(mode="json", exclude={"secret"}, exclude_none=True)


def test_a_status_change_fans_out_to_the_subscribed_enabled_endpoints_only(queues, account, function, context):
    sqs, urls = queues
    # Given a completed run, and endpoints: for all events, for failures only, one disabled, and another account's
    run = RunItem(
        run_id=str(uuid.uuid4()),
        account_id=account.account_id,
        canvas_id=str(uuid.uuid4()),
        status="completed",
        prompt="Tide pools",
        template="memo",
        created_at_ms=1_763_700_000_000,
        finished_at_ms=1_763_700_060_000,
        estimated_duration_ms=60_000,
        final_output="Tide pools are ...",
    )
    Store().put_run(run)
    everything = endpoints.create_endpoint(account.account_id, HOOK)
    endpoints.create_endpoint(account.account_id, HOOK, ["run.failed"])
    disabled = endpoints.create_endpoint(account.account_id, HOOK)
    WebhookStore().disable_endpoint(disabled.id, "gone")
    other_account, _ = create_account_with_key()
    endpoints.create_endpoint(other_account, HOOK)

    # When the run's status change is published and the delivery function takes it from the queue
    assert Events().publish_run_status(account.account_id, run.run_id, "completed", 1_763_700_060_000)
    (change,) = receive_all(sqs, urls["WebhookQueue"])
    answer = function("webhooks/deliver_webhooks")(sqs_event(change["Body"]), context)

    # Then one delivery is queued, for the one endpoint subscribed and enabled, carrying the run as GET shows it
    assert answer == {"batchItemFailures": []}
    (queued,) = receive_all(sqs, urls["WebhookQueue"])
    message = DeliveryMessage.model_validate_json(queued["Body"])
    assert message.endpoint_id == everything.id and message.type == "run.completed"
    event = json.loads(message.body)
    get_run = function("api/get_run")(
        load_event("get_run", api_key=account.api_key, path_parameters={"run_id": run.run_id}), context
    )
    assert event["data"]["object"] == body_of(get_run)["data"]
    assert (event["id"], event["created"], event["livemode"]) == (message.event_id, 1_763_700_060, True)


def test_a_bad_message_fails_alone_in_its_batch(queues, account, function, context):
    # Given a batch of a status change for an account with no endpoints, and a message that is not JSON
    good = load_event("deliver_webhooks")["Records"][0]["body"]

    # When the delivery function handles it
    answer = function("webhooks/deliver_webhooks")(sqs_event(good, "{not json"), context)

    # Then only the bad one is reported, for SQS to retry (and after five receives, set aside)
    assert answer == {"batchItemFailures": [{"itemIdentifier": "m1"}]}


def test_an_endpoint_that_answered_410_shows_disabled(queues, account, function, context):
    mine = endpoints.create_endpoint(account.account_id, HOOK)
    WebhookStore().disable_endpoint(mine.id, "The endpoint answered 410 Gone")
    (listed,) = call(function, context, "list_webhook_endpoints", account.api_key)[1]["data"]["endpoints"]
    assert (listed["status"], listed["disabled_reason"]) == (EndpointStatus.DISABLED, "The endpoint answered 410 Gone")
    status, body = call(function, context, "ping_webhook_endpoint", account.api_key, mine.id)
    assert status == 409 and "disabled" in body["error"]


def test_an_attempt_that_got_no_answer_is_listed_with_its_error(queues, account, function, context):
    # Given an endpoint whose first attempt found the connection refused
    mine = endpoints.create_endpoint(account.account_id, HOOK)

    def refuse(address: str, port: int, timeout: float) -> socket.socket:
        raise ConnectionRefusedError(111, "Connection refused")

    message = DeliveryMessage(endpoint_id=mine.id, event_id="evt_1", type=WebhookEventType.WEBHOOK_PING, body="{}")
    assert Deliveries(fetcher=delivery_fetcher(connector=refuse)).deliver(message) == Outcome.RETRYING

    # When its deliveries are listed
    status, body = call(function, context, "list_webhook_deliveries", account.api_key, mine.id)

    # Then the attempt shows no status code, and why no answer came
    assert status == 200, body
    (attempt,) = body["data"]["deliveries"]
    assert (attempt["event_id"], attempt["attempt"], attempt["status_code"]) == ("evt_1", 1, None)
    assert attempt["error"] and attempt["next_retry"] is not None


class RecordedEvents:
    """Stands in for EventBridge, keeping what was published."""

    def __init__(self):
        self.published: list[tuple[str, str]] = []

    def publish_run_status(self, account_id, run_id, status, changed_at_ms=None):
        self.published.append((run_id, status))
        return True


class Executions:
    def __init__(self, fail: bool = False):
        self.fail = fail

    def start(self, run_id, payload):
        if self.fail:
            raise RuntimeError("Step Functions is unavailable")
        return f"arn:aws:states:us-east-1:123456789012:execution:RunCanvasStateMachine:{run_id}"


def test_a_run_publishes_started_then_its_end_once_however_often_it_is_ended(aws, account):
    from canvas_core.orchestration import finalize_run
    from canvas_core.runs import create_run

    events = RecordedEvents()
    # When a run is created, then ended twice (the Catch and the execution's EventBridge rule, say)
    run_id = create_run(
        CreateRunRequest(prompt="Tide pools", template="memo"),
        account.account_id,
        executions=Executions(),
        events=events,
    ).run_id
    finalize_run(run_id, failure="The run's execution failed", events=events)
    finalize_run(run_id, failure="The run's execution failed", events=events)

    # Then run.started and one ending were published
    assert events.published == [(run_id, "running"), (run_id, "failed")]


def test_a_run_that_cannot_start_publishes_only_its_failure(aws, account):
    from canvas_core.runs import create_run

    events = RecordedEvents()
    with pytest.raises(RuntimeError):
        create_run(
            CreateRunRequest(prompt="Tide pools", template="memo"),
            account.account_id,
            executions=Executions(fail=True),
            events=events,
        )
    ((_, status),) = events.published
    assert status == "failed"


def test_a_failed_publish_never_fails_the_run(aws, account):
    from canvas_core.orchestration import finalize_run
    from canvas_core.runs import create_run

    class Unavailable:
        def put_events(self, **_):
            raise RuntimeError("EventBridge is unavailable")

    broken = Events(eventbridge=Unavailable())
    run_id = create_run(
        CreateRunRequest(prompt="Tide pools", template="memo"),
        account.account_id,
        executions=Executions(),
        events=broken,
    ).run_id
    assert finalize_run(run_id, failure="stopped", events=broken)["status"] == "failed"
    assert Store().get_run(run_id).status == "failed"
