"""Least privilege, read from the template as CloudFormation gets it: Fn::ForEach expanded (canvas_local.template,
as AWS::LanguageExtensions does) and then transformed by the SAM translator, offline.

Every function's role grants exactly what tests/unit/iam_grants.yaml lists for it, which is what its code path
calls (read the code, not the template, when a function changes); no action is a wildcard, and a resource is
"*" only for the actions that accept nothing else."""

from __future__ import annotations

import copy
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from canvas_local.template import expand_for_each, load_yaml

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


def _flatten(items: list[Any]) -> list[str]:
    return [grant for item in items for grant in (_flatten(item) if isinstance(item, list) else [item])]


GRANTS = yaml.safe_load((Path(__file__).parent / "iam_grants.yaml").read_text("utf-8"))
# Every block function has the grants of `block_functions` unless iam_grants.yaml lists it with its own.
EXPECTED = {
    f"{name}BlockFunction": _flatten(GRANTS["block_functions"])
    for name in load_yaml(ROOT / "template.yaml")["Mappings"]["BlockFunctions"]
} | {function: _flatten(grants) for function, grants in GRANTS["functions"].items()}

# Actions whose only resource is "*" (task tokens name no resource; X-Ray takes none).
STAR_ONLY_ACTIONS = {"states:SendTaskSuccess"}
# The AWS managed policies SAM attaches: logs, X-Ray traces, and polling the queue of an SQS event source.
AWS_MANAGED = {"AWSLambdaBasicExecutionRole", "AWSXrayWriteOnlyAccess", "AWSLambdaSQSQueueExecutionRole"}
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


class _ManagedPolicies:
    """The SAM translator asks for the ARNs of the AWS managed policies its policy templates name."""

    def load(self) -> dict[str, str]:
        return {}


@cache
def transformed() -> dict[str, Any]:
    import boto3
    from samtranslator.model.exceptions import InvalidDocumentException
    from samtranslator.parser.parser import Parser
    from samtranslator.translator.translator import Translator

    document = copy.deepcopy(expand_for_each(load_yaml(ROOT / "template.yaml")))
    document["Transform"] = "AWS::Serverless-2016-10-31"
    # What `sam package` does to local code: an S3 location (the translator accepts nothing else).
    for resource in document["Resources"].values():
        properties = resource.get("Properties") or {}
        for key in ("CodeUri", "ContentUri", "DefinitionUri"):
            if key in properties:
                properties[key] = "s3://bucket/key"
    try:
        translator = Translator(None, Parser(), boto_session=boto3.session.Session(region_name="us-east-1"))
        return translator.translate(document, parameter_values={}, get_managed_policy_map=_ManagedPolicies().load)
    except InvalidDocumentException as error:
        raise AssertionError("; ".join(str(cause) for cause in error.causes)) from error


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def resource_name(value: Any) -> str:
    """A readable name for a policy resource: a logical id, a logical id with an S3 key pattern, or "*"."""
    if isinstance(value, str):
        return value
    if "Ref" in value:
        return value["Ref"]
    if "Fn::GetAtt" in value:
        logical_id, attribute = value["Fn::GetAtt"]
        return logical_id if attribute == "Arn" else f"{logical_id}.{attribute}"
    if "Fn::Sub" in value:
        if isinstance(value["Fn::Sub"], list) and "functionName" in value["Fn::Sub"][1]:
            # SAM's LambdaInvokePolicy: the function and its versions and aliases
            return f"{resource_name(value['Fn::Sub'][1]['functionName'])}*"
        text = value["Fn::Sub"] if isinstance(value["Fn::Sub"], str) else value["Fn::Sub"][0]
        text = text.replace("arn:${AWS::Partition}:", "")
        return re.sub(r"\$\{([A-Za-z0-9]+)(?:\.Arn)?\}", r"\1", text)
    if "Fn::If" in value:
        _, when_true, when_false = value["Fn::If"]
        return f"{resource_name(when_true)}|{resource_name(when_false)}"
    raise AssertionError(f"unexpected policy resource {value!r}")


def statement_grants(statement: dict[str, Any]) -> set[str]:
    assert statement.get("Effect") == "Allow", statement
    assert "NotAction" not in statement and "NotResource" not in statement, statement
    condition = statement.get("Condition") or {}
    keys = sorted({key for test in condition.values() for key in test})
    suffix = f" when {','.join(keys)}" if keys else ""
    return {
        f"{action} {resource_name(resource)}{suffix}"
        for action in _as_list(statement["Action"])
        for resource in _as_list(statement["Resource"])
    }


def document_grants(document: dict[str, Any]) -> set[str]:
    return {grant for statement in _as_list(document["Statement"]) for grant in statement_grants(statement)}


def managed_policy_grants(reference: Any, resources: dict[str, Any]) -> set[str]:
    if isinstance(reference, dict) and "Fn::If" in reference:
        _, when_true, when_false = reference["Fn::If"]
        return {
            grant
            for branch in (when_true, when_false)
            if branch != {"Ref": "AWS::NoValue"}
            for grant in managed_policy_grants(branch, resources)
        }
    if isinstance(reference, dict) and "Ref" in reference:
        policy = resources[reference["Ref"]]
        assert policy["Type"] == "AWS::IAM::ManagedPolicy", reference
        return document_grants(policy["Properties"]["PolicyDocument"])
    arn = reference["Fn::Sub"] if isinstance(reference, dict) else reference
    name = str(arn).rsplit("/", 1)[-1]
    assert name in AWS_MANAGED, f"unexpected AWS managed policy {arn}"
    return {f"managed {name}"}


