"""Block isolation in the template (docs/isolation.md): a block function's own role holds no right to the service's
data, only Scope Block may vend BlockSessionRole's credentials, and that role can write no balance."""

from __future__ import annotations

import pytest

from canvas_local.iam_calls import SESSION_ROLE
from tests.iam_record import BLOCK_FUNCTIONS, function_grants, transformed

pytestmark = pytest.mark.unit

# The services whose calls reach tenants' data (or could vend a way to it).
DATA_ACTIONS = ("dynamodb:", "s3:", "states:", "sqs:", "events:", "sts:", "kms:", "lambda:", "iam:")
# What a block must never write: the account's balance and usage, and what was set aside for its run.
BALANCES = {"credits_balance", "credits_set_aside", "credits_used"}


def statements(role: str) -> list[dict]:
    properties = transformed()["Resources"][role]["Properties"]
    return [s for policy in properties.get("Policies", []) for s in policy["PolicyDocument"]["Statement"]]


def as_list(value) -> list:
    return value if isinstance(value, list) else [value]


@pytest.mark.parametrize("function", sorted(BLOCK_FUNCTIONS))
def test_a_block_functions_own_role_holds_no_right_to_the_services_data(function):
    data = sorted(g for g in function_grants()[function] if g.startswith(DATA_ACTIONS))

    assert data == [], f"{function} parses untrusted input: its data calls go through BlockSessionRole, not {data}"


def test_only_block_scope_may_vend_the_block_session_role():
    holders = {
        function
        for function, grants in function_grants().items()
        if any(g.split(" ")[0] == "sts:AssumeRole" for g in grants)
    }

    assert holders == {"BlockScopeFunction"}
    assert "sts:AssumeRole BlockSessionRole" in function_grants()["BlockScopeFunction"]
    # And the role trusts its own account only, which delegates to those policies
    trust = transformed()["Resources"][SESSION_ROLE]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert [s["Principal"] for s in trust] == [
        {"AWS": {"Fn::Sub": "arn:${AWS::Partition}:iam::${AWS::AccountId}:root"}}
    ]


def test_the_block_session_role_writes_runs_and_accounts_only_by_named_attributes_never_a_balance():
    writes = [
        s
        for s in statements(SESSION_ROLE)
        if any(a.startswith(("dynamodb:Put", "dynamodb:Update", "dynamodb:BatchWrite")) for a in as_list(s["Action"]))
        and any("RunsTable" in str(r) or "AccountsTable" in str(r) for r in as_list(s["Resource"]))
    ]
    # (the role spends reservations and holds slots: a rule that matched no statement would pass)
    assert len(writes) == 2
    for statement in writes:
        assert as_list(statement["Action"]) == ["dynamodb:UpdateItem"], statement["Sid"]
        attributes = statement["Condition"]["ForAllValues:StringEquals"]["dynamodb:Attributes"]
        assert not {a.rstrip("*_") for a in attributes} & BALANCES, statement["Sid"]
        assert not any("*" in a for a in attributes), statement["Sid"]


def test_the_block_session_role_grants_no_tenant_wide_read_beyond_its_tables_and_run_folders():
    resources = {str(r) for s in statements(SESSION_ROLE) for r in as_list(s["Resource"])}

    # No table but the four a block works on, no bucket listing, no index (a tenant-wide read by another key)
    assert not any(r.endswith(":table/*") or "/index/" in r for r in resources)
    assert not any(a == "s3:ListBucket" for s in statements(SESSION_ROLE) for a in as_list(s["Action"]))
    assert not any(
        a in ("dynamodb:Scan", "dynamodb:Query") for s in statements(SESSION_ROLE) for a in as_list(s["Action"])
    )
