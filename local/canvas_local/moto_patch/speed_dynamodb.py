"""Speed: work moto's DynamoDB repeats for every write or answer, done once or more cheaply here. A write tokenizes
and parses the same UpdateExpression and ConditionExpression two or three times each, validates an UpdateExpression
with ten walks over a deep copy of its tree (some of which cannot change it), and copies items through
`copy.deepcopy` value by value; an answer walks every attribute value of
every item against the service model, though they are stored in the wire form already. What each buys:
`.venv/bin/python -m bench.moto_patches NAME` (docs/benchmarks.md, "What each moto patch buys"), CPU per block of a
chain of 20 blocks, with the patch against without it."""

from __future__ import annotations

import contextlib
import copy
import functools
import weakref
from dataclasses import dataclass, field
from typing import Any, cast

from moto.core.serialize import JSONSerializer
from moto.dynamodb.comparisons import ConditionExpressionParser
from moto.dynamodb.models.dynamo_type import DDBType, DynamoType, Item, LimitedSizeDict
from moto.dynamodb.models.table import Table
from moto.dynamodb.parsing import validators as ddb_validators
from moto.dynamodb.parsing.ast_nodes import (
    DepthFirstTraverser,
    Node,
    UpdateExpressionAddAction,
    UpdateExpressionDeleteAction,
    UpdateExpressionFunction,
    UpdateExpressionPath,
    UpdateExpressionRemoveAction,
    UpdateExpressionSetAction,
)
from moto.dynamodb.parsing.expressions import UpdateExpressionParser

from canvas_local.moto_patch.patches import Replacement, SpeedPatch

_ORIGINAL_UPDATE_EXPRESSION_MAKE = UpdateExpressionParser.make
_ORIGINAL_VALIDATOR_INIT = ddb_validators.Validator.__init__
_ORIGINAL_VALIDATE = ddb_validators.Validator.validate
_ORIGINAL_NODES_TO_BE_PROCESSED = DepthFirstTraverser.nodes_to_be_processed
_ORIGINAL_TRAVERSE = DepthFirstTraverser.traverse_node_recursively
_ORIGINAL_CONDITION_PARSE = ConditionExpressionParser.parse
_ORIGINAL_ITEM_DEEPCOPY = Item.__deepcopy__
_ORIGINAL_JSON_STRUCTURE = JSONSerializer._serialize_type_structure
_ORIGINAL_JSON_MAP = JSONSerializer._serialize_type_map


# update_expressions_parsed_once: moto's `UpdateExpressionParser.make` tokenizes and parses an UpdateExpression two
# or three times per write (the request's validation, the backend, a transaction's check). The parsed tree is only
# read: the validator works on its own deep copy. Buys 17-19% of a chain's CPU per block.
@functools.lru_cache(maxsize=1024)
def _parsed_update_expression(expression: str) -> Any:
    return _ORIGINAL_UPDATE_EXPRESSION_MAKE(expression)


def _update_expression_once(cls: type, expression: str) -> Any:
    return _parsed_update_expression(expression)


# update_validation_trimmed: moto's UpdateExpression validator (`Validator.__init__` and `validate`) deep-copies the
# parsed tree (its processors replace nodes in place), then walks the copy once per processor, ten walks per write.
# Buys 9% of a chain's CPU per block. The copy is made node by node here, as deepcopy would make it.
# Walks that cannot change the tree or raise for this expression are left out, each for a reason that holds for
# every write with it:
# - the first processors check the expression alone (one SET, ADD or REMOVE clause each; no path twice; no key
#   attribute updated): they depend on the tree, the attribute names and the table's keys, and raise or pass the
#   same way every time, so a tree that passed them with the same names and keys skips them (two of them searched
#   the whole tree again at every clause node: most of a write's cost);
# - the function evaluator works on if_not_exists and list_append, which a tree without functions lacks;
# - the check for paths missing from the item looks at what resolving the values' paths left; a tree whose
#   values hold no path (nor function) leaves nothing to look at;
# - the checks of SET against the table's key attributes (type, empty value) compare the first name of each SET
#   path with the table's attributes; when none of those names is one, neither can raise.
_EXPRESSION_ONLY = (
    ddb_validators.ActionCountValidator,
    ddb_validators.OverlappingPathsValidator,
    ddb_validators.UpdateHashRangeKeyValidator,
)
_ACTIONS = (
    UpdateExpressionSetAction,
    UpdateExpressionAddAction,
    UpdateExpressionRemoveAction,
    UpdateExpressionDeleteAction,
)


