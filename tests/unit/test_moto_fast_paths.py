"""What moto_patch does once instead of on every request gives the answers moto gives: DynamoDB attribute values
answered as stored, JSONPath and update expressions parsed once, and boto3's requests served in the calling thread."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.dynamodb.parsing.expressions import UpdateExpressionParser
from moto.stepfunctions.parser.asl.component.common.path import result_path as sfn_result_path
from moto.stepfunctions.parser.asl.utils import json_path as sfn_json_path

from canvas_local.moto_patch import speed_dynamodb

pytestmark = [pytest.mark.unit, pytest.mark.timeout(60)]

TABLE = "fast-paths"
# Every kind of attribute value, nested, with the edge cases moto's serializer treats its own way.
ITEM = {
    "pk": {"S": "canvas#1"},
    "sk": {"S": "NODE#a"},
    "empty": {"S": ""},
    "count": {"N": "3"},
    "ratio": {"N": "0.25"},
    "blob": {"B": b"\x00\x01binary"},
    "names": {"SS": ["a", "b"]},
    "numbers": {"NS": ["1", "2.5"]},
    "blobs": {"BS": [b"x", b"y"]},
    "flag": {"BOOL": False},
    "nothing": {"NULL": True},
    "nested": {
        "M": {
            "inputs": {"L": [{"S": "b"}, {"N": "7"}, {"M": {"deep": {"BOOL": True}}}, {"L": []}]},
            "empty_map": {"M": {}},
            "task_token": {"S": "token with spaces and ünïcode"},
        }
    },
}


@pytest.fixture
def dynamodb() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client(
            "dynamodb", region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing"
        )
        client.create_table(
            TableName=TABLE,
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
            ],
            BillingMode="PAY_PER_REQUEST",
        )
        client.put_item(TableName=TABLE, Item=ITEM)
        yield client


def reads_and_writes(client: Any, round_: int) -> dict[str, Any]:
    """One answer of each operation that returns items, without what differs per request."""
    key = {"pk": ITEM["pk"], "sk": ITEM["sk"]}
    results = {
        "get": client.get_item(TableName=TABLE, Key=key),
        "update": client.update_item(
            TableName=TABLE,
            Key=key,
            UpdateExpression="ADD ended_inputs :block SET pending = :n",
            ExpressionAttributeValues={":block": {"SS": [f"block-{round_}"]}, ":n": {"N": str(round_)}},
            ReturnValues="ALL_NEW",
        ),
        "query": client.query(
            TableName=TABLE,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": ITEM["pk"]},
            ReturnConsumedCapacity="TOTAL",
        ),
        "batch": client.batch_get_item(RequestItems={TABLE: {"Keys": [key]}}),
    }
    for answer in results.values():
        answer.pop("ResponseMetadata")
    return results


def test_dynamodb_answers_are_the_same_with_attribute_values_answered_as_stored(dynamodb, caches):
    # Given an item holding every kind of attribute value (updated once, so that the same update again changes
    # nothing)
    caches(False)
    reads_and_writes(dynamodb, 1)
    # When it is read and updated with moto's serializer, then again with the fast path
    expected = reads_and_writes(dynamodb, 1)
    caches(True)
    actual = reads_and_writes(dynamodb, 1)

    # Then every answer is the same, value for value
    assert actual == expected
    assert actual["get"]["Item"]["blob"] == {"B": b"\x00\x01binary"}
    assert actual["update"]["Attributes"]["nested"] == ITEM["nested"]


def test_an_attribute_value_moto_would_read_otherwise_goes_to_motos_serializer():
    # Given values that are not stored attribute values (an object, an unknown member)
    # Then the fast path declines them, so moto's own serializer answers
    assert speed_dynamodb._attribute_value(None, object()) is None  # type: ignore[arg-type]
    assert speed_dynamodb._attribute_value(None, {"X": "1"}) is None  # type: ignore[arg-type]
    assert speed_dynamodb._attribute_value(None, {"M": {"a": {"Q": 1}}}) is None  # type: ignore[arg-type]


def test_a_json_path_is_parsed_once_and_finds_what_a_fresh_parse_finds(caches):
    data = {"plan": {"blocks": [{"block_id": "a"}, {"block_id": "b"}]}, "released": {"ok": True}}
    paths = ["$.plan.blocks[1].block_id", "$.plan.blocks", "$.released.ok", "$.plan.blocks[*].block_id"]
    # Given the answers of fresh parses
    caches(False)
    expected = [sfn_json_path.extract_json(path, data) for path in paths]

    # When the caches are installed and the same paths are extracted twice
    caches(True)
    first = [sfn_json_path.extract_json(path, data) for path in paths]
    again = [sfn_json_path.extract_json(path, data) for path in paths]

    # Then the answers are moto's, and each parse (of a path, and of a result path) was shared
    assert first == again == expected
    assert sfn_json_path.parse("$.released") is sfn_json_path.parse("$.released")
    assert sfn_result_path.parse("$.released") is sfn_result_path.parse("$.released")
    with pytest.raises(sfn_json_path.NoSuchJsonPathError):
        sfn_json_path.extract_json("$.missing", data)


def test_an_update_expression_is_parsed_once_and_never_changed_by_the_writes_using_it(dynamodb, caches):
    expression = "ADD ended_inputs :block SET pending = pending - :one"
    key = {"pk": ITEM["pk"], "sk": ITEM["sk"]}
    # Given the caches installed and the expression's parsed tree as it first comes out
    caches(True)
    parsed = UpdateExpressionParser.make(expression)
    before = _tree(parsed)

    # When two writes use the expression (moto validates and executes them: a transaction and an update)
    dynamodb.update_item(
        TableName=TABLE, Key=key, UpdateExpression="SET pending = :n", ExpressionAttributeValues={":n": {"N": "5"}}
    )
    dynamodb.transact_write_items(
        TransactItems=[
            {
                "Update": {
                    "TableName": TABLE,
                    "Key": key,
                    "UpdateExpression": expression,
                    "ExpressionAttributeValues": {":block": {"SS": ["a"]}, ":one": {"N": "1"}},
                }
            }
        ]
    )
    answer = dynamodb.update_item(
        TableName=TABLE,
        Key=key,
        UpdateExpression=expression,
        ExpressionAttributeValues={":block": {"SS": ["b"]}, ":one": {"N": "1"}},
        ReturnValues="ALL_NEW",
    )

    # Then each write did what it says, the parse was shared and moto's validator left it as it was (it works on
    # its own copy; a moto that validates the shared tree in place fails here)
    assert answer["Attributes"]["pending"] == {"N": "3"}
    assert sorted(answer["Attributes"]["ended_inputs"]["SS"]) == ["a", "b"]
    assert UpdateExpressionParser.make(expression) is parsed
    assert _tree(parsed) == before
    assert "ExpressionAttributeValue" in str(before)
    # And an expression moto refuses is still refused every time
    for _ in range(2):
        with pytest.raises(Exception, match=r"Invalid UpdateExpression|Syntax error"):
            UpdateExpressionParser.make("SET = :n")


def _tree(node: Any) -> Any:
    """A parsed expression as nested tuples of node kinds and leaf values, to compare."""
    children = getattr(node, "children", None)
    if children is None:
        return node
    return (type(node).__name__, *(_tree(child) for child in children))


def test_requests_served_in_process_answer_what_the_socket_answers(moto_server):
    # Given two sessions for moto's server: one over its socket, one served in the calling thread
    host, port = moto_server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    over_socket = boto3.session.Session()
    in_process = boto3.session.Session()
    moto_server.serve_in_process(in_process)
    kwargs = {
        "endpoint_url": endpoint,
        "region_name": "us-east-1",
        "aws_access_key_id": "testing",
        "aws_secret_access_key": "testing",
    }
    s3_socket, s3_local = over_socket.client("s3", **kwargs), in_process.client("s3", **kwargs)
    sfn_local = in_process.client("stepfunctions", **kwargs)

    # When objects with awkward keys are written one way and read both ways, and an error is asked for
    s3_local.create_bucket(Bucket="fast-paths")
    key = "uploads/a b/ü+x%20y.txt"
    s3_local.put_object(Bucket="fast-paths", Key=key, Body=b"payload " * 1000, ContentType="text/plain")
    s3_local.upload_fileobj(_Stream(b"streamed"), "fast-paths", "streamed.bin")
    listed_local = s3_local.list_objects_v2(Bucket="fast-paths")["Contents"]
    listed_socket = s3_socket.list_objects_v2(Bucket="fast-paths")["Contents"]
    body_local = s3_local.get_object(Bucket="fast-paths", Key=key)["Body"].read()
    body_socket = s3_socket.get_object(Bucket="fast-paths", Key=key)["Body"].read()
    with pytest.raises(sfn_local.exceptions.StateMachineDoesNotExist):
        sfn_local.describe_state_machine(stateMachineArn="arn:aws:states:us-east-1:123456789012:stateMachine:none")

    # Then both ways see the same objects and bytes, and the in-process session's requests were served in process
    assert [(o["Key"], o["Size"]) for o in listed_local] == [(o["Key"], o["Size"]) for o in listed_socket]
    assert {o["Key"] for o in listed_local} == {key, "streamed.bin"}
    assert body_local == body_socket == b"payload " * 1000
    assert s3_local.get_object(Bucket="fast-paths", Key="streamed.bin")["Body"].read() == b"streamed"
    assert moto_server.served_in_process >= 7
    # And once stopped serving in process, the session's new clients go over the socket again
    count = moto_server.served_in_process
    moto_server.stop_serving_in_process(in_process)
    in_process.client("s3", **kwargs).list_buckets()
    assert moto_server.served_in_process == count


class _Stream:
    """A file-like body without a known length (boto3 sends it in chunks)."""

    def __init__(self, data: bytes):
        self._data = data

    def read(self, size: int = -1) -> bytes:
        chunk, self._data = (self._data, b"") if size < 0 else (self._data[:size], self._data[size:])
        return chunk


def test_json_bodies_in_process_are_unchanged(moto_server):
    # Given a DynamoDB client served in process
    host, port = moto_server.get_host_and_port()
    session = boto3.session.Session()
    moto_server.serve_in_process(session)
    client = session.client(
        "dynamodb",
        endpoint_url=f"http://{host}:{port}",
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    # When a table is made and an item round-trips
    client.create_table(
        TableName="in-process",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    item = {"pk": {"S": "x"}, "doc": {"S": json.dumps({"ü": "ñ" * 100})}}
    client.put_item(TableName="in-process", Item=item)
    # Then it reads back as written, and a failed condition is the usual error
    assert client.get_item(TableName="in-process", Key={"pk": {"S": "x"}})["Item"] == item
    with pytest.raises(client.exceptions.ConditionalCheckFailedException):
        client.put_item(TableName="in-process", Item=item, ConditionExpression="attribute_not_exists(pk)")
