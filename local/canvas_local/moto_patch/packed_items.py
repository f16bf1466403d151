"""Memory: moto keeps every stored DynamoDB item as an object graph (an `Item`, a `DynamoType` per attribute and
nested value, their dicts), about six times the item's JSON. A table's items are kept packed instead (marshal bytes
of their attributes; `Table.__init__` makes the storage, `DynamoDBBackend.update_item` stores an update again, as moto
applies it to the item it read) and built again on each read. Left out, traced memory grew 46 kB a run instead of
10.5 (`bench.memory --tracemalloc --without packed_items`; docs/benchmarks.md, "What each moto patch buys").

Speed, for packed tables above all: moto's scan and query read every item of the table (`all_items`), which on a
packed table builds each of them from its bytes; the scan with a `Limit` (`scans_build_what_they_read`: 0.23 s
against 2.04 for 500 of 16,000 items, `bench.packed_scan`) and the queries (`queries_read_their_items`: 36-41% of a
chain's CPU per block on a stack holding many items, `bench.moto_patches`; 0.032 s against 2.36 for an index query
of 16,000 items, `bench.packed_scan`) build only the items they can answer with."""

from __future__ import annotations

import bisect
import inspect
import marshal
import zlib
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from typing import Any

from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DDBType, DynamoType, Item, LimitedSizeDict
from moto.dynamodb.models.table import Table

from canvas_local.moto_patch.locks import service_lock
from canvas_local.moto_patch.patches import Replacement, SpeedPatch

_ORIGINAL_TABLE_INIT = Table.__init__
_ORIGINAL_UPDATE_ITEM = DynamoDBBackend.update_item
_ORIGINAL_SCAN = Table.scan
_SCAN_SIGNATURE = inspect.signature(_ORIGINAL_SCAN)
_ORIGINAL_QUERY = Table.query
_QUERY_SIGNATURE = inspect.signature(_ORIGINAL_QUERY)


class PackedItems(MutableMapping[DynamoType, Item]):
    """A table's items by hash key (a table without a range key), or one partition's by range key: each kept as
    marshal bytes of its attributes, compressed (about half the size, for some 25 µs an item more: docs/benchmarks.md),
    an `Item` built again on each read. What moto reads and writes through `Table.items` (get, set, pop, `in`, len,
    values) works as on its dicts; an `Item` read is a copy, so a change made to it is stored only when it is set
    again (`_update_and_store`)."""

    __slots__ = ("_entries", "_hash_key", "_indexed", "_packed", "_posted", "_postings")

    def __init__(self, hash_key: DynamoType | None = None, indexed: tuple[str, ...] = ()) -> None:
        self._hash_key = hash_key  # a partition's; None: each key is the item's hash key
        self._packed: dict[DynamoType, bytes] = {}
        # The attributes that are an index's only hash key: for each of their values, the keys of the items that
        # hold it, so that a query of the index builds those items and not the table's (`_query_index`).
        self._indexed = indexed
        self._postings: dict[tuple[str, Any], dict[DynamoType, None]] = {}
        self._posted: dict[DynamoType, tuple[tuple[str, Any], ...]] = {}
        self._entries: dict[tuple[str, Any], tuple[str, Any]] = {}  # one copy of each (attribute, value)

    def __getitem__(self, key: DynamoType) -> Item:
        return self._unpack(key, self._packed[key])

    def __setitem__(self, key: DynamoType, item: Item) -> None:
        packed = marshal.dumps(tuple((name, *_plain(value)) for name, value in item.attrs.items()))
        self._packed[key] = zlib.compress(packed, 1)
        if self._indexed:
            self._unpost(key)
            entries = tuple(
                self._entries.setdefault(entry, entry)
                for entry in ((name, _index_value(item.attrs[name])) for name in self._indexed if name in item.attrs)
            )
            if entries:
                self._posted[key] = entries
                for entry in entries:
                    self._postings.setdefault(entry, {})[key] = None

    def __delitem__(self, key: DynamoType) -> None:
        del self._packed[key]
        if self._indexed:
            self._unpost(key)

    def indexed(self, name: str, value: DynamoType) -> list[Item] | None:
        """The items whose attribute `name` is `value`, when `name` is an indexed attribute; None when it is not."""
        if name not in self._indexed:
            return None
        return [self[key] for key in self._postings.get((name, _index_value(value)), ())]

    def _unpost(self, key: DynamoType) -> None:
        for entry in self._posted.pop(key, ()):
            keys = self._postings.get(entry)
            if keys is not None:
                keys.pop(key, None)
                if not keys:
                    del self._postings[entry]
                    self._entries.pop(entry, None)

    def __contains__(self, key: object) -> bool:
        return key in self._packed

    def __iter__(self) -> Iterator[DynamoType]:
        return iter(list(self._packed))

    def __len__(self) -> int:
        return len(self._packed)

    def packed_bytes(self) -> int:
        return sum(len(packed) for packed in self._packed.values())

    def _unpack(self, key: DynamoType, packed: bytes) -> Item:
        item = object.__new__(Item)  # what moto's BaseModel.__new__ makes, untracked
        item.hash_key, item.range_key = (key, None) if self._hash_key is None else (self._hash_key, key)
        attributes = LimitedSizeDict.__new__(LimitedSizeDict)
        dict.__init__(attributes)
        for name, kind, value in marshal.loads(zlib.decompress(packed)):
            dict.__setitem__(attributes, name, _built(kind, value))
        item.attrs = attributes
        return item


