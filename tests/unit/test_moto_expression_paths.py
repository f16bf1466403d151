"""What moto_patch spares moto's DynamoDB and its interpreter gives moto's answers: update expressions validated
without the walks that cannot change them (and on a copy made node by node), condition expressions parsed once
per expression, names and the values it names, request handler methods listed once, a Map's workers started for
its items. Each test compares with moto's own code (the caches removed), and the seam tests fail loudly when a moto
upgrade reshapes what these patches replace."""

from __future__ import annotations

import copy
import inspect
import json
import time
from collections.abc import Callable
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.core import responses as moto_responses
from moto.core.utils import method_names_from_class
from moto.dynamodb.comparisons import ConditionExpressionParser, get_filter_expression
from moto.dynamodb.models.dynamo_type import DynamoType, Item
from moto.dynamodb.models.table import Table
from moto.dynamodb.parsing import validators
from moto.dynamodb.parsing.ast_nodes import DepthFirstTraverser, Node
from moto.dynamodb.parsing.expressions import UpdateExpressionParser
from moto.dynamodb.responses import DynamoHandler
from moto.sqs.responses import SQSResponse
from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration.inline_iteration_component import (
    InlineIterationComponentEvalInput,
)
from moto.stepfunctions.responses import StepFunctionResponse

from canvas_local import moto_patch
from canvas_local.moto_patch import speed_dynamodb, speed_interpreter, speed_server

pytestmark = [pytest.mark.unit, pytest.mark.timeout(60)]

ATTRIBUTES = {
    "pk": {"S": "canvas#1"},
    "sk": {"S": "NODE#a"},
    "n": {"N": "3"},
    "tags": {"L": [{"S": "x"}]},
    "names": {"SS": ["a", "b"]},
    "doc": {"M": {"b": {"N": "1"}}},
    "kind": {"S": "node"},
}

# (UpdateExpression, names, values): the store's own writes, then every kind of path, function and refusal.
UPDATES: list[tuple[str, dict[str, str] | None, dict[str, Any] | None]] = [
    (
        "SET #content = :content, #status = :status",
        {"#content": "content", "#status": "status"},
        {":content": {"S": "done"}, ":status": {"S": "completed"}},
    ),
    ("ADD ended_inputs :input SET pending_inputs = n - :one", None, {":input": {"SS": ["a"]}, ":one": {"N": "1"}}),
    (
        "ADD ended_inputs :input SET pending_inputs = missing - :one",
        None,
        {":input": {"SS": ["a"]}, ":one": {"N": "1"}},
    ),
    ("SET released_at_ms = :now", None, {":now": {"N": "1700000000000"}}),
    ("REMOVE released_at_ms", None, None),
    ("SET c = if_not_exists(c, :zero) + :one", None, {":zero": {"N": "0"}, ":one": {"N": "1"}}),
    ("SET tags = list_append(tags, :more)", None, {":more": {"L": [{"S": "y"}]}}),
    ("SET absent = list_append(absent, :more)", None, {":more": {"L": [{"S": "y"}]}}),
    ("REMOVE n, tags[0]", None, None),
    ("DELETE names :gone", None, {":gone": {"SS": ["a"]}}),
    ("SET a = doc.b, c = n + n", None, None),
    ("SET doc.b = :v, doc.c = :v", None, {":v": {"N": "2"}}),
    ("SET nowhere.b = :v", None, {":v": {"N": "2"}}),
    ("SET pk = :v", None, {":v": {"S": "other"}}),
    ("SET #key = :v", {"#key": "sk"}, {":v": {"S": "other"}}),
    ("SET kind = :v", None, {":v": {"N": "1"}}),
    ("SET kind = :v", None, {":v": {"S": ""}}),
    ("SET kind = :v, flag = :w", None, {":v": {"S": "node"}, ":w": {"S": ""}}),
    ("SET a = :a SET b = :b", None, {":a": {"S": "1"}, ":b": {"S": "2"}}),
    ("SET a = :a, a = :b", None, {":a": {"S": "1"}, ":b": {"S": "2"}}),
    ("SET #undefined = :a", {}, {":a": {"S": "1"}}),
    ("SET a = :undefined", None, {":a": {"S": "1"}}),
    ("SET a = :a REMOVE n ADD names :more", None, {":a": {"S": "1"}, ":more": {"SS": ["c"]}}),
]


