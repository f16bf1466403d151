"""What a scan with a `Limit` and a query of an index cost on moto's own item storage and on packed items
(moto_patch.PackedItems): the retention sweep scans (retention.py: 500 items a minute, a filter that keeps the expired
ones), and `GET /v1/runs` queries the runs table's index by account. Not part of `make bench`:

    .venv/bin/python -m bench.packed_scan [--items 16000]

Prints `packed_scan_<storage>_s`, the seconds of one scan of the table's first 500 items, for moto's storage, packed
items with moto's scan (every item built to be sorted), and packed items with the scan that builds only what it reads;
then `packed_index_query_<storage>_s`, the seconds of one query of an account's newest 21 runs among `--items` runs
of 70 accounts, for moto's storage, packed items with moto's query (every item built to be filtered), and packed items
with the query that builds only the items holding the account (`_query_index`).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import boto3
from moto import mock_aws
from moto.dynamodb.models import dynamodb_backends

from canvas_local import moto_patch
from canvas_local.moto_patch import packed_items

STORAGES = ("moto", "packed_sorting_all", "packed")
INDEX_STORAGES = ("moto", "packed_building_all", "packed")
ACCOUNTS = 70


@contextmanager
def dynamodb_on(packed: bool, query_patched: bool = False) -> Iterator[Any]:
    """A DynamoDB client on moto in this process, its models untracked as in the embedded stack; its items packed or
    in moto's own storage, with or without moto_patch's query of a packed partition or index (`install_caches`)."""
    with mock_aws():
        moto_patch.install_untracked_models()
        if packed:
            moto_patch.install_packed_items()
        if query_patched:
            moto_patch.install_caches()
        try:
            yield boto3.client("dynamodb", region_name="us-east-1")
        finally:
            if query_patched:
                moto_patch.uninstall_caches()
            moto_patch.uninstall_packed_items()
            moto_patch.uninstall_untracked_models()


def scan_seconds(storage: str, items: int) -> float:
    with dynamodb_on(packed=storage != "moto") as dynamodb:
        if storage == "packed_sorting_all":
            from moto.dynamodb.models.table import Table

            Table.scan = packed_items._ORIGINAL_SCAN  # type: ignore[method-assign]
        dynamodb.create_table(
            TableName="t",
            BillingMode="PAY_PER_REQUEST",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
            AttributeDefinitions=[{"AttributeName": n, "AttributeType": "S"} for n in ("pk", "sk")],
        )
        backend = dynamodb_backends["123456789012"]["us-east-1"]
        for i in range(items):  # a canvas's nodes: 8 to a partition, about 0.7 kB each as JSON
            backend.put_item(
                "t",
                {
                    "pk": {"S": f"canvas-{i // 8:08d}"},
                    "sk": {"S": f"NODE#{i % 8}"},
                    "status": {"S": "completed"},
                    "content": {"S": "x" * 500},
                    "credits": {"N": "10"},
                    "expires_at": {"N": str(1_900_000_000 + i)},
                    "meta": {"M": {"model": {"S": "offline"}, "tokens": {"N": "170"}}},
                    "inputs": {"L": [{"S": "a"}, {"S": "b"}]},
                },
            )
        started = time.perf_counter()
        dynamodb.scan(
            TableName="t",
            Limit=500,
            FilterExpression="#t <= :now",
            ExpressionAttributeNames={"#t": "expires_at"},
            ExpressionAttributeValues={":now": {"N": "1800000000"}},
        )
        return time.perf_counter() - started


def index_query_seconds(storage: str, items: int) -> float:
    with dynamodb_on(packed=storage != "moto", query_patched=storage == "packed") as dynamodb:
        dynamodb.create_table(
            TableName="runs",
            BillingMode="PAY_PER_REQUEST",
            KeySchema=[{"AttributeName": "run_id", "KeyType": "HASH"}],
            AttributeDefinitions=[
                {"AttributeName": "run_id", "AttributeType": "S"},
                {"AttributeName": "account_id", "AttributeType": "S"},
                {"AttributeName": "created_at_ms", "AttributeType": "N"},
            ],
            GlobalSecondaryIndexes=[
                {
                    "IndexName": "by_account",
                    "KeySchema": [
                        {"AttributeName": "account_id", "KeyType": "HASH"},
                        {"AttributeName": "created_at_ms", "KeyType": "RANGE"},
                    ],
                    "Projection": {"ProjectionType": "ALL"},
                }
            ],
        )
        backend = dynamodb_backends["123456789012"]["us-east-1"]
        for i in range(items):  # a run: about 0.5 kB as JSON
            backend.put_item(
                "runs",
                {
                    "run_id": {"S": f"run-{i:08d}"},
                    "account_id": {"S": f"account-{i % ACCOUNTS:03d}"},
                    "created_at_ms": {"N": str(1_795_000_000_000 + i)},
                    "status": {"S": "completed"},
                    "prompt": {"S": "Summarise the regional revenue table by quarter. " * 6},
                    "credits_consumed": {"N": "20"},
                },
            )
        started = time.perf_counter()
        dynamodb.query(
            TableName="runs",
            IndexName="by_account",
            KeyConditionExpression="account_id = :a",
            ExpressionAttributeValues={":a": {"S": "account-007"}},
            ScanIndexForward=False,
            Limit=21,
        )
        return time.perf_counter() - started


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.packed_scan", description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=16_000)
    args = parser.parse_args(argv)
    for storage in STORAGES:
        print(f"packed_scan_{storage}_s {scan_seconds(storage, args.items):.3f} ({args.items} items, Limit 500)")
    for storage in INDEX_STORAGES:
        seconds = index_query_seconds(storage, args.items)
        print(f"packed_index_query_{storage}_s {seconds:.4f} ({args.items} runs of {ACCOUNTS} accounts, Limit 21)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