class PackedPartitions(dict[DynamoType, PackedItems]):
    """A table with a range key: its partitions by hash key, each made on first use as moto's `defaultdict` does."""

    def __missing__(self, hash_key: DynamoType) -> PackedItems:
        partition = self[hash_key] = PackedItems(hash_key)
        return partition

    def packed_bytes(self) -> int:
        return sum(partition.packed_bytes() for partition in self.values())


def _index_value(value: DynamoType) -> tuple[str, Any]:
    """A key attribute's value as moto compares it (numbers by value: 1 and 1.0 are one key)."""
    try:
        return value.type, value.cast_value
    except (TypeError, ValueError, ArithmeticError):
        return value.type, repr(value.value)


def _plain(value: DynamoType) -> tuple[str, Any]:
    """A value as (type, what marshal stores): a list's and a map's members as such pairs, the rest as moto holds it."""
    inner = value.value
    if type(inner) is list:
        inner = [_plain(member) if type(member) is DynamoType else member for member in inner]
    elif type(inner) is dict:
        inner = {name: _plain(member) if type(member) is DynamoType else member for name, member in inner.items()}
    return value.type, inner


def _built(kind: str, inner: Any) -> DynamoType:
    value = DynamoType.__new__(DynamoType)
    if kind == DDBType.LIST:
        inner = [_built(*member) if type(member) is tuple else member for member in inner]
    elif kind == DDBType.MAP:
        inner = {name: _built(*member) if type(member) is tuple else member for name, member in inner.items()}
    value.type, value.value = kind, inner
    return value


def install_packed_items() -> None:
    """Tables created from now on keep their items packed (process-wide, idempotent)."""
    Table.__init__ = _packed_table_init  # type: ignore[method-assign]
    DynamoDBBackend.update_item = _update_and_store  # type: ignore[method-assign]
    PATCHES["scans_build_what_they_read"].install()


def uninstall_packed_items() -> None:
    Table.__init__ = _ORIGINAL_TABLE_INIT  # type: ignore[method-assign]
    DynamoDBBackend.update_item = _ORIGINAL_UPDATE_ITEM  # type: ignore[method-assign]
    PATCHES["scans_build_what_they_read"].uninstall()


def _scan_evaluating_limit(self: Table, *args: Any, **kwargs: Any) -> Any:
    """moto's scan stops after `Limit` items, but first sorts every item of the table (`all_items`), which on a packed
    table builds each of them from its bytes: the retention sweep (500 items a minute, retention.py) built the whole
    table each time, 0.64 s for 16,000 items. On a packed table (no index, no segments) the keys are sorted instead, in
    moto's order, and only the `Limit` items after the start key are built and handed to moto's scan; the last of them
    is where the next page starts, as moto says it."""
    arguments = _SCAN_SIGNATURE.bind(self, *args, **kwargs).arguments
    limit = arguments.get("limit")
    if (
        not limit
        or arguments.get("index_name")
        or tuple(arguments.get("segments") or (None, None)) != (None, None)
        or not isinstance(self.items, PackedItems | PackedPartitions)
    ):
        return _ORIGINAL_SCAN(self, *args, **kwargs)
    # Sorted by the keys' values (moto compares DynamoTypes by `cast_value`), compared in C rather than through
    # DynamoType's own methods: a scan of 150,000 keys took 0.42 s and takes 0.33 s, the sweep holding the DynamoDB
    # lock meanwhile (docs/benchmarks.md).
    if isinstance(self.items, PackedPartitions):
        keys = sorted(
            ((hash_key, range_key) for hash_key, partition in self.items.items() for range_key in partition),
            key=_key_order,
        )
    else:
        keys = sorted(((hash_key, None) for hash_key in self.items), key=_key_order)
    position = 0
    start = arguments.get("exclusive_start_key")
    if start:
        after = DynamoType(start[self.hash_key_attr])
        ranged = self.range_key_attr is not None
        position = bisect.bisect_right(
            keys, _key_order((after, DynamoType(start[self.range_key_attr]) if ranged else None)), key=_key_order
        )
    window = keys[position : position + limit]
    candidates = [item for item in (self.get_item(h, r) for h, r in window) if item is not None]
    arguments.update(limit=None, exclusive_start_key=None)
    with _all_items_being(self, candidates):
        results, scanned, last = _ORIGINAL_SCAN(**arguments)
    if last is None and candidates and position + limit < len(keys):
        last = self._get_last_evaluated_key(candidates[-1], None)
    return results, scanned, last


