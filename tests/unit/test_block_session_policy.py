"""Block isolation (docs/isolation.md): the session policy Scope Block vends a block's credentials with, read as IAM
reads it (the embedded stack's evaluator, canvas_local/scopes.py): a block reaches its own run and nothing else, and
no balance."""

from __future__ import annotations

import json

import pytest

from canvas_core.isolation import MAX_POLICY_CHARS, BlockScope, compact, runs_read, session_policy
from canvas_core.models.items import Artifact, NodeItem, RunItem, Upload
from canvas_core.settings import ServiceSettings
from canvas_local.defaults import DEFAULT_TEMPLATE
from canvas_local.scopes import Request, UnsupportedPolicyError, allows, requests
from canvas_local.template import Template

pytestmark = pytest.mark.unit

ACCOUNT, OTHER = "a1a1a1a1-0000-4000-8000-000000000001", "b2b2b2b2-0000-4000-8000-000000000002"
RUN, SOURCE, STRANGER = (f"{n}0000000-0000-4000-8000-00000000000{n}" for n in "345")
CANVAS, OTHER_CANVAS = "c6c6c6c6-0000-4000-8000-000000000006", "d7d7d7d7-0000-4000-8000-000000000007"
TEMPLATE = Template(DEFAULT_TEMPLATE)
ROLE_ARN = TEMPLATE.get_att("BlockSessionRole", "Arn")
# The stack's names, which the template's role policy is resolved with.
SETTINGS = ServiceSettings.model_construct(
    **{
        field: TEMPLATE.resolve({"Ref": lid})
        for field, lid in (
            ("runs_table", "RunsTable"),
            ("canvases_table", "CanvasesTable"),
            ("tasks_table", "TasksTable"),
            ("accounts_table", "AccountsTable"),
            ("artifacts_bucket", "ArtifactsBucket"),
        )
    }
)
# Names as CloudFormation makes them on AWS: the longest the policy meets.
AWS_SETTINGS = ServiceSettings.model_construct(
    runs_table="canvas-run-service-production-RunsTable-1A2B3C4D5E6F7",
    canvases_table="canvas-run-service-production-CanvasesTable-1A2B3C4D5E6F7",
    tasks_table="canvas-run-service-production-TasksTable-1A2B3C4D5E6F7",
    accounts_table="canvas-run-service-production-AccountsTable-1A2B3C4D5E6F7",
    artifacts_bucket="canvas-run-service-production-artifactsbucket-1a2b3c4d5e6f",
)
TABLES = {
    SETTINGS.runs_table: "run_id",
    SETTINGS.canvases_table: "canvas_id",
    SETTINGS.tasks_table: "canvas_id",
    SETTINGS.accounts_table: "account_id",
}


def policy(read_runs: list[str] | None = None, settings: ServiceSettings = SETTINGS) -> dict:
    scope = BlockScope(account_id=ACCOUNT, run_id=RUN, canvas_id=CANVAS, read_runs=read_runs or [RUN])
    return session_policy(scope, settings)


def allowed(service: str, operation: str, params: dict, given: dict | None = None) -> bool:
    """Whether IAM allows the call: the session policy and BlockSessionRole's own both allow each of its requests."""
    role = {"Statement": [s for document in TEMPLATE.role_policies()[ROLE_ARN] for s in document["Statement"]]}
    asked = requests(service, operation, params, lambda table, index: TABLES.get(table), "us-east-1", "123456789012")
    return all(allows(given or policy(), request) and allows(role, request) for request in asked)


def key(name: str, value: str) -> dict:
    return {name: {"S": value}}


def test_a_block_reads_and_writes_its_own_canvas_and_tasks_and_no_others():
    nodes = SETTINGS.canvases_table
    own = key("canvas_id", CANVAS) | key("item_id", "node#b1")
    other = key("canvas_id", OTHER_CANVAS) | key("item_id", "node#b1")

    assert allowed("dynamodb", "GetItem", {"TableName": nodes, "Key": own})
    assert allowed(
        "dynamodb",
        "UpdateItem",
        {
            "TableName": nodes,
            "Key": own,
            "UpdateExpression": "SET #s = :s",
            "ExpressionAttributeNames": {"#s": "status"},
        },
    )
    assert not allowed("dynamodb", "GetItem", {"TableName": nodes, "Key": other})
    assert not allowed("dynamodb", "BatchGetItem", {"RequestItems": {nodes: {"Keys": [own, other]}}})
    assert not allowed(
        "dynamodb",
        "Query",
        {
            "TableName": nodes,
            "KeyConditionExpression": "canvas_id = :c",
            "ExpressionAttributeValues": {":c": {"S": OTHER_CANVAS}},
        },
    )
    # And a transaction is allowed only when each of its items is
    tasks = SETTINGS.tasks_table
    own_task = {
        "Update": {
            "TableName": tasks,
            "Key": key("canvas_id", CANVAS) | key("task_id", "t"),
            "UpdateExpression": "SET #s = :s",
            "ExpressionAttributeNames": {"#s": "status"},
        }
    }
    other_task = {"Update": {**own_task["Update"], "Key": key("canvas_id", OTHER_CANVAS) | key("task_id", "t")}}
    assert allowed("dynamodb", "TransactWriteItems", {"TransactItems": [own_task]})
    assert not allowed("dynamodb", "TransactWriteItems", {"TransactItems": [own_task, other_task]})
    # And it cannot scan a table, or delete what it reads
    assert not allowed("dynamodb", "Scan", {"TableName": nodes})
    assert not allowed("dynamodb", "DeleteItem", {"TableName": nodes, "Key": own})


