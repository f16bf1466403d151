"""Calls to moto's JSON services (DynamoDB, Step Functions, SQS, EventBridge) answered in the calling thread as
soon as botocore has validated and serialized their parameters (`InProcessTransport.answer`): the answers and
errors are the ones moto gives over its socket, the client's parameter hooks and validation still apply, calls
whose signature would tell moto another account or region go the signed way, the moto request built for them is
the one moto builds, and an API call's priority still reaches moto's locks."""

from __future__ import annotations

import inspect
import json
from typing import Any

import boto3
import pytest
from botocore.client import BaseClient, ClientCreator
from botocore.exceptions import ClientError, ParamValidationError
from botocore.parsers import JSONParser
from botocore.signers import RequestSigner
from moto.core.request import Request
from moto.core.responses import BaseResponse

from canvas_local import moto_patch, priority
from canvas_local.moto_patch import locks
from canvas_local.moto_server import AttributeValueParser, InProcessTransport, MotoServer

pytestmark = [pytest.mark.unit, pytest.mark.timeout(60)]


@pytest.fixture
def answered(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The operations answered before botocore built a request (each goes through the transport's parse)."""
    operations: list[str] = []
    parse = InProcessTransport._parse

    def counted(self: InProcessTransport, http: Any, model: Any, context: Any) -> dict[str, Any]:
        operations.append(model.name)
        return parse(self, http, model, context)

    monkeypatch.setattr(InProcessTransport, "_parse", counted)
    return operations


def sessions(server: MotoServer) -> tuple[boto3.session.Session, boto3.session.Session]:
    """One session for moto's socket, one served in the calling thread."""
    in_process = boto3.session.Session()
    server.serve_in_process(in_process)
    return boto3.session.Session(), in_process


def client(session: boto3.session.Session, server: MotoServer, service: str, **overrides: str) -> Any:
    host, port = server.get_host_and_port()
    kwargs = {
        "endpoint_url": f"http://{host}:{port}",
        "region_name": "us-east-1",
        "aws_access_key_id": "testing",
        "aws_secret_access_key": "testing",
    } | overrides
    return session.client(service, **kwargs)


def calls(dynamodb: Any, sfn: Any, sqs: Any, events: Any, round_: int) -> list[Any]:
    """One answer (or error) of each kind the stack asks for, without what differs per request."""
    table, key = f"calls-{round_}", {"pk": {"S": "a"}}
    answers: list[Any] = []

    def ask(call: Any, *args: Any, **kwargs: Any) -> None:
        try:
            answer = call(*args, **kwargs)
        except ClientError as exc:
            answer = {"error": exc.response["Error"], "reasons": exc.response.get("CancellationReasons")}
            answer["status"] = exc.response["ResponseMetadata"]["HTTPStatusCode"]
        metadata = answer.pop("ResponseMetadata", None)
        if metadata is not None:
            answer["status"] = (metadata["HTTPStatusCode"], metadata["RetryAttempts"])
        answers.append(answer)

    ask(
        dynamodb.create_table,
        TableName=table,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    answers[-1]["TableDescription"].pop("CreationDateTime")
    ask(dynamodb.put_item, TableName=table, Item={**key, "n": {"N": "1"}, "blob": {"B": b"\x00\x01"}})
    ask(dynamodb.get_item, TableName=table, Key=key, ConsistentRead=True)
    ask(
        dynamodb.update_item,
        TableName=table,
        Key=key,
        UpdateExpression="ADD ended :x SET n = n + :one",
        ConditionExpression="attribute_exists(pk)",
        ExpressionAttributeValues={":x": {"SS": ["b"]}, ":one": {"N": "1"}},
        ReturnValues="ALL_NEW",
    )
    ask(dynamodb.put_item, TableName=table, Item=key, ConditionExpression="attribute_not_exists(pk)")
    update = {"TableName": table, "Key": key, "UpdateExpression": "SET n = :n", "ExpressionAttributeValues": {}}
    ask(
        dynamodb.transact_write_items,
        TransactItems=[
            {
                "Update": {
                    **update,
                    "ConditionExpression": "n = :two",
                    "ExpressionAttributeValues": {":n": {"N": "5"}, ":two": {"N": "2"}},
                }
            },
        ],
    )
    ask(
        dynamodb.transact_write_items,
        TransactItems=[
            {
                "Update": {
                    **update,
                    "ConditionExpression": "n = :nine",
                    "ExpressionAttributeValues": {":n": {"N": "5"}, ":nine": {"N": "9"}},
                }
            },
        ],
    )
    ask(dynamodb.batch_get_item, RequestItems={table: {"Keys": [key, {"pk": {"S": "none"}}]}})
    ask(dynamodb.describe_table, TableName="no-such-table")
    ask(sfn.list_state_machines)
    ask(sfn.describe_state_machine, stateMachineArn="arn:aws:states:us-east-1:123456789012:stateMachine:none")
    queue_url = sqs.create_queue(QueueName=f"calls-{round_}")["QueueUrl"]
    ask(sqs.send_message, QueueUrl=queue_url, MessageBody="ünïcode body")
    answers[-1].pop("MessageId")
    ask(sqs.receive_message, QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0)
    answers[-1]["Messages"] = [m["Body"] for m in answers[-1]["Messages"]]
    ask(events.put_events, Entries=[{"Source": "calls", "DetailType": "t", "Detail": "{}"}])
    answers[-1]["Entries"] = len(answers[-1]["Entries"])
    return _named_alike(answers, f"calls-{round_}")


def _named_alike(value: Any, name: str) -> Any:
    """The answers with this round's table and queue name in place of the other's."""
    if isinstance(value, dict):
        return {_named_alike(k, name): _named_alike(v, name) for k, v in value.items()}
    if isinstance(value, list):
        return [_named_alike(v, name) for v in value]
    return value.replace(name, "calls") if isinstance(value, str) else value


def test_json_calls_answered_in_process_are_what_the_socket_answers(moto_server, answered):
    # Given one session over moto's socket and one served in the calling thread
    over_socket, in_process = sessions(moto_server)
    services = ("dynamodb", "stepfunctions", "sqs", "events")

    # When the same calls (successes, refusals, a cancelled transaction, errors) are made both ways
    expected = calls(*(client(over_socket, moto_server, s) for s in services), round_=1)
    actual = calls(*(client(in_process, moto_server, s) for s in services), round_=2)

    # Then the answers are the same, and every call of the in-process session was answered before a request was
    # built
    assert actual == expected
    assert expected[2]["Item"]["blob"] == {"B": b"\x00\x01"}
    assert expected[6]["error"]["Code"] == "TransactionCanceledException"
    assert len(answered) == len(actual) + 1  # and the queue's creation


def test_a_call_answered_in_process_goes_through_the_clients_hooks_validation_and_errors(moto_server, answered):
    # Given a client served in the calling thread, two tables, and a hook that asks for one table at a time
    _, in_process = sessions(moto_server)
    dynamodb = client(in_process, moto_server, "dynamodb")
    for name in ("hooked-a", "hooked-b"):
        dynamodb.create_table(
            TableName=name,
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
    dynamodb.meta.events.register(
        "provide-client-params.dynamodb.ListTables", lambda params, **_: {**params, "Limit": 1}
    )
    answered_before = len(answered)

    # When it lists the tables, sends a parameter of the wrong type, and asks for a table that does not exist
    listed = dynamodb.list_tables()
    with pytest.raises(ParamValidationError, match="Invalid type for parameter TableName"):
        dynamodb.describe_table(TableName=5)
    with pytest.raises(dynamodb.exceptions.ResourceNotFoundException) as missing:
        dynamodb.describe_table(TableName="no-such-table")

    # Then the hook's parameter reached moto, the invalid call was refused before it, and moto's refusal is the
    # service's own exception class with its status
    assert len(listed["TableNames"]) == 1 and "LastEvaluatedTableName" in listed
    assert missing.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert answered[answered_before:] == ["ListTables", "DescribeTable"]


def test_a_call_moto_would_read_another_region_or_account_from_goes_signed(moto_server, answered):
    # Given clients whose signature names another region, or an access key moto issued for another account
    _, in_process = sessions(moto_server)
    elsewhere = client(in_process, moto_server, "dynamodb", region_name="eu-west-1")
    sts = client(in_process, moto_server, "sts")
    issued = sts.assume_role(RoleArn="arn:aws:iam::111111111111:role/other", RoleSessionName="other")["Credentials"]
    real_key = client(
        in_process,
        moto_server,
        "dynamodb",
        aws_access_key_id=issued["AccessKeyId"],
        aws_secret_access_key=issued["SecretAccessKey"],
        aws_session_token=issued["SessionToken"],
    )
    here = client(in_process, moto_server, "dynamodb")

    # When the first creates a table and each lists the tables of its region
    elsewhere.create_table(
        TableName="elsewhere",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    tables = {name: c.list_tables()["TableNames"] for name, c in (("elsewhere", elsewhere), ("key", real_key))}
    answered_before = len(answered)
    tables["here"] = here.list_tables()["TableNames"]

    # Then those calls went signed (moto saw the region), and only the default client's was answered before
    assert [name for name, listed in tables.items() if "elsewhere" in listed] == ["elsewhere"]
    assert answered[:answered_before] == []
    assert answered[answered_before:] == ["ListTables"]
    # And a key moto never issued, which it takes for its default account, is answered like the default client's
    never_issued = client(in_process, moto_server, "dynamodb", aws_access_key_id="AKIAIOSFODNN7EXAMPLE")
    assert never_issued.list_tables()["TableNames"] == tables["here"]
    assert answered[-1:] == ["ListTables"] and len(answered) == answered_before + 2


def test_the_moto_request_of_a_json_call_is_the_one_moto_builds(moto_server):
    # Given a transport for moto's endpoint and a JSON call's headers and body
    host, port = moto_server.get_host_and_port()
    transport = InProcessTransport(None, host, port)
    headers = {
        "X-Amz-Target": "DynamoDB_20120810.GetItem",
        "Content-Type": "application/x-amz-json-1.0",
        "User-Agent": b"Boto3/1.0 md/a#b",
        "Content-Length": "99",
        priority.HEADER: "1",
    }
    body = '{"TableName": "ü"}'.encode()

    # When the transport builds moto's request, and moto builds it from the same parts
    built = transport._root_request(headers, body)
    expected = Request.from_primitives("POST", f"http://{host}:{port}/", headers, body)

    # Then the environs, the headers moto reads and the bodies are the same
    assert built is not None
    ignored = {"wsgi.input", "wsgi.errors", "werkzeug.request"}
    assert {k: v for k, v in built.environ.items() if k not in ignored} == {
        k: v for k, v in expected.environ.items() if k not in ignored
    }
    assert list(built.headers.items()) == list(expected.headers.items())
    assert built.get_data() == expected.get_data() == body
    assert built.raw_url == expected.raw_url == f"http://{host}:{port}/"
    # And headers werkzeug would join, or a name moto keeps as sent, are left to moto's own builder
    assert transport._root_request({**headers, "x-amz-target": "again"}, body) is None
    assert transport._root_request({**headers, "x-amz-meta-my_key": "v"}, body) is None


def test_an_api_calls_priority_reaches_motos_locks_in_process(moto_server, monkeypatch):
    # Given moto's locks, a client served in process, and what the locks see of each request
    seen: list[bool] = []
    is_priority = locks._is_priority
    monkeypatch.setattr(locks, "_is_priority", lambda headers: seen.append(is_priority(headers)) or seen[-1])
    _, in_process = sessions(moto_server)
    dynamodb = client(in_process, moto_server, "dynamodb")

    # When a call is made for an API request, and one outside
    with moto_patch.backend_locks():
        with priority.api_request():
            dynamodb.list_tables()
        dynamodb.list_tables()

    # Then only the first went before waiting requests
    assert seen == [True, False]


def test_attribute_values_parse_to_what_botocore_makes_of_them():
    # Given DynamoDB answers holding every kind of attribute value, nested, with the odd forms a parser meets
    model = boto3.session.Session().client("dynamodb", region_name="us-east-1").meta.service_model
    item = {
        "s": {"S": "ü"},
        "n": {"N": "1.5"},
        "b": {"B": "AAE="},
        "bs": {"BS": ["AAE=", None]},
        "ss": {"SS": ["x", "y"]},
        "ns": {"NS": ["1"]},
        "m": {"M": {"l": {"L": [{"S": "y"}, None, {"M": {}}, {"NULL": True}]}, "f": {"BOOL": False}, "n": None}},
        "null": {"NULL": True},
        "unknown_member": {"S": "kept", "Q": 1},
        "empty": {},
    }
    answers = {
        "GetItem": {"Item": item},
        "Query": {"Items": [item, {"k": {"S": "v"}}], "Count": 2, "LastEvaluatedKey": {"k": {"S": "v"}}},
        "BatchGetItem": {"Responses": {"t": [item]}, "UnprocessedKeys": {}},
        "UpdateItem": {"Attributes": item},
    }
    for operation, answer in answers.items():
        output = model.operation_model(operation).output_shape
        response = {
            "headers": {"x-amzn-requestid": "r"},
            "status_code": 200,
            "body": json.dumps(answer).encode(),
            "context": {"operation_name": operation},
        }
        # When botocore's parser and the transport's parse it
        expected, parsed = JSONParser().parse(response, output), AttributeValueParser().parse(response, output)
        # Then the answers are the same, down to the order of every map's keys
        assert parsed == expected, operation
        assert json.dumps(parsed, default=repr) == json.dumps(expected, default=repr), operation
    assert parsed["Attributes"]["b"] == {"B": b"\x00\x01"}


def test_the_call_seams_keep_the_shapes_the_transport_implements():
    # botocore builds a client class from bases a `creating-client-class` handler may add to, and makes a call by
    # emitting the parameter hooks, then serializing with the client's serializer (which validates)
    assert "creating-client-class." in inspect.getsource(ClientCreator._create_client_class)
    make_api_call = inspect.getsource(boto3.client("dynamodb", region_name="us-east-1")._make_api_call)
    assert "self._emit_api_params(" in make_api_call and "request_signer=self._request_signer" in make_api_call
    assert "self._serializer.serialize_to_request(" in inspect.getsource(BaseClient._convert_to_request_dict)
    assert "provide-client-params." in inspect.getsource(BaseClient._emit_api_params)
    assert "raise error_class(parsed_response, operation_name)" in make_api_call
    # The signer says its region and holds the credentials it would sign with
    assert isinstance(RequestSigner.region_name, property)
    signer = boto3.client(
        "sqs", region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing"
    )._request_signer
    assert signer._credentials.access_key == "testing"
    # moto takes the region and account from the signature's scope, with these defaults and this pattern
    assert BaseResponse.default_region == "us-east-1"
    assert BaseResponse.access_key_regex.search("AWS4-HMAC-SHA256 Credential=testing/") is None
    assert BaseResponse.access_key_regex.search("AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/")
    assert "get_region_from_url" in BaseResponse.setup_class.__code__.co_names
    # botocore parses a structure member by member in the model's order, a map entry by entry, a blob with its parser
    assert {"members", "_parse_shape"} <= set(JSONParser._handle_structure.__code__.co_names)
    assert {"_parse_shape"} <= set(JSONParser._handle_map.__code__.co_names)
    assert "_blob_parser" in JSONParser._handle_blob.__code__.co_names