def _key_order(key: tuple[DynamoType, DynamoType | None]) -> tuple[Any, Any]:
    hash_key, range_key = key
    return hash_key.cast_value, None if range_key is None else range_key.cast_value


def _packed_table_init(self: Table, *args: Any, **kwargs: Any) -> None:
    _ORIGINAL_TABLE_INIT(self, *args, **kwargs)
    if self.range_key_attr:
        self.items = PackedPartitions()  # type: ignore[assignment]
        return
    indexed = []
    for index in [*self.global_indexes, *self.indexes]:
        hash_keys = [key["AttributeName"] for key in index.schema if key["KeyType"] == "HASH"]
        if len(hash_keys) == 1 and hash_keys[0] not in indexed:
            indexed.append(hash_keys[0])
    self.items = PackedItems(indexed=tuple(indexed))  # type: ignore[assignment]


def _update_and_store(self: DynamoDBBackend, table_name: str, *args: Any, **kwargs: Any) -> Item:
    """moto's update_item changes the item `Table.get_item` gave it in place: a packed table gave a copy, which is
    stored again (an update that fails midway stores nothing, as on DynamoDB)."""
    item = _ORIGINAL_UPDATE_ITEM(self, table_name, *args, **kwargs)
    table = self.get_table(table_name)
    if isinstance(table.items, PackedPartitions):
        table.items[item.hash_key][item.range_key] = item
    elif isinstance(table.items, PackedItems):
        table.items[item.hash_key] = item
    return item


def _query_partition(self: Table, *args: Any, **kwargs: Any) -> Any:
    """moto's query filters `all_items()`, every item of the table, by hash key (sorting them all on a table with a
    range key): a stack that has stored many runs slowed down run after run. A query of a table's own key reads only
    its partition; a query of an index, the items that hold its hash key value (`_query_index`)."""
    arguments = _QUERY_SIGNATURE.bind(self, *args, **kwargs).arguments
    hash_key = arguments.get("hash_key")
    if arguments.get("index_name"):
        return _query_index(self, arguments, *args, **kwargs)
    if not self.range_key_attr or hash_key is None:
        return _ORIGINAL_QUERY(self, *args, **kwargs)
    # moto's query filters `all_items()` by hash key; for one call, that is this partition.
    with service_lock("dynamodb"):
        partition = self.items.get(hash_key)  # .get: `items` is a defaultdict
        with _all_items_being(self, list(partition.values()) if partition else []):
            return _ORIGINAL_QUERY(self, *args, **kwargs)


def _query_index(self: Table, arguments: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
    """moto's query of an index filters `all_items()`, every item of the table built from its bytes (a quarter of a
    second for 10,000 runs, under the DynamoDB lock); a packed table knows which items hold the index's hash key
    value, and only those are handed to moto's query, which filters, sorts and pages them as before."""
    conditions = arguments.get("hash_key_conditions") or []
    if not isinstance(self.items, PackedItems) or len(conditions) != 1:
        return _ORIGINAL_QUERY(self, *args, **kwargs)
    name, value = conditions[0]
    with service_lock("dynamodb"):
        candidates = self.items.indexed(name, value)
        if candidates is None:
            return _ORIGINAL_QUERY(self, *args, **kwargs)
        with _all_items_being(self, candidates):
            return _ORIGINAL_QUERY(self, *args, **kwargs)


@contextmanager
def _all_items_being(table: Table, candidates: list[Item]) -> Iterator[None]:
    """For one call of moto's query or scan, `table.all_items()` answers `candidates`. The DynamoDB lock (reentrant:
    a request holds it already when the locks are installed) keeps the instance attribute from any other thread."""
    with service_lock("dynamodb"):
        table.all_items = lambda: candidates  # type: ignore[method-assign]
        try:
            yield
        finally:
            del table.all_items


_backends_by_host: dict[str | None, Any] = {}


PATCHES = {
    "scans_build_what_they_read": SpeedPatch((Replacement(Table, "scan", _ORIGINAL_SCAN, _scan_evaluating_limit),)),
    "queries_read_their_items": SpeedPatch((Replacement(Table, "query", _ORIGINAL_QUERY, _query_partition),)),
}