def test_a_block_spends_its_own_runs_reservation_and_writes_no_balance():
    runs, accounts = SETTINGS.runs_table, SETTINGS.accounts_table
    spend = {
        "UpdateExpression": "SET reserved_credits = reserved_credits - :c",
        "ConditionExpression": "reserved_credits >= :c",
    }

    assert allowed("dynamodb", "GetItem", {"TableName": runs, "Key": key("run_id", RUN)})
    assert allowed("dynamodb", "UpdateItem", {"TableName": runs, "Key": key("run_id", RUN), **spend})
    assert not allowed("dynamodb", "UpdateItem", {"TableName": runs, "Key": key("run_id", STRANGER), **spend})
    assert not allowed("dynamodb", "GetItem", {"TableName": runs, "Key": key("run_id", STRANGER)})
    # Nothing else of its run: not its status, not what was set aside for it
    for attribute in ("status", "credits_set_aside", "account_id"):
        assert not allowed(
            "dynamodb",
            "UpdateItem",
            {"TableName": runs, "Key": key("run_id", RUN), "UpdateExpression": f"SET {attribute} = :v"},
        )
    # Its account: read, and its running blocks (a map's key named by placeholder), never the balance
    account = key("account_id", ACCOUNT)
    assert allowed("dynamodb", "GetItem", {"TableName": accounts, "Key": account})
    assert allowed(
        "dynamodb",
        "UpdateItem",
        {
            "TableName": accounts,
            "Key": account,
            "UpdateExpression": "SET running_blocks.#k = :t",
            "ExpressionAttributeNames": {"#k": "b1"},
            "ConditionExpression": "attribute_exists(account_id)",
        },
    )
    balance = {"UpdateExpression": "SET #b = :lots", "ExpressionAttributeNames": {"#b": "credits_balance"}}
    assert not allowed("dynamodb", "UpdateItem", {"TableName": accounts, "Key": account, **balance})
    assert not allowed(
        "dynamodb",
        "UpdateItem",
        {"TableName": accounts, "Key": account, "UpdateExpression": "SET credits_balance = :lots"},
    )
    assert not allowed(
        "dynamodb", "PutItem", {"TableName": accounts, "Item": account | {"credits_balance": {"N": "9"}}}
    )
    assert not allowed("dynamodb", "GetItem", {"TableName": accounts, "Key": key("account_id", OTHER)})


def test_a_block_reads_its_runs_objects_and_those_its_inputs_come_from_and_writes_only_its_own():
    bucket = SETTINGS.artifacts_bucket
    given = policy([RUN, SOURCE])

    def s3(operation: str, object_key: str) -> bool:
        return allowed("s3", operation, {"Bucket": bucket, "Key": object_key}, given)

    assert s3("GetObject", f"uploads/{ACCOUNT}/{RUN}/f1/data.csv")
    assert s3("GetObject", f"content/{ACCOUNT}/{SOURCE}/b1.txt")  # a re-run's reused input
    assert s3("PutObject", f"artifacts/{ACCOUNT}/{RUN}/x/report.docx")
    assert not s3("PutObject", f"content/{ACCOUNT}/{SOURCE}/b1.txt")
    assert not s3("GetObject", f"uploads/{ACCOUNT}/{STRANGER}/f1/data.csv")
    assert not s3("GetObject", f"uploads/{OTHER}/{RUN}/f1/data.csv")
    assert not allowed("s3", "ListObjectsV2", {"Bucket": bucket, "Prefix": "uploads/"}, given)


def test_the_runs_read_are_the_runs_own_and_those_of_its_account_its_canvas_names():
    run = RunItem(
        run_id=RUN,
        account_id=ACCOUNT,
        canvas_id=CANVAS,
        prompt="p",
        template="auto",
        created_at_ms=0,
        estimated_duration_ms=0,
        uploads=[
            Upload(
                file_id="f",
                name="d.csv",
                extension="csv",
                content_type="text/csv",
                size_bytes=1,
                s3_key=f"uploads/{ACCOUNT}/{SOURCE}/f/d.csv",
            )
        ],
    )
    nodes = [
        NodeItem(
            canvas_id=CANVAS,
            block_id="b1",
            name="b",
            type="text-block",
            content_key=f"content/{ACCOUNT}/{SOURCE}/b1.txt",
        ),
        # A key naming another account is never followed, whatever a node says
        NodeItem(
            canvas_id=CANVAS,
            block_id="b2",
            name="c",
            type="image-block",
            artifacts=[
                Artifact(id="a", type="png", name="i.png", s3_key=f"artifacts/{OTHER}/{STRANGER}/a/i.png", size_bytes=1)
            ],
        ),
    ]

    assert runs_read(run, nodes) == [RUN, SOURCE]


