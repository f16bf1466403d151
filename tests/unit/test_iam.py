"""Least privilege from observed calls (tests/iam_record.py), function by function: every function's role, read
from the template as CloudFormation gets it, grants what tests/iam_observed.yaml records that function doing in the
e2e tier, and nothing else. Each call recorded for a function is granted to it; each grant of a function is used by
a call recorded for that function, or kept by hand for it in the record with the reason the e2e tier cannot use it.
No action is a wildcard, and a resource is "*" only for the actions that accept nothing else."""

from __future__ import annotations

from functools import cache

import pytest

from canvas_local.iam_calls import SESSION_ROLE, Call
from canvas_local.template import expand_for_each, load_yaml
from tests.iam_record import (
    BLOCK_FUNCTIONS,
    RECORD,
    RECORD_VARIABLE,
    TEMPLATE,
    IamRecord,
    covers,
    function_grants,
    role_grants,
    transformed,
    unconditioned,
)

pytestmark = pytest.mark.unit

# The functions, and the role blocks make their calls with (Scope Block vends its credentials: docs/isolation.md).
FUNCTIONS = sorted(
    [
        logical_id
        for logical_id, resource in expand_for_each(load_yaml(TEMPLATE))["Resources"].items()
        if resource["Type"] == "AWS::Serverless::Function"
    ]
    + [SESSION_ROLE]
)
RERECORD = f"`{RECORD_VARIABLE}=1 .venv/bin/pytest tests/e2e`"

# Actions whose only resource is "*" (task tokens name no resource; X-Ray takes none).
STAR_ONLY_ACTIONS = {"states:SendTaskSuccess", "states:SendTaskFailure"}
# Rights no function uses: deleting or re-permissioning data, reading whole tables.
NEVER = {
    "dynamodb:Scan",
    "dynamodb:DeleteTable",
    "s3:DeleteObject",
    "s3:PutObjectAcl",
    "s3:PutBucketAcl",
    "s3:PutLifecycleConfiguration",
    "s3:PutBucketPolicy",
}


@cache
def record() -> IamRecord:
    return IamRecord.read(RECORD)


def observed(function: str) -> set[Call]:
    return record().seen(frozenset({function}))


def granted(function: str) -> set[str]:
    return set(function_grants()[function])


def _grants_by_function() -> list[tuple[str, set[str]]]:
    return [(function, granted(function)) for function in function_grants()]


def test_the_record_names_the_template_functions():
    # Given the functions the e2e tier saw call AWS
    seen = {call.function for call in record().observed}

    # Then each is in the template, and every function the template has was seen, each block function included
    assert sorted(seen - set(FUNCTIONS)) == [], f"{RECORD.name} names functions that are gone: rerun {RERECORD}"
    assert set(FUNCTIONS) >= BLOCK_FUNCTIONS
    # (a block function's own role calls only the models, which the e2e tier's offline provider never does: its
    # calls are the session role's, which the blocks of every type make)
    assert SESSION_ROLE in seen
    unseen = sorted(set(FUNCTIONS) - seen - BLOCK_FUNCTIONS)
    assert unseen == [], f"no e2e test reaches these functions, or {RECORD.name} predates them ({RERECORD})"


@pytest.mark.parametrize("function", FUNCTIONS)
def test_a_function_is_granted_what_it_was_seen_to_do(function):
    # Given what the function's role grants, and what it was seen to do in the e2e tier
    grants = granted(function)

    # Then every call it made is granted
    ungranted = sorted(str(call) for call in observed(function) if not any(covers(g, call) for g in grants))
    assert not ungranted, f"grant in template.yaml what {RECORD.name} saw it do: {ungranted}"


@pytest.mark.parametrize("function", FUNCTIONS)
def test_a_function_is_granted_nothing_it_was_not_seen_to_use(function):
    # Given what the function's role grants
    grants = granted(function)

    # Then the function itself was seen to use each, or the record says why the e2e tier cannot see it use one
    unused = sorted(
        grant
        for grant in grants
        if not any(covers(grant, call) for call in observed(function)) and not record().kept_by_hand(function, grant)
    )
    assert not unused, f"remove from template.yaml what {RECORD.name} never saw used (or rerun {RERECORD}): {unused}"


def test_what_is_kept_by_hand_is_granted():
    # Then every grant kept by hand is one some function it names has (one that injected faults may also show used)
    for entry in record().unobserved:
        for grant in entry.grants:
            holders = [f for f in FUNCTIONS if entry.covers(f, grant) and grant in map(unconditioned, granted(f))]
            assert holders, f"{RECORD.name} keeps a grant no function has: {grant} ({entry.functions})"


def test_no_action_is_a_wildcard_and_star_resources_are_unavoidable():
    for function, grants in _grants_by_function():
        for grant in grants:
            action, _, rest = grant.partition(" ")
            if action == "managed":
                continue
            assert "*" not in action, f"{function}: {grant}"
            if rest.split(" ")[0] == "*":
                assert action in STAR_ONLY_ACTIONS, f"{function}: {grant} (a resource can be named)"


def test_no_function_may_delete_data_scan_tables_or_change_permissions():
    for function, grants in _grants_by_function():
        assert {g.split(" ")[0] for g in grants} & NEVER == set(), function


def test_account_writes_are_limited_to_named_attributes():
    # Then every write to the accounts table says which attributes it may change (the credits debit in the
    # functions that parse untrusted input included)
    writes = [
        (function, grant)
        for function, grants in _grants_by_function()
        for grant in grants
        if grant.startswith(("dynamodb:UpdateItem AccountsTable", "dynamodb:PutItem AccountsTable"))
    ]
    # (blocks, through their session role, and the create-run function write the accounts table: a rule that
    # matched no grant would pass)
    assert {"CreateRunFunction", SESSION_ROLE} <= {function for function, _ in writes}
    for function, grant in writes:
        assert grant.endswith("when dynamodb:Attributes"), f"{function}: {grant}"


def test_the_search_key_is_readable_only_by_the_blocks_that_search():
    readers = {f for f, grants in _grants_by_function() if any("SearchApiKeySecret" in g for g in grants)}

    assert readers == {"WebResearchBlockFunction", "DeepResearchBlockFunction"}


def test_the_state_machine_may_invoke_exactly_the_orchestration_and_block_functions():
    # Given what the state machine's role grants, and the functions of the template
    resources = transformed()["Resources"]
    granted = role_grants("RunCanvasStateMachineRole", resources)
    invokes = {g for g in granted if g.startswith("lambda:")}
    orchestration = ["PlanCanvasFunction", "WaitForInputsFunction", "ReleaseDependentsFunction"]
    orchestration += ["FinalizeRunFunction", "FailRunFunction", "BlockScopeFunction"]
    # The block functions' names, as FunctionName gives them (tests/unit/test_template_blocks.py matches each)
    blocks = "lambda:${AWS::Region}:${AWS::AccountId}:function:${AWS::StackName}_*BlockFunction"

    # Then it may invoke the block functions (by their names) and each orchestration function, and no other
    assert invokes == {f"lambda:InvokeFunction {blocks}"} | {f"lambda:InvokeFunction {f}*" for f in orchestration}
    # And beyond invoking, it only delivers its execution logs and traces
    assert granted - invokes == {
        "logs:CreateLogDelivery *", "logs:GetLogDelivery *", "logs:UpdateLogDelivery *", "logs:DeleteLogDelivery *",
        "logs:ListLogDeliveries *", "logs:PutResourcePolicy *", "logs:DescribeResourcePolicies *",
        "logs:DescribeLogGroups *", "managed AWSXrayWriteOnlyAccess",
    }  # fmt: skip