def seams_table() -> Table:
    """A table whose GSI key `kind` is an attribute SET may not give another type or an empty value."""
    return Table(
        "expressions",
        account_id="123456789012",
        region="us-east-1",
        schema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        attr=[{"AttributeName": name, "AttributeType": "S"} for name in ("pk", "sk", "kind")],
        global_indexes=[
            {
                "IndexName": "by-kind",
                "KeySchema": [{"AttributeName": "kind", "KeyType": "HASH"}],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
    )


def shape(node: Any) -> Any:
    """A tree as nested tuples of node kinds and leaves (values as their type and value), to compare."""
    if isinstance(node, DynamoType):
        return ("DynamoType", node.type, repr(node.value))
    if isinstance(node, Node):
        return (type(node).__name__, *(shape(child) for child in node.children or ()))
    return node


def validated(expression: str, names: dict[str, str] | None, values: dict[str, Any] | None) -> Any:
    """What moto's UpdateExpressionValidator makes of a write to the item, or the error it raises."""
    item = Item(DynamoType(ATTRIBUTES["pk"]), DynamoType(ATTRIBUTES["sk"]), copy.deepcopy(ATTRIBUTES))
    try:
        tree = UpdateExpressionParser.make(expression)
        validator = validators.UpdateExpressionValidator(
            tree, expression_attribute_names=names, expression_attribute_values=values, item=item, table=seams_table()
        )
        return shape(validator.validate())
    except Exception as exc:  # the refusal itself is the answer to compare
        return ("raised", type(exc).__name__, str(exc))


def test_update_expressions_validate_to_what_moto_makes_of_them(caches: Callable[[bool], None]):
    # Given what moto's own validator makes of each write (trees, and refusals)
    caches(False)
    expected = [validated(*update) for update in UPDATES]
    assert sum(answer[0] == "raised" for answer in expected) >= 10  # the refusals are part of the comparison

    # When the same writes are validated with the patches, twice (the second time skipping what the first checked)
    caches(True)
    first = [validated(*update) for update in UPDATES]
    again = [validated(*update) for update in UPDATES]

    # Then every tree and every refusal is moto's
    assert first == expected
    assert again == expected


def test_a_store_write_validated_again_walks_only_what_can_change_it(caches, monkeypatch):
    # Given a node's completion (SET of values alone) validated once
    caches(True)
    validated(*UPDATES[0])
    walks: list[str] = []
    traverse = DepthFirstTraverser.traverse
    monkeypatch.setattr(
        DepthFirstTraverser, "traverse", lambda self, node: walks.append(type(self).__name__) or traverse(self, node)
    )

    # When it is validated again
    validated(*UPDATES[0])

    # Then only the walks that put the values in and resolve the paths ran, of moto's ten
    assert walks == ["ExpressionAttributeValueProcessor", "ExpressionAttributeResolvingProcessor", "ExecuteOperations"]


def test_a_parsed_update_expression_is_copied_as_deepcopy_copies_it():
    for expression, _, _ in UPDATES[:12]:
        tree = UpdateExpressionParser.make(expression)
        # When the tree is copied node by node, and by deepcopy
        copied, expected = speed_dynamodb._copy_tree(tree), copy.deepcopy(tree)
        # Then both copies have the same nodes, leaves and parents, and share no node with the tree
        assert shape(copied) == shape(expected) == shape(tree)
        assert _parents(copied) == _parents(expected)
        assert not {id(node) for node in _nodes(copied)} & {id(node) for node in _nodes(tree)}


def _nodes(node: Any) -> list[Node]:
    if not isinstance(node, Node):
        return []
    return [node, *(n for child in node.children or () for n in _nodes(child))]


def _parents(tree: Node) -> list[tuple[str, str | None]]:
    """Each node's kind with its parent's kind, and whether the parent is the node that holds it."""
    found = []
    for node in _nodes(tree):
        for child in node.children or ():
            if isinstance(child, Node):
                found.append((type(child).__name__, type(node).__name__ if child.parent is node else None))
    return found


# (ConditionExpression, names, values): the store's own conditions, then functions, comparisons and refusals.
CONDITIONS: list[tuple[str, dict[str, str] | None, dict[str, Any] | None]] = [
    ("#cur = :running", {"#cur": "status"}, {":running": {"S": "running"}, ":content": {"S": "unused"}}),
    ("attribute_exists(item_id) AND NOT contains(ended_inputs, :id)", None, {":id": {"S": "a"}}),
    ("attribute_exists(item_id) AND NOT contains(ended_inputs, :id)", None, {":id": {"S": "b"}}),
    (
        "pending_inputs <= :zero AND attribute_exists(task_token) AND attribute_not_exists(released_at_ms)",
        None,
        {":zero": {"N": "0"}, ":now": {"N": "1700000000000"}},
    ),
    ("credits_balance >= :credits", None, {":credits": {"N": "5"}}),
    (
        "#s IN (:a, :b) OR size(#t) > :one",
        {"#s": "status", "#t": "tags"},
        {":a": {"S": "x"}, ":b": {"S": "y"}, ":one": {"N": "1"}},
    ),
    ("n BETWEEN :low AND :high", None, {":low": {"N": "1"}, ":high": {"N": "5"}}),
    ("begins_with(kind, :prefix) AND attribute_type(doc, :map)", None, {":prefix": {"S": "no"}, ":map": {"S": "M"}}),
    ("#missing = :v", {}, {":v": {"S": "x"}}),
    ("status = :undefined", None, {":v": {"S": "x"}}),
    ("n >", None, None),
]
ITEMS = [
    None,
    {
        "item_id": {"S": "NODE#a"},
        "status": {"S": "running"},
        "pending_inputs": {"N": "0"},
        "task_token": {"S": "t"},
        "ended_inputs": {"SS": ["a"]},
        "credits_balance": {"N": "9"},
        "n": {"N": "3"},
        "tags": {"L": [{"S": "x"}]},
        "kind": {"S": "node"},
        "doc": {"M": {}},
    },
    {
        "item_id": {"S": "NODE#b"},
        "status": {"S": "x"},
        "pending_inputs": {"N": "1"},
        "released_at_ms": {"N": "1"},
        "credits_balance": {"N": "1"},
        "n": {"N": "9"},
        "tags": {"L": [{"S": "x"}, {"S": "y"}]},
    },
]


def judged(expression: str, names: dict[str, str] | None, values: dict[str, Any] | None) -> Any:
    """Each item's verdict under the condition, and the names and values moto found in it; or its error."""
    try:
        parser = ConditionExpressionParser(expression, names, values)
        condition = parser.parse()
        verdicts = [condition.expr(_item(attributes) if attributes else None) for attributes in ITEMS]
        return verdicts, parser.expr_attr_names_found, parser.expr_attr_values_found
    except Exception as exc:  # the refusal itself is the answer to compare
        return ("raised", type(exc).__name__, str(exc))


def _item(attributes: dict[str, Any]) -> Item:
    return Item(DynamoType({"S": "canvas#1"}), DynamoType(attributes["item_id"]), copy.deepcopy(attributes))


def test_conditions_judge_items_as_moto_does_when_parsed_once(caches: Callable[[bool], None]):
    # Given moto's own verdicts on each item under each condition
    caches(False)
    expected = [judged(*condition) for condition in CONDITIONS]
    assert sum(answer[0] == "raised" for answer in expected) >= 3  # the refusals are part of the comparison

    # When the conditions are parsed with the patches, twice (the second time each parse is remembered), with
    # no names at all given as None and as the empty dict moto makes up
    caches(True)
    first = [judged(*condition) for condition in CONDITIONS]
    again = [judged(*condition) for condition in CONDITIONS]
    as_empty = [judged(expression, names or {}, values) for expression, names, values in CONDITIONS]

    # Then every verdict, every name and value found, and every refusal is moto's; values the text does not
    # name (":content", ":now") change nothing, the ones it names do (":id" a, then b)
    assert first == again == expected
    assert as_empty == expected
    assert expected[1][0] != expected[2][0]
    assert get_filter_expression(*CONDITIONS[1]) is get_filter_expression(*CONDITIONS[1])


def test_a_stored_item_is_copied_as_moto_copies_it(caches: Callable[[bool], None]):
    # Given an item with every kind of value, one of them the hash key's own value (deepcopy keeps such sharing)
    attributes = {
        **ATTRIBUTES,
        "blob": {"B": b"\x00"},
        "nothing": {"NULL": True},
        "deep": {"L": [{"M": {"s": {"NS": ["1"]}}}]},
    }
    item = Item(DynamoType(ATTRIBUTES["pk"]), None, attributes)
    item.attrs["alias"] = item.hash_key
    caches(False)
    expected = copy.deepcopy(item)

    # When it is copied with the patches
    caches(True)
    copied = copy.deepcopy(item)

    # Then the copy is moto's: same values and kinds, the same sharing, nothing shared with the item
    assert copied.to_json() == expected.to_json() == item.to_json()
    assert type(copied.attrs) is type(expected.attrs) and vars(copied).keys() == vars(expected).keys()
    assert copied.range_key is None and copied.attrs["alias"] is copied.hash_key
    assert copied.hash_key is not item.hash_key
    copied.attrs["deep"].value[0].value["s"].value.append("2")
    assert item.attrs["deep"].value[0].value["s"].value == ["1"]


MAP_MACHINE = {
    "StartAt": "Each",
    "States": {
        "Each": {
            "Type": "Map",
            "ItemsPath": "$.items",
            "MaxConcurrency": 40,
            "ItemSelector": {"value.$": "$$.Map.Item.Value", "run.$": "$.run"},
            "ItemProcessor": {
                "ProcessorConfig": {"Mode": "INLINE"},
                "StartAt": "Shape",
                "States": {"Shape": {"Type": "Pass", "Parameters": {"v.$": "$.value", "r.$": "$.run"}, "End": True}},
            },
            "End": True,
        }
    },
}


def run_map(sfn: Any, items: list[Any], max_concurrency: int) -> tuple[Any, list[str]]:
    """A Map's output and the kinds of its history events (iterations interleave: counted, not ordered)."""
    each = {**MAP_MACHINE["States"]["Each"], "MaxConcurrency": max_concurrency}
    definition = json.dumps({**MAP_MACHINE, "States": {"Each": each}})
    arn = sfn.create_state_machine(
        name=f"map-{time.monotonic_ns()}", definition=definition, roleArn="arn:aws:iam::123456789012:role/test"
    )["stateMachineArn"]
    execution = sfn.start_execution(stateMachineArn=arn, input=json.dumps({"items": items, "run": "r"}))["executionArn"]
    deadline = time.monotonic() + 30
    while (described := sfn.describe_execution(executionArn=execution))["status"] == "RUNNING":
        assert time.monotonic() < deadline
        time.sleep(0.02)
    history = sfn.get_execution_history(executionArn=execution, maxResults=1000)["events"]
    return json.loads(described.get("output", "null")), sorted(event["type"] for event in history)


def test_a_map_runs_its_items_as_moto_runs_them_with_a_worker_per_item_at_most(caches, monkeypatch):
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        sfn = boto3.client(
            "stepfunctions", region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing"
        )
        cases = [([1, 2, 3], 40), ([], 40), ([{"a": i} for i in range(5)], 2)]
        # Given what moto makes of Maps of 3 items, none, and 5 items two at a time
        caches(False)
        expected = [run_map(sfn, items, limit) for items, limit in cases]
        # When they run again with the patches, counting the workers started
        caches(True)
        started: list[int] = []
        launch = speed_interpreter._ORIGINAL_LAUNCH_WORKER
        monkeypatch.setattr(
            speed_interpreter, "_ORIGINAL_LAUNCH_WORKER", lambda *a, **k: started.append(1) or launch(*a, **k)
        )
        actual = [run_map(sfn, items, limit) for items, limit in cases]
    # Then outputs and histories are moto's, and no more workers started than items (nor than the limit)
    assert actual == expected
    assert expected[0][0] == [{"v": 1, "r": "r"}, {"v": 2, "r": "r"}, {"v": 3, "r": "r"}]
    assert len(started) == 3 + 0 + 2


def test_request_handler_methods_are_listed_as_moto_lists_them(caches: Callable[[bool], None]):
    caches(True)
    for handler in (DynamoHandler, StepFunctionResponse, SQSResponse):
        assert moto_responses.method_names_from_class(handler) == method_names_from_class(handler)


# ---------------------------------------------------------------- the seams


def test_the_validation_and_parse_seams_keep_the_shapes_the_patches_implement():
    # Given the moto code moto_patch replaces or leaves out, as it is when the patches are not installed
    original_init = speed_dynamodb._ORIGINAL_VALIDATOR_INIT
    # Then the validator takes the tree and the write's context, copies the tree and lists its processors...
    assert list(inspect.signature(original_init).parameters) == [
        "self",
        "expression",
        "expression_attribute_names",
        "expression_attribute_values",
        "item",
        "table",
    ]
    assert {"deepcopy", "get_ast_processors"} <= set(original_init.__code__.co_names)
    # ...whose kinds are the ones the patch reasons about, in moto's order, each walking the copy in turn
    kinds = [type(p) for p in validators.UpdateExpressionValidator.get_ast_processors(_Context())]
    assert kinds == [
        validators.ActionCountValidator,
        validators.OverlappingPathsValidator,
        validators.UpdateHashRangeKeyValidator,
        validators.ExpressionAttributeValueProcessor,
        validators.ExpressionAttributeResolvingProcessor,
        validators.UpdateExpressionFunctionEvaluator,
        validators.NoneExistingPathChecker,
        validators.ExecuteOperations,
        validators.TypeMismatchValidator,
        validators.EmptyStringKeyValueValidator,
    ]
    assert {"processors", "node_to_validate", "traverse"} <= set(speed_dynamodb._ORIGINAL_VALIDATE.__code__.co_names)
    # And the tree walk, the condition parse and the handler listing keep their signatures
    assert list(inspect.signature(speed_dynamodb._ORIGINAL_TRAVERSE).parameters) == ["self", "node", "child_id"]
    assert speed_dynamodb._ORIGINAL_TRAVERSE is DepthFirstTraverser.__dict__.get("traverse_node_recursively") or (
        DepthFirstTraverser.traverse_node_recursively is speed_dynamodb._traverse
    )
    assert list(inspect.signature(speed_dynamodb._ORIGINAL_CONDITION_PARSE).parameters) == ["self"]
    fresh = ConditionExpressionParser("a = :a", None, {":a": {"S": "x"}})
    assert fresh.expr_attr_names_found == [] and fresh.expr_attr_values_found == []
    assert list(inspect.signature(speed_server._ORIGINAL_METHOD_NAMES).parameters) == ["clazz"]
    # And an item's copy is made of its keys and attributes, each value copied as a DynamoType copies itself
    assert {"hash_key", "range_key", "attrs", "deepcopy"} <= set(
        speed_dynamodb._ORIGINAL_ITEM_DEEPCOPY.__code__.co_names
    )
    assert {"is_list", "is_map", "is_set"} <= set(DynamoType.__deepcopy__.__code__.co_names)
    # And an inline Map starts its workers one call at a time, each given the eval input holding the items
    assert list(inspect.signature(speed_interpreter._ORIGINAL_LAUNCH_WORKER).parameters) == [
        "self",
        "env",
        "eval_input",
        "job_pool",
    ]
    assert "input_items" in inspect.signature(InlineIterationComponentEvalInput).parameters


class _Context:
    """What get_ast_processors reads of a validator."""

    expression_attribute_names: dict[str, str] = {}
    expression_attribute_values: dict[str, Any] = {}
    item = None
    table = seams_table()


def test_each_speed_patch_replaces_its_attributes_and_gives_moto_its_own_back(caches: Callable[[bool], None]):
    def raw(value: Any) -> Any:  # a classmethod or staticmethod made again wraps the same function
        return getattr(value, "__func__", value)

    # Given every speed patch, the attributes it replaces and moto's own values of them
    patches = moto_patch.speed_patches().values()
    replacements = [r for patch in patches for r in patch.replacements]
    caches(False)
    before = [inspect.getattr_static(r.owner, r.name) for r in replacements]
    for patch in patches:
        patch.uninstall()
    own = [raw(inspect.getattr_static(r.owner, r.name)) for r in replacements]
    try:
        # When each is installed
        for patch in patches:
            patch.install()
        # Then every attribute it names is replaced
        assert all(raw(inspect.getattr_static(r.owner, r.name)) is raw(r.patch) for r in replacements), (
            "an attribute a speed patch names was not replaced"
        )
        # And removed, moto has its own back: the originals kept are moto's attributes
        for patch in patches:
            patch.uninstall()
        assert [raw(inspect.getattr_static(r.owner, r.name)) for r in replacements] == own
        assert own == [raw(r.original) for r in replacements]
    finally:
        for r, value in zip(replacements, before, strict=True):
            setattr(r.owner, r.name, value)