def test_the_policy_fits_iams_limit_and_widens_to_the_accounts_objects_past_it():
    # Given a run of the longest names, reading its own objects and a source run's
    assert len(compact(policy([RUN, SOURCE], AWS_SETTINGS))) <= MAX_POLICY_CHARS
    # When its canvas names many earlier runs
    many_runs = [RUN, *(f"{i:08d}-0000-4000-8000-000000000000" for i in range(12))]
    assert len(compact(policy(many_runs, AWS_SETTINGS))) <= MAX_POLICY_CHARS
    many = policy(many_runs)
    # Then it reads its account's objects (never another's) rather than fail the block, and writes only its own
    bucket = SETTINGS.artifacts_bucket
    assert allowed("s3", "GetObject", {"Bucket": bucket, "Key": f"uploads/{ACCOUNT}/{STRANGER}/f/d.csv"}, many)
    assert not allowed("s3", "GetObject", {"Bucket": bucket, "Key": f"uploads/{OTHER}/{STRANGER}/f/d.csv"}, many)
    assert not allowed("s3", "PutObject", {"Bucket": bucket, "Key": f"content/{ACCOUNT}/{STRANGER}/b.txt"}, many)


def test_the_evaluator_refuses_a_construct_it_does_not_evaluate():
    request = Request("s3:GetObject", "arn:aws:s3:::b/k", {})
    with pytest.raises(UnsupportedPolicyError):
        allows({"Statement": [{"Effect": "Allow", "NotAction": "s3:PutObject", "Resource": "*"}]}, request)
    with pytest.raises(UnsupportedPolicyError):
        allows(
            {
                "Statement": [
                    {
                        "Effect": "Allow",
                        "Action": "s3:*",
                        "Resource": "*",
                        "Condition": {"IpAddress": {"aws:SourceIp": "1.2.3.4"}},
                    }
                ]
            },
            request,
        )
    # And a Deny wins over an Allow
    deny = {"Effect": "Deny", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::b/*"}
    assert not allows({"Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}, deny]}, request)


def test_the_policy_is_plain_json():
    assert json.loads(compact(policy())) == policy()


@pytest.fixture
def logger_keys():
    """Scope Block appends the run's keys to the process's Logger: taken off again after the test."""
    from canvas_core.observability import logger

    yield
    logger.remove_keys(["run_id", "block_id"])


def test_scope_block_widens_the_reads_when_sts_finds_the_packed_policy_too_large(monkeypatch, logger_keys):
    # Given a run, and STS refusing the first policy as too large once packed
    from types import SimpleNamespace

    from canvas_core import isolation
    from canvas_core.adapters.credentials import PolicyTooLargeError
    from canvas_core.models.blocks import BlockCredentials

    run = RunItem(
        run_id=RUN, account_id=ACCOUNT, canvas_id=CANVAS, prompt="p", template="auto", created_at_ms=0,
        estimated_duration_ms=0,
    )  # fmt: skip
    store = SimpleNamespace(get_run=lambda run_id, consistent: run, get_canvas=lambda canvas_id: (None, [], []))
    policies: list[dict] = []

    class Vendor:
        def vend(self, role_arn, session, policy, seconds):
            policies.append(policy)
            if len(policies) == 1:
                raise PolicyTooLargeError("PackedPolicyTooLarge")
            return BlockCredentials(access_key_id="k", secret_access_key="s", session_token="t", expiration="e")

    monkeypatch.setattr(isolation, "service_settings", lambda: SETTINGS)
    monkeypatch.setattr(
        isolation,
        "scope_settings",
        lambda: SimpleNamespace(block_session_role_arn=ROLE_ARN, block_credentials_seconds=3600),
    )
    request = isolation.ScopeRequest(run_id=RUN, canvas_id=CANVAS, account_id=ACCOUNT, block_id="b1")

    # When Scope Block vends the block's credentials
    credentials = isolation.scope_block(request, store, Vendor())

    # Then the second policy reads the account's objects, and the block gets credentials
    assert credentials.access_key_id == "k"
    bucket = SETTINGS.artifacts_bucket
    other_run = {"Bucket": bucket, "Key": f"uploads/{ACCOUNT}/{STRANGER}/f/d.csv"}
    assert not allowed("s3", "GetObject", other_run, policies[0])
    assert allowed("s3", "GetObject", other_run, policies[1])
    # And a run of another account, or of another canvas, gets none
    with pytest.raises(Exception, match="not found"):
        isolation.scope_block(
            isolation.ScopeRequest(run_id=RUN, canvas_id=CANVAS, account_id=OTHER, block_id="b1"), store, Vendor()
        )
    # And an error handed back that names no credits needed is refused, not guessed at
    short = {"Error": "ReservationShortError", "Cause": "not what a block raises"}
    with pytest.raises(Exception, match="cannot pay for"):
        isolation.scope_block(
            isolation.ScopeRequest(run_id=RUN, canvas_id=CANVAS, account_id=ACCOUNT, block_id="b1", short=short),
            store,
            Vendor(),
        )