@dataclass
class _ExpressionFacts:
    has_function: bool
    has_value_path: bool
    set_names: frozenset[str] | None  # None: a SET path of a shape the facts do not cover
    passed: set[tuple[Any, ...]] = field(default_factory=set)


_expression_facts: weakref.WeakKeyDictionary[Node, _ExpressionFacts] = weakref.WeakKeyDictionary()


def _facts_of(expression: Node) -> _ExpressionFacts:
    facts = _expression_facts.get(expression)
    if facts is None:
        facts = _expression_facts[expression] = _read_facts(expression)
    return facts


def _read_facts(expression: Node) -> _ExpressionFacts:
    has_function = has_value_path = False
    set_names: set[str] | None = set()
    pending: list[tuple[Any, Any, int]] = [(expression, None, -1)]
    while pending:
        node, parent, index = pending.pop()
        if not isinstance(node, Node):
            continue
        if isinstance(node, UpdateExpressionFunction):
            has_function = True
        elif isinstance(node, UpdateExpressionPath) and not (isinstance(parent, _ACTIONS) and index == 0):
            has_value_path = True
        if isinstance(node, UpdateExpressionSetAction) and set_names is not None:
            try:
                name = node.children[0].children[0].children[0]
            except (AttributeError, IndexError, TypeError):
                name = None
            if isinstance(name, str):
                set_names.add(name)
            else:
                set_names = None
        pending.extend((child, node, i) for i, child in enumerate(node.children or ()))
    return _ExpressionFacts(has_function, has_value_path, frozenset(set_names) if set_names is not None else None)


def _needless(processor: DepthFirstTraverser, facts: _ExpressionFacts) -> bool:
    kind = type(processor)
    if kind is ddb_validators.UpdateExpressionFunctionEvaluator:
        return not facts.has_function
    if kind is ddb_validators.NoneExistingPathChecker:
        return not facts.has_function and not facts.has_value_path
    if kind is ddb_validators.TypeMismatchValidator and facts.set_names is not None:
        return facts.set_names.isdisjoint(d["AttributeName"] for d in processor.key_attributes_type)
    if kind is ddb_validators.EmptyStringKeyValueValidator and facts.set_names is not None:
        return facts.set_names.isdisjoint(processor.key_attributes)
    return False


def _validator_init(
    self: ddb_validators.Validator,
    expression: Node,
    expression_attribute_names: dict[str, str],
    expression_attribute_values: dict[str, dict[str, Any]],
    item: Any,
    table: Table,
) -> None:
    self.expression_attribute_names = expression_attribute_names
    self.expression_attribute_values = expression_attribute_values
    self.item = item
    self.table = table
    self.processors = self.get_ast_processors()
    self.node_to_validate = _copy_tree(expression)
    self._expression = expression  # type: ignore[attr-defined]


def _validate(self: ddb_validators.Validator) -> Node:
    expression = getattr(self, "_expression", None)
    if type(self) is not ddb_validators.UpdateExpressionValidator or expression is None:
        return _ORIGINAL_VALIDATE(self)
    facts = _facts_of(expression)
    names = self.expression_attribute_names
    key = (tuple(names.items()) if names else (), tuple(self.table.table_key_attrs))
    processors = self.processors
    leading = 0
    while leading < len(processors) and type(processors[leading]) in _EXPRESSION_ONLY:
        leading += 1
    node = self.node_to_validate
    if key not in facts.passed:
        for processor in processors[:leading]:
            node = processor.traverse(node)
        facts.passed.add(key)
    for processor in processors[leading:]:
        if not _needless(processor, facts):
            node = processor.traverse(node)
    return node


