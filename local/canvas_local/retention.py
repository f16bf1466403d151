"""Local retention: what DynamoDB's TTL and the bucket's lifecycle rules remove on AWS, removed from the embedded
stack by a periodic sweep. Items whose TTL attribute (`expires_at`, `expiration`) is a time now past are deleted, as
DynamoDB's TTL deletes them; objects older than their lifecycle rule's `ExpirationInDays` (by prefix: uploads,
artifacts, spilled content, webhook bodies) are deleted, as S3 expires them (without its rounding to the next midnight
UTC). Each sweep examines at most `page` items of each table and objects of each rule, resuming where the last one
stopped, so a sweep takes a bounded time whatever the stack holds."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from canvas_local.template import Template, bucket_name

LOG = logging.getLogger(__name__)

SWEEP_SECONDS = 60.0
PAGE = 500


@dataclass
class _Cursor:
    """Where the next sweep of one table or one rule's prefix resumes (None: from the start)."""

    position: Any = None


@dataclass(frozen=True)
class ExpirationRule:
    bucket: str
    prefix: str
    days: float


@dataclass
class Swept:
    items: int = 0
    objects: int = 0
    by_table: dict[str, int] = field(default_factory=dict)


def expiration_rules(template: Template) -> list[ExpirationRule]:
    """The enabled lifecycle rules with an `ExpirationInDays` of every bucket of the template, parameters resolved."""
    rules = []
    for logical_id in template.of_type("AWS::S3::Bucket"):
        configuration = template.resolve(template.properties(logical_id)).get("LifecycleConfiguration") or {}
        for rule in configuration.get("Rules") or []:
            days = rule.get("ExpirationInDays")
            if rule.get("Status") != "Enabled" or days is None:
                continue
            prefix = rule.get("Prefix", (rule.get("Filter") or {}).get("Prefix", ""))
            rules.append(ExpirationRule(bucket_name(logical_id), str(prefix or ""), float(days)))
    return rules


class RetentionSweeper:
    """`sweep()` removes what has expired by `clock()` (epoch seconds); `start()` sweeps every `interval` seconds."""

    def __init__(
        self,
        client: Callable[[str], Any],
        ttl_tables: dict[str, str],
        rules: list[ExpirationRule],
        *,
        clock: Callable[[], float] = time.time,
        interval: float = SWEEP_SECONDS,
        page: int = PAGE,
    ):
        self._dynamodb = client("dynamodb")
        self._s3 = client("s3")
        self.ttl_tables = dict(ttl_tables)  # table name -> its TTL attribute
        self.rules = list(rules)
        self.clock = clock
        self.interval = interval
        self.page = page
        self._keys: dict[str, list[str]] = {}
        self._cursors: dict[Any, _Cursor] = {}
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="retention-sweep", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None

    def _run(self) -> None:
        while not self._stopping.wait(self.interval):
            try:
                swept = self.sweep()
            except Exception:  # the next sweep tries again
                LOG.exception("The retention sweep failed")
                continue
            if swept.items or swept.objects:
                LOG.info("Retention: %d expired items and %d expired objects removed", swept.items, swept.objects)

    def sweep(self) -> Swept:
        """One bounded pass: up to `page` items of each table and objects of each rule examined."""
        now = self.clock()
        swept = Swept()
        for table, attribute in self.ttl_tables.items():
            removed = self._sweep_table(table, attribute, now)
            swept.items += removed
            swept.by_table[table] = removed
        for rule in self.rules:
            swept.objects += self._sweep_rule(rule, now)
        return swept

    def _sweep_table(self, table: str, attribute: str, now: float) -> int:
        cursor = self._cursors.setdefault(("table", table), _Cursor())
        keys = self._key_attributes(table)
        page = self._dynamodb.scan(
            TableName=table,
            Limit=self.page,
            FilterExpression="#ttl <= :now",
            ExpressionAttributeNames={"#ttl": attribute},
            ExpressionAttributeValues={":now": {"N": str(int(now))}},
            **({"ExclusiveStartKey": cursor.position} if cursor.position else {}),
        )
        cursor.position = page.get("LastEvaluatedKey")
        removed = 0
        for item in page.get("Items", []):
            if "N" not in item.get(attribute, {}):  # DynamoDB's TTL ignores a value that is not a number
                continue
            # Only if it is still expired: a write since the scan may have given it a new time.
            try:
                self._dynamodb.delete_item(
                    TableName=table,
                    Key={name: item[name] for name in keys},
                    ConditionExpression="#ttl <= :now",
                    ExpressionAttributeNames={"#ttl": attribute},
                    ExpressionAttributeValues={":now": {"N": str(int(now))}},
                )
            except self._dynamodb.exceptions.ConditionalCheckFailedException:
                continue
            removed += 1
        return removed

    def _key_attributes(self, table: str) -> list[str]:
        if table not in self._keys:
            schema = self._dynamodb.describe_table(TableName=table)["Table"]["KeySchema"]
            self._keys[table] = [key["AttributeName"] for key in schema]
        return self._keys[table]

    def _sweep_rule(self, rule: ExpirationRule, now: float) -> int:
        cursor = self._cursors.setdefault(("rule", rule), _Cursor())
        page = self._s3.list_objects_v2(
            Bucket=rule.bucket,
            Prefix=rule.prefix,
            MaxKeys=self.page,
            **({"ContinuationToken": cursor.position} if cursor.position else {}),
        )
        cursor.position = page.get("NextContinuationToken")
        cutoff = now - rule.days * 86_400
        expired = [
            {"Key": entry["Key"]} for entry in page.get("Contents", []) if _epoch(entry["LastModified"]) <= cutoff
        ]
        if expired:
            self._s3.delete_objects(Bucket=rule.bucket, Delete={"Objects": expired, "Quiet": True})
        return len(expired)


def _epoch(moment: datetime) -> float:
    return moment.timestamp()
