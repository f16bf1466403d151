"""The fault injector of the embedded stack (canvas_local.faults): how a spec is read, what DynamoDB's refusals look
like to botocore, and what an index that lags behind its table shows."""

from __future__ import annotations

import json

import pytest
from botocore.parsers import create_parser
from botocore.session import get_session

from canvas_local import cli
from canvas_local.faults import FaultInjector, Faults, FaultSpecError, refusal

pytestmark = pytest.mark.unit

KEYS = {"Runs": ("run_id",), "Nodes": ("canvas_id", "item_id")}


def injector(**rates) -> FaultInjector:
    return FaultInjector(Faults(**rates), lambda table: KEYS[table], seed=7)


def moto_answer(items: list[dict] | None = None):
    body = json.dumps({"Items": items or [], "Count": len(items or [])}).encode()
    return lambda: (200, {}, body)


def parsed(operation: str, answer) -> dict:
    """The answer as botocore's DynamoDB client parses it (the error it would raise)."""
    status, headers, content = answer
    client = get_session().create_client(
        "dynamodb", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    model = client.meta.service_model.operation_model(operation)
    response = {"status_code": status, "headers": dict(headers), "body": content}
    shape = model.output_shape
    result = create_parser("json").parse(response, shape)
    if status >= 300:
        code = result["Error"]["Code"]
        error_shape = client.meta.service_model.shape_for_error_code(code)
        if error_shape is not None:
            result.update(create_parser("json").parse(response, error_shape))
    return result


def test_a_spec_is_read_and_bad_ones_are_refused_with_what_is_wrong():
    assert Faults.parse("transaction_conflict=0.2, throttle=0.05,gsi_lag_ms=500,lambda_error=0.02") == Faults(
        transaction_conflict=0.2, throttle=0.05, gsi_lag_ms=500, lambda_error=0.02
    )
    assert not Faults.parse("")
    for spec, says in [
        ("conflict=0.2", "Unknown fault 'conflict'"),
        ("throttle", "Unknown fault 'throttle'"),
        ("throttle=lots", "not a number"),
        ("throttle=1.5", "between 0 and 1"),
        ("gsi_lag_ms=-3", "must not be negative"),
    ]:
        with pytest.raises(FaultSpecError, match=says):
            Faults.parse(spec)


def test_canvas_serve_refuses_a_bad_spec_before_starting(capsys, monkeypatch):
    # Given a bad spec in the environment
    monkeypatch.setenv("CANVAS_INJECT_FAULTS", "throttle=often")
    # When
    code = cli.main(["serve", "--port", "0"])
    # Then
    assert code == 2
    assert "CANVAS_INJECT_FAULTS" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["serve", "--inject-faults", "nope=1"])


def test_a_conflicted_transaction_is_cancelled_as_dynamodb_cancels_it():
    # Given a transaction of three items
    request = {"TransactItems": [{"Update": {"TableName": "Runs"}}] * 3}
    # When DynamoDB cancels it for a conflict on its second item
    answer = parsed("TransactWriteItems", refusal("TransactionConflict", request, seed=0.5))
    # Then botocore sees DynamoDB's error, with a reason per item
    assert answer["Error"]["Code"] == "TransactionCanceledException"
    assert [r["Code"] for r in answer["CancellationReasons"]] == ["None", "TransactionConflict", "None"]
    assert answer["Error"]["Message"] == (
        "Transaction cancelled, please refer cancellation reasons for specific reasons"
        " [None, TransactionConflict, None]"
    )


def test_a_conditional_write_meets_a_transaction_and_a_read_is_throttled():
    conflict = parsed("UpdateItem", refusal("TransactionConflict", {"TableName": "Runs", "ConditionExpression": "x"}))
    throttled = parsed("GetItem", refusal("ProvisionedThroughputExceededException", {"TableName": "Runs"}))
    assert conflict["Error"]["Code"] == "TransactionConflictException"
    assert throttled["Error"]["Code"] == "ProvisionedThroughputExceededException"
    assert "provisioned throughput" in throttled["Error"]["Message"]


def test_rates_of_one_and_zero_fault_every_call_and_none():
    always, never = injector(throttle=1.0, transaction_conflict=1.0), injector()
    request = json.dumps({"TableName": "Runs", "Key": {"run_id": {"S": "r"}}}).encode()
    assert always.dynamodb("GetItem", request, moto_answer())[0] == 400
    assert never.dynamodb("GetItem", request, moto_answer())[0] == 200
    assert always.injected["throttle"] == 1 and not never.injected
    assert always.lambda_fault("F") is False and injector(lambda_error=1.0).lambda_fault("F") is True


def test_an_index_does_not_show_an_item_written_within_its_lag(monkeypatch):
    # Given an index lagging 500 ms and an item just written to its table
    lagging = injector(gsi_lag_ms=500)
    clock = [100.0]
    monkeypatch.setattr("canvas_local.faults.time.monotonic", lambda: clock[0])
    item = {"run_id": {"S": "new"}, "account_id": {"S": "a"}}
    put = json.dumps({"TableName": "Runs", "Item": item}).encode()
    lagging.dynamodb("PutItem", put, lambda: (200, {}, b"{}"))
    query = json.dumps({"TableName": "Runs", "IndexName": "by-account"}).encode()
    older = {"run_id": {"S": "old"}, "account_id": {"S": "a"}}
    # When the index is queried at once, and after the lag
    at_once = json.loads(lagging.dynamodb("Query", query, moto_answer([older, item]))[2])
    clock[0] += 0.6
    later = json.loads(lagging.dynamodb("Query", query, moto_answer([older, item]))[2])
    # Then the new item shows only once the lag has passed; the table itself is not affected
    assert [i["run_id"]["S"] for i in at_once["Items"]] == ["old"] and at_once["Count"] == 1
    assert [i["run_id"]["S"] for i in later["Items"]] == ["old", "new"]


def test_a_refusal_is_answered_in_place_of_moto(monkeypatch):
    # Given every write refused, moto's answer is never asked for (nothing is written)
    always = injector(transaction_conflict=1.0)
    asked: list[bool] = []

    def answer():
        asked.append(True)
        return 200, {}, b"{}"

    request = json.dumps({"TransactItems": [{"Put": {"TableName": "Runs", "Item": {}}}]}).encode()
    status, _, _ = always.dynamodb("TransactWriteItems", request, answer)
    assert status == 400 and not asked


def test_a_conditional_write_conflicts_only_where_transactions_write():
    # Given every conflict injected, and a table no transaction has written (e.g. idempotency records)
    always = injector(transaction_conflict=1.0)
    put = json.dumps({"TableName": "Nodes", "Item": {}, "ConditionExpression": "attribute_not_exists(id)"}).encode()
    assert always.dynamodb("PutItem", put, lambda: (200, {}, b"{}"))[0] == 200
    # When a transaction has written the table, a conditional write to it may meet one in flight
    transaction = json.dumps({"TransactItems": [{"Update": {"TableName": "Nodes", "Key": {}}}]}).encode()
    assert always.dynamodb("TransactWriteItems", transaction, lambda: (200, {}, b"{}"))[0] == 400
    assert always.dynamodb("PutItem", put, lambda: (200, {}, b"{}"))[0] == 400