def role_grants(role_id: str, resources: dict[str, Any]) -> set[str]:
    properties = resources[role_id]["Properties"]
    grants = {g for ref in properties.get("ManagedPolicyArns", []) for g in managed_policy_grants(ref, resources)}
    for policy in properties.get("Policies", []):
        if isinstance(policy, dict) and "Fn::If" in policy:
            policies = [p for p in policy["Fn::If"][1:] if p != {"Ref": "AWS::NoValue"}]
        else:
            policies = [policy]
        grants |= {g for p in policies for g in document_grants(p["PolicyDocument"])}
    # Policies of their own that name the role (AWS::IAM::Policy, AWS::IAM::RolePolicy).
    for resource in resources.values():
        properties = resource.get("Properties") or {}
        if (resource["Type"] == "AWS::IAM::Policy" and {"Ref": role_id} in properties["Roles"]) or (
            resource["Type"] == "AWS::IAM::RolePolicy" and properties["RoleName"] == {"Ref": role_id}
        ):
            grants |= document_grants(properties["PolicyDocument"])
    return grants


@cache
def function_grants() -> dict[str, set[str]]:
    resources = transformed()["Resources"]
    grants = {}
    for logical_id, resource in resources.items():
        if resource["Type"] != "AWS::Lambda::Function":
            continue
        role = resource["Properties"]["Role"]
        assert "Fn::GetAtt" in role, f"{logical_id} uses a role from outside the stack"
        grants[logical_id] = role_grants(role["Fn::GetAtt"][0], resources)
    return grants


def test_every_function_has_its_grants_listed():
    # Then a function added to the template comes with the grants its code needs, in iam_grants.yaml
    missing = sorted(set(function_grants()) - set(EXPECTED))
    assert not missing, f"add these functions to tests/unit/iam_grants.yaml: {missing}"
    assert sorted(set(EXPECTED) - set(function_grants())) == [], "iam_grants.yaml lists functions that are gone"


@pytest.mark.parametrize("function", sorted(EXPECTED))
def test_a_function_is_granted_exactly_what_its_code_uses(function):
    if function not in function_grants():
        pytest.skip(f"{function} is not in the template")
    # Given what the function's role grants, and what its code path calls
    granted, expected = function_grants()[function], set(EXPECTED[function])

    # Then nothing is missing, and nothing is granted that the code does not use
    assert sorted(expected - granted) == [], "missing grants"
    assert sorted(granted - expected) == [], "grants the code does not use"


def test_no_action_is_a_wildcard_and_star_resources_are_unavoidable():
    for function, grants in function_grants().items():
        for grant in grants:
            action, _, rest = grant.partition(" ")
            if action == "managed":
                continue
            assert "*" not in action, f"{function}: {grant}"
            if rest.split(" ")[0] == "*":
                assert action in STAR_ONLY_ACTIONS, f"{function}: {grant} (a resource can be named)"


def test_no_function_may_delete_data_scan_tables_or_change_permissions():
    for function, grants in function_grants().items():
        assert {g.split(" ")[0] for g in grants} & NEVER == set(), function


def test_account_writes_are_limited_to_named_attributes():
    # Then every write to the accounts table says which attributes it may change (the credits debit in the
    # functions that parse untrusted input included)
    for function, grants in function_grants().items():
        for grant in grants:
            if grant.startswith(("dynamodb:UpdateItem AccountsTable", "dynamodb:PutItem AccountsTable")):
                assert grant.endswith("when dynamodb:Attributes"), f"{function}: {grant}"


def test_the_search_key_is_readable_only_by_the_blocks_that_search():
    readers = {f for f, grants in function_grants().items() if any("SearchApiKeySecret" in g for g in grants)}

    assert readers == {"WebResearchBlockFunction", "DeepResearchBlockFunction"}


def test_the_state_machine_may_invoke_exactly_the_orchestration_and_block_functions():
    # Given what the state machine's role grants, and the functions of the template
    resources = transformed()["Resources"]
    granted = role_grants("RunCanvasStateMachineRole", resources)
    invokes = {g for g in granted if g.startswith("lambda:")}
    blocks = {f for f in function_grants() if f.endswith("BlockFunction")}
    orchestration = ["PlanCanvasFunction", "WaitForInputsFunction", "ReleaseDependentsFunction"]
    orchestration += ["FinalizeRunFunction", "FailRunFunction"]

    # Then it may invoke each block function (exactly its ARN) and each orchestration function, and no other
    assert invokes == {f"lambda:InvokeFunction {f}" for f in blocks} | {
        f"lambda:InvokeFunction {f}*" for f in orchestration
    }
    # And beyond invoking, it only delivers its execution logs and traces
    assert granted - invokes == {
        "logs:CreateLogDelivery *", "logs:GetLogDelivery *", "logs:UpdateLogDelivery *", "logs:DeleteLogDelivery *",
        "logs:ListLogDeliveries *", "logs:PutResourcePolicy *", "logs:DescribeResourcePolicies *",
        "logs:DescribeLogGroups *", "managed AWSXrayWriteOnlyAccess",
    }  # fmt: skip
