"""Least privilege from observed calls: tests/iam_observed.yaml, what each function of template.yaml was seen to do on
AWS in the e2e tier (and the few grants it cannot be seen to use, kept by hand), and the template's roles as
CloudFormation gets them (Fn::ForEach expanded as AWS::LanguageExtensions does, then the SAM translator, offline).

The e2e tier writes the record (CANVAS_RECORD_IAM=1) and fails on a call it does not list for the function that made
it; tests/unit/test_iam.py holds each function's role to it both ways, function by function: a grant is used when
that function was seen to use it, or the record keeps it by hand for that function with the reason the e2e tier
cannot show it."""

from __future__ import annotations

import copy
import fnmatch
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from canvas_local.iam_calls import SESSION_ROLE, Call
from canvas_local.template import expand_for_each, load_yaml

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "template.yaml"
RECORD = ROOT / "tests" / "iam_observed.yaml"
RECORD_VARIABLE = "CANVAS_RECORD_IAM"
BLOCK_FUNCTIONS = frozenset(f"{name}BlockFunction" for name in load_yaml(TEMPLATE)["Mappings"]["BlockFunctions"])
# The AWS managed policies SAM attaches: logs, X-Ray traces, and polling the queue of an SQS event source.
AWS_MANAGED = {"AWSLambdaBasicExecutionRole", "AWSXrayWriteOnlyAccess", "AWSLambdaSQSQueueExecutionRole"}

HEADER = f"""\
# Generated: every AWS action each function of template.yaml took in the e2e tier, as IAM authorizes it, one
# "<function> <action> <resource>" a line (the resource a logical id; a table's index; the bucket with the key's
# first folder; "*" for task tokens). Regenerate it with the whole tier, which must pass (it records without
# injected faults):
#
#     {RECORD_VARIABLE}=1 .venv/bin/pytest tests/e2e
#
# The e2e tier fails when a function makes a call this file does not list for it; tests/unit/test_iam.py fails
# when a function's role lacks a call listed for it or grants what it was not seen to use (canvas_local/iam_calls.py
# records, tests/iam_record.py reads).
"""
HAND_KEPT_MARK = "# Kept by hand"


# ---------------------------------------------------------------- the record


@dataclass(frozen=True)
class Unobserved:
    """Grants the e2e tier cannot exercise, kept by hand with the reason; `functions` are fnmatch patterns."""

    functions: tuple[str, ...]
    grants: tuple[str, ...]
    why: str

    def covers(self, function: str, grant: str) -> bool:
        return unconditioned(grant) in self.grants and any(fnmatch.fnmatchcase(function, p) for p in self.functions)


@dataclass(frozen=True)
class IamRecord:
    observed: frozenset[Call]
    unobserved: tuple[Unobserved, ...]
    hand_kept_text: str

    @classmethod
    def read(cls, path: Path = RECORD) -> IamRecord:
        text = path.read_text("utf-8")
        document = yaml.safe_load(text) or {}
        _, mark, rest = text.partition(HAND_KEPT_MARK)
        return cls(
            observed=frozenset(Call.parse(line) for line in document.get("observed") or []),
            unobserved=tuple(
                Unobserved(tuple(entry["functions"]), tuple(entry["grants"]), entry["why"])
                for entry in document.get("unobserved") or []
            ),
            hand_kept_text=mark + rest,
        )

    def with_observed(self, calls: set[Call]) -> str:
        """The file's text with `calls` as what was observed, the part kept by hand as it is."""
        lines = "".join(f"  - {call}\n" for call in sorted(calls))
        return f"{HEADER}\nobserved:\n{lines}\n{self.hand_kept_text}"

    def seen(self, functions: frozenset[str]) -> set[Call]:
        return {call for call in self.observed if call.function in functions}

    def kept_by_hand(self, function: str, grant: str) -> bool:
        return any(entry.covers(function, grant) for entry in self.unobserved)

    def lists(self, call: Call) -> bool:
        """Whether the record has this call for its function: seen made by it, or kept by hand for it."""
        return call in self.observed or self.kept_by_hand(call.function, f"{call.action} {call.resource}")