def _copy_tree(expression: Any) -> Any:
    """What `copy.deepcopy` makes of a parsed expression, without its generic per-object protocol: every node
    copied with its attributes, leaves (text, numbers) shared as deepcopy shares them. Anything else (a node with
    other attributes, a parent outside the tree) goes to deepcopy."""
    if not isinstance(expression, Node) or expression.parent is not None:
        return copy.deepcopy(expression)
    copies: dict[int, Node] = {}
    try:
        return _copy_node(expression, None, copies)
    except _NotPlain:
        return copy.deepcopy(expression)


class _NotPlain(Exception):
    pass


_NODE_ATTRIBUTES = frozenset({"type", "children", "parent"})
_LEAVES = frozenset({str, int, float, bool, type(None)})


def _copy_node(node: Node, parent: Node | None, copies: dict[int, Node]) -> Node:
    attributes = node.__dict__
    if attributes.keys() != _NODE_ATTRIBUTES or id(node) in copies:
        raise _NotPlain
    copied = object.__new__(type(node))
    copies[id(node)] = copied
    children = attributes["children"]
    copied.__dict__ = {"type": attributes["type"], "children": children, "parent": parent}
    if children is not None:
        copied_children = []
        for child in children:
            kind = type(child)
            if kind in _LEAVES:
                copied_children.append(child)
            elif _is_node_type(kind) and child.parent is node:
                copied_children.append(_copy_node(child, copied, copies))
            else:
                raise _NotPlain
        copied.__dict__["children"] = copied_children
    return copied


# traversal_types_once: moto's `DepthFirstTraverser.nodes_to_be_processed` and `traverse_node_recursively`. Under
# 5% of a chain's CPU per block alone (four passes: 6, 1, 3, 4%), but with `items_copied_directly` and
# `backend_per_host` (each also under 5% alone) and the three patches removed, 11-18% together: kept with them.
_processed_kinds: dict[type, tuple[type, ...]] = {}


def _nodes_to_be_processed(self: DepthFirstTraverser) -> tuple[type, ...]:
    # moto builds a processor's map of node kinds (bound methods and all) again at every node it visits; the kinds
    # are the keys of a literal in each processor class.
    kinds = _processed_kinds.get(type(self))
    if kinds is None:
        kinds = _processed_kinds[type(self)] = _ORIGINAL_NODES_TO_BE_PROCESSED(self)
    return kinds


# Whether an object of a type is a Node, and whether a processor processes nodes of a type: moto asks with
# isinstance on abstract classes (a Python-level check each time) at every node of every walk. No class is
# registered as a virtual subclass of these, so the answer is one per type.
_node_types: dict[type, bool] = {}
_processed_types: dict[tuple[type, type], bool] = {}


def _is_node_type(kind: type) -> bool:
    is_node = _node_types.get(kind)
    if is_node is None:
        is_node = _node_types[kind] = issubclass(kind, Node)
    return is_node


def _traverse(self: DepthFirstTraverser, node: Any, child_id: int = -1) -> Any:
    """moto's `DepthFirstTraverser.traverse_node_recursively`, with its type checks answered once per type."""
    kind = type(node)
    if _is_node_type(kind):
        parent_node = node.parent
        if node.children is not None:
            for i, child_node in enumerate(node.children):
                self.pre_processing_of_child(node, i)
                self.traverse_node_recursively(child_node, i)
        processed = _processed_types.get((type(self), kind))
        if processed is None:
            processed = _processed_types[(type(self), kind)] = isinstance(node, self.nodes_to_be_processed())
        if processed:
            node = self.process(node)
            node.parent = parent_node
            if parent_node:
                parent_node.children[child_id] = node
    return node


# conditions_parsed_once: moto's `ConditionExpressionParser.parse`. A conditional write's ConditionExpression is
# parsed two or three times in one request (the request's
# validation, a transaction's check, the write), and the same conditions come back request after request. A parse
# depends on the expression, the attribute names and the values it names (a value's placeholder is in its text),
# so it is remembered under those; its result, which evaluation only reads, is shared. No names or values at all
# (None, or an empty dict moto makes up) are the same to an expression that parsed without them. Buys 8% of a chain's
# CPU per block.
_CONDITION_PARSES = 1024
_condition_parses: dict[tuple[Any, ...], tuple[Any, ...]] = {}


