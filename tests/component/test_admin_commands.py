"""The operator commands against a deployment's tables (moto here): an account with a starting grant, credits
granted, keys created for an account, listed and revoked by id."""

from __future__ import annotations

import boto3
import pytest

from canvas_core.adapters.store import Store
from canvas_core.auth import authenticate
from canvas_core.errors import InvalidApiKeyError
from canvas_local.cli import main

pytestmark = pytest.mark.component


def printed(capsys) -> dict[str, str]:
    lines = capsys.readouterr().out.splitlines()
    return {k: v.split()[0] for k, _, v in (line.partition(": ") for line in lines) if v}


def test_an_account_is_created_granted_credits_and_given_keys(aws, capsys):
    # Given an account created with 300 credits
    assert main(["create-account", "--credits", "300"]) == 0
    created = printed(capsys)
    account_id, first_key = created["account_id"], created["api_key"]
    assert authenticate({"X-API-KEY": first_key}) == account_id

    # When it is granted 700 credits and given a second key
    assert main(["grant-credits", account_id, "700"]) == 0
    assert printed(capsys)["credits_balance"] == "1000"
    assert main(["create-key", "--account", account_id]) == 0
    second = printed(capsys)

    # Then the balance holds both amounts, and the second key opens the same account
    assert Store().get_account(account_id)["credits_balance"] == 1000
    assert authenticate({"X-API-KEY": second["api_key"]}) == account_id

    # And list-keys shows both, by prefix and last four only
    assert main(["list-keys", "--account", account_id]) == 0
    listing = capsys.readouterr().out
    assert second["key_id"] in listing and second["api_key"] not in listing and first_key not in listing

    # When the second is revoked by id, it stops working; the first goes on
    assert main(["revoke-key", "--account", account_id, "--key-id", second["key_id"]]) == 0
    with pytest.raises(InvalidApiKeyError):
        authenticate({"X-API-KEY": second["api_key"]})
    assert authenticate({"X-API-KEY": first_key}) == account_id


def test_unknown_accounts_and_keys_are_one_line_errors(aws, capsys):
    assert main(["grant-credits", "no-such-account", "10"]) == 1
    assert "no such account" in capsys.readouterr().err
    assert main(["create-key", "--account", "no-such-account"]) == 1
    assert "no such account" in capsys.readouterr().err
    assert main(["create-account"]) == 0
    account_id = printed(capsys)["account_id"]
    assert main(["revoke-key", "--account", account_id, "--key-id", "6f1d2c3b-4a59-4e8f-9b1a-2c3d4e5f6a7b"]) == 1
    assert "API key not found" in capsys.readouterr().err
    assert main(["revoke-key", "--key-id", "6f1d2c3b-4a59-4e8f-9b1a-2c3d4e5f6a7b"]) == 2


def test_credits_must_be_positive(aws, capsys):
    with pytest.raises(SystemExit) as exited:
        main(["grant-credits", "a", "0"])
    assert exited.value.code == 2


STACK_TEMPLATE = """{
  "Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
  "Outputs": {%s}
}"""


def test_stack_name_reads_the_table_names_from_the_stacks_outputs(aws, capsys, monkeypatch):
    # Given a deployed stack whose outputs name the tables (the environment's names are restored afterwards)
    for name in ("ACCOUNTS_TABLE_NAME", "API_KEYS_TABLE_NAME", "PORTAL_SESSIONS_TABLE_NAME"):
        monkeypatch.setenv(name, "not-a-table")
    outputs = '"AccountsTableName": {"Value": "AccountsTable"}, "ApiKeysTableName": {"Value": "ApiKeysTable"}'
    cloudformation = boto3.client("cloudformation", region_name="us-east-1")
    cloudformation.create_stack(StackName="canvas", TemplateBody=STACK_TEMPLATE % outputs)

    # When an account is created by stack name
    assert main(["create-account", "--stack-name", "canvas"]) == 0

    # Then it is in the stack's tables
    created = printed(capsys)
    assert authenticate({"X-API-KEY": created["api_key"]}) == created["account_id"]


def test_a_stack_without_the_outputs_or_not_there_is_one_line(aws, capsys, monkeypatch):
    for name in ("ACCOUNTS_TABLE_NAME", "API_KEYS_TABLE_NAME"):
        monkeypatch.setenv(name, "AccountsTable" if name.startswith("ACCOUNTS") else "ApiKeysTable")
    cloudformation = boto3.client("cloudformation", region_name="us-east-1")
    cloudformation.create_stack(StackName="bare", TemplateBody=STACK_TEMPLATE % "")

    assert main(["create-account", "--stack-name", "bare"]) == 1
    assert "has no output AccountsTableName, ApiKeysTableName" in capsys.readouterr().err
    assert main(["create-account", "--stack-name", "missing"]) == 1
    assert "cannot read stack missing" in capsys.readouterr().err