def covers(grant: str, call: Call) -> bool:
    """Whether a grant ("<action> <resource>[ when <condition keys>]") allows the call; a condition is taken to
    hold (test_iam.py keeps the ones that must be there)."""
    action, _, resource = unconditioned(grant).partition(" ")
    return action == call.action and fnmatch.fnmatchcase(call.resource, resource)


def unconditioned(grant: str) -> str:
    return grant.partition(" when ")[0]


# ---------------------------------------------------------------- the template's roles


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

    document = copy.deepcopy(expand_for_each(load_yaml(TEMPLATE)))
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
        return re.sub(r"\$\{([A-Za-z0-9]+)(?:\.Arn|\.Name)?\}", r"\1", text)
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


def _managed_policies(reference: Any, resources: dict[str, Any]) -> dict[str, set[str]]:
    """The grants of a role's managed policy reference, by the policy (its logical id, or `managed <name>`)."""
    if isinstance(reference, dict) and "Fn::If" in reference:
        _, when_true, when_false = reference["Fn::If"]
        return {
            source: grants
            for branch in (when_true, when_false)
            if branch != {"Ref": "AWS::NoValue"}
            for source, grants in _managed_policies(branch, resources).items()
        }
    if isinstance(reference, dict) and "Ref" in reference:
        policy = resources[reference["Ref"]]
        assert policy["Type"] == "AWS::IAM::ManagedPolicy", reference
        return {reference["Ref"]: document_grants(policy["Properties"]["PolicyDocument"])}
    arn = reference["Fn::Sub"] if isinstance(reference, dict) else reference
    name = str(arn).rsplit("/", 1)[-1]
    assert name in AWS_MANAGED, f"unexpected AWS managed policy {arn}"
    return {f"managed {name}": {f"managed {name}"}}


def role_policies(role_id: str, resources: dict[str, Any]) -> dict[str, set[str]]:
    """What a role grants, by the declaration that grants it: a managed policy, a policy of its own that names the
    role (AWS::IAM::Policy, AWS::IAM::RolePolicy), or the role's inline policies (`<role>#inline`)."""
    properties = resources[role_id]["Properties"]
    policies: dict[str, set[str]] = {}
    for reference in properties.get("ManagedPolicyArns", []):
        for source, grants in _managed_policies(reference, resources).items():
            policies.setdefault(source, set()).update(grants)
    for policy in properties.get("Policies", []):
        if isinstance(policy, dict) and "Fn::If" in policy:
            documents = [p for p in policy["Fn::If"][1:] if p != {"Ref": "AWS::NoValue"}]
        else:
            documents = [policy]
        policies.setdefault(f"{role_id}#inline", set()).update(
            g for p in documents for g in document_grants(p["PolicyDocument"])
        )
    for logical_id, resource in resources.items():
        properties = resource.get("Properties") or {}
        if (resource["Type"] == "AWS::IAM::Policy" and {"Ref": role_id} in properties["Roles"]) or (
            resource["Type"] == "AWS::IAM::RolePolicy" and properties["RoleName"] == {"Ref": role_id}
        ):
            policies.setdefault(logical_id, set()).update(document_grants(properties["PolicyDocument"]))
    return policies


def role_grants(role_id: str, resources: dict[str, Any]) -> set[str]:
    return {grant for grants in role_policies(role_id, resources).values() for grant in grants}


@cache
def function_grants() -> dict[str, frozenset[str]]:
    """Each function's grants: what its role's declarations (managed policies, policies naming it, its own
    statements) allow; and the block session role's."""
    resources = transformed()["Resources"]
    grants: dict[str, frozenset[str]] = {}
    for logical_id, resource in resources.items():
        if resource["Type"] != "AWS::Lambda::Function":
            continue
        role = resource["Properties"]["Role"]
        assert "Fn::GetAtt" in role, f"{logical_id} uses a role from outside the stack"
        grants[logical_id] = frozenset(role_grants(role["Fn::GetAtt"][0], resources))
    # The role whose narrowed credentials blocks make their calls with (docs/isolation.md), held to what they do as
    # a function is.
    grants[SESSION_ROLE] = frozenset(role_grants(SESSION_ROLE, resources))
    return grants