def _parse_condition(self: ConditionExpressionParser) -> Any:
    expression: Any = self.condition_expression  # text, or what the except below hands to moto's own parse
    names, values = self.expression_attribute_names, self.expression_attribute_values
    try:
        key = (
            expression,
            tuple(names.items()) if names else (),
            tuple((name, repr(value)) for name, value in values.items() if name in expression) if values else (),
        )
        parsed = _condition_parses.get(key)
    except (AttributeError, TypeError):  # not text, or not dicts: moto's own parse says what it makes of them
        return _ORIGINAL_CONDITION_PARSE(self)
    if parsed is not None:
        op, names_found, values_found = parsed
        self.expr_attr_names_found.extend(names_found)
        self.expr_attr_values_found.extend(values_found)
        return op
    op = _ORIGINAL_CONDITION_PARSE(self)
    while len(_condition_parses) >= _CONDITION_PARSES:
        with contextlib.suppress(StopIteration, KeyError, RuntimeError):
            del _condition_parses[next(iter(_condition_parses))]
    _condition_parses[key] = (op, tuple(self.expr_attr_names_found), tuple(self.expr_attr_values_found))
    return op


# items_copied_directly: moto's `Item.__deepcopy__`. Under 5% of a chain's CPU per block alone (four passes: 6, 9, 1,
# -1%), kept with `traversal_types_once` and `backend_per_host` (see there).
def _copy_item(self: Item, memo: dict[int, Any]) -> Item:
    """moto's `Item.__deepcopy__` (a write copies the item it changes once or twice), with each value copied as
    moto's `DynamoType.__deepcopy__` copies it but without going through `copy.deepcopy` for every one of them."""
    if id(self) in memo:
        return memo[id(self)]  # type: ignore[no-any-return]
    result = cast(Item, self.__class__.__new__(self.__class__))  # moto's BaseModel.__new__ says BaseModel
    memo[id(self)] = result
    result.hash_key = _copy_value(self.hash_key, memo)
    result.range_key = _copy_value(self.range_key, memo)
    attributes = LimitedSizeDict.__new__(LimitedSizeDict)
    dict.__init__(attributes)
    for key, value in self.attrs.items():
        dict.__setitem__(attributes, key, _copy_value(value, memo))
    result.attrs = attributes
    return result


_SETS = frozenset({DDBType.STRING_SET, DDBType.NUMBER_SET, DDBType.BINARY_SET})


def _copy_value(value: Any, memo: dict[int, Any]) -> Any:
    if type(value) is not DynamoType:
        return copy.deepcopy(value, memo)
    copied = memo.get(id(value))
    if copied is not None:
        return copied
    copied = DynamoType.__new__(DynamoType)
    memo[id(value)] = copied
    kind, inner = value.type, value.value
    copied.type = kind
    if kind == DDBType.LIST:
        copied.value = [_copy_value(v, memo) for v in inner]
    elif kind == DDBType.MAP:
        copied.value = {k: _copy_value(v, memo) for k, v in inner.items()}
    elif kind in _SETS:
        copied.value = list(inner)
    else:
        copied.value = inner
    return copied


# attribute_values_as_stored: moto's `JSONSerializer._serialize_type_structure` and `_serialize_type_map`, for
# DynamoDB's attribute values. Buys 16% of a chain's CPU per block.
_ATTRIBUTE_VALUE = "AttributeValue"
_STRINGS = ("S", "N")
_STRING_LISTS = ("SS", "NS")
_BOOLEANS = ("NULL", "BOOL")
_ATTRIBUTE_TYPES = frozenset({*_STRINGS, *_STRING_LISTS, *_BOOLEANS, "B", "BS", "M", "L"})


def _serialize_structure(self: JSONSerializer, serialized: Any, value: Any, shape: Any, key: str) -> None:
    # moto serializes DynamoDB's attribute values member by member against the service model, which is most of
    # the cost of answering a read or a write that returns an item; they are stored in the wire form already.
    if key and shape.name == _ATTRIBUTE_VALUE and self.service_model.service_name == "dynamodb":
        plain = _attribute_value(self, value)
        if plain is not None:
            serialized[self.get_serialized_name(shape, key)] = plain
            return
    _ORIGINAL_JSON_STRUCTURE(self, serialized, value, shape, key)


