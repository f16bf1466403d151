"""canvas_local/scopes.py: the embedded stack vends credentials with a session policy as STS does, and refuses
the calls made with them that IAM would refuse, before they reach moto."""

from __future__ import annotations

import json

import boto3
import pytest
from botocore.exceptions import ClientError

from canvas_local import scopes
from canvas_local.scopes import SessionPolicies, UnsupportedPolicyError

pytestmark = pytest.mark.unit

ROLE = "arn:aws:iam::123456789012:role/BlockSessionRole"
POLICY = {
    "Version": "2012-10-17",
    "Statement": [
        {
            "Effect": "Allow",
            "Action": "dynamodb:GetItem",
            "Resource": "arn:aws:dynamodb:*:*:table/Runs",
            "Condition": {"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": ["mine"]}},
        }
    ],
}
ROLE_POLICY = {"Statement": [{"Effect": "Allow", "Action": "dynamodb:*", "Resource": "*"}]}


def client(service: str, key: str = "AKIAIOSFODNN7EXAMPLE", **credentials: str):
    return boto3.client(
        service,
        region_name="us-east-1",
        aws_access_key_id=key,
        aws_secret_access_key=credentials.get("secret", "s"),
        aws_session_token=credentials.get("token"),
    )


@pytest.fixture
def policies() -> SessionPolicies:
    return SessionPolicies(lambda table, index: "run_id", "123456789012", "us-east-1", {ROLE: [ROLE_POLICY]})


def vend(policies: SessionPolicies, policy: dict = POLICY, seconds: int = 900) -> dict:
    params = {"RoleArn": ROLE, "RoleSessionName": "block-b1", "Policy": json.dumps(policy), "DurationSeconds": seconds}
    return policies.answer(client("sts"), "AssumeRole", params)["Credentials"]


def ddb(credentials: dict):
    return client("dynamodb", credentials["AccessKeyId"], token=credentials["SessionToken"])


def get(run_id: str) -> dict:
    return {"TableName": "Runs", "Key": {"run_id": {"S": run_id}}}


def test_a_vended_session_may_do_what_its_policy_allows_and_nothing_else(policies):
    credentials = vend(policies)

    # Allowed: left to moto (None)
    assert policies.answer(ddb(credentials), "GetItem", get("mine")) is None
    # Refused as AWS refuses it
    with pytest.raises(ClientError) as refused:
        policies.answer(ddb(credentials), "GetItem", get("theirs"))
    assert refused.value.response["Error"]["Code"] == "AccessDeniedException"
    assert "dynamodb:GetItem" in refused.value.response["Error"]["Message"]
    with pytest.raises(ClientError):
        policies.answer(ddb(credentials), "PutItem", {"TableName": "Runs", "Item": {"run_id": {"S": "mine"}}})
    # And calls made with any other credentials are not the stack's to check
    assert policies.answer(client("dynamodb"), "GetItem", get("theirs")) is None


def test_the_role_policy_bounds_the_session(policies):
    # Given a session policy that allows more than the role does
    policies.role_policies[ROLE] = [{"Statement": [{"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"}]}]
    credentials = vend(policies)

    # Then what only the session policy allows is refused
    with pytest.raises(ClientError):
        policies.answer(ddb(credentials), "GetItem", get("mine"))


def test_expired_and_forgotten_sessions_are_refused_not_handed_to_moto(policies, monkeypatch):
    credentials = vend(policies, seconds=900)
    monkeypatch.setattr(scopes.time, "time", lambda: 10**12)
    with pytest.raises(ClientError) as refused:
        policies.answer(ddb(credentials), "GetItem", get("mine"))
    assert refused.value.response["Error"]["Code"] == "ExpiredTokenException"
    monkeypatch.undo()

    # And past MAX_SESSIONS the oldest is forgotten, and refused likewise
    monkeypatch.setattr(scopes, "MAX_SESSIONS", 2)
    first, *_ = [vend(policies) for _ in range(3)]
    assert len(policies) == 2
    with pytest.raises(ClientError):
        policies.answer(ddb(first), "GetItem", get("mine"))


def test_a_policy_past_iams_limit_or_with_a_construct_it_does_not_evaluate_is_refused(policies):
    too_long = {**POLICY, "Statement": POLICY["Statement"] * 20}
    with pytest.raises(ClientError) as refused:
        vend(policies, too_long)
    assert refused.value.response["Error"]["Code"] == "PackedPolicyTooLarge"
    with pytest.raises(UnsupportedPolicyError):
        vend(policies, {"Statement": [{"Effect": "Allow", "NotAction": "s3:*", "Resource": "*"}]})