def _serialize_map(self: JSONSerializer, serialized: Any, value: Any, shape: Any, key: str) -> None:
    # An item is a map of attribute values: each is answered as stored (see above) without going through moto's
    # serializer per entry; a map holding anything else goes to moto's serializer whole.
    value_shape = shape.value
    is_item = value_shape.name == _ATTRIBUTE_VALUE and self.service_model.service_name == "dynamodb"
    if is_item and isinstance(value, dict):
        entries = {}
        for name, entry in value.items():
            plain = _attribute_value(self, entry) if name else None  # moto's serializer treats "" its own way
            if plain is None:
                break
            entries[self.get_serialized_name(value_shape, name)] = plain
        else:
            self._default_serialize(serialized, entries, shape, key)
            return
    _ORIGINAL_JSON_MAP(self, serialized, value, shape, key)


def _attribute_value(serializer: JSONSerializer, value: Any) -> dict[str, Any] | None:
    """What moto's serializer makes of one stored attribute value, or None for anything it would read otherwise."""
    if not isinstance(value, dict) or not value.keys() <= _ATTRIBUTE_TYPES:
        return None
    plain: dict[str, Any] = {}
    for kind, member in value.items():
        if member is None:
            continue
        if kind in _STRINGS:
            plain[kind] = member if isinstance(member, str) else str(member)
        elif kind in _STRING_LISTS:
            plain[kind] = [m if isinstance(m, str) else str(m) for m in member]
        elif kind in _BOOLEANS:
            plain[kind] = member in (True, "True", "true")
        elif kind == "B":
            plain[kind] = serializer._base64(member)
        elif kind == "BS":
            plain[kind] = [serializer._base64(m) for m in member]
        elif kind == "M":
            if not isinstance(member, dict):
                return None
            entries = {}
            for name, entry in member.items():
                converted = _attribute_value(serializer, entry)
                if converted is None:
                    return None
                entries[name] = converted
            plain[kind] = entries
        else:  # "L"
            items = [_attribute_value(serializer, entry) for entry in member]
            if any(item is None for item in items):
                return None
            plain[kind] = items
    # moto emits the members in the order of the service model's shape.
    return {kind: plain[kind] for kind in _MEMBER_ORDER if kind in plain}


_MEMBER_ORDER = ("S", "N", "B", "SS", "NS", "BS", "M", "L", "NULL", "BOOL")


PATCHES = {
    "update_expressions_parsed_once": SpeedPatch(
        (
            Replacement(
                UpdateExpressionParser,
                "make",
                classmethod(_ORIGINAL_UPDATE_EXPRESSION_MAKE.__func__),
                classmethod(_update_expression_once),
            ),
        )
    ),
    "update_validation_trimmed": SpeedPatch(
        (
            Replacement(ddb_validators.Validator, "__init__", _ORIGINAL_VALIDATOR_INIT, _validator_init),
            Replacement(ddb_validators.Validator, "validate", _ORIGINAL_VALIDATE, _validate),
        )
    ),
    "traversal_types_once": SpeedPatch(
        (
            Replacement(
                DepthFirstTraverser, "nodes_to_be_processed", _ORIGINAL_NODES_TO_BE_PROCESSED, _nodes_to_be_processed
            ),
            Replacement(DepthFirstTraverser, "traverse_node_recursively", _ORIGINAL_TRAVERSE, _traverse),
        )
    ),
    "items_copied_directly": SpeedPatch((Replacement(Item, "__deepcopy__", _ORIGINAL_ITEM_DEEPCOPY, _copy_item),)),
    "conditions_parsed_once": SpeedPatch(
        (Replacement(ConditionExpressionParser, "parse", _ORIGINAL_CONDITION_PARSE, _parse_condition),)
    ),
    "attribute_values_as_stored": SpeedPatch(
        (
            Replacement(JSONSerializer, "_serialize_type_structure", _ORIGINAL_JSON_STRUCTURE, _serialize_structure),
            Replacement(JSONSerializer, "_serialize_type_map", _ORIGINAL_JSON_MAP, _serialize_map),
        )
    ),
}
