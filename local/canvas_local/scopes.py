"""Session policies on the embedded stack, as IAM enforces them: moto's STS keeps the policy an AssumeRole passes but
no call is ever checked against it, so a block's credentials (canvas_core/isolation.py) would reach every tenant's
data here while AWS confines them to the block's run. The stack therefore answers an AssumeRole that passes a
session policy itself (credentials whose access key moto takes for the stack's account; the policy kept until they
expire), and checks every call its clients sign with such credentials against that policy first: a call the policy
does not allow is refused with the error AWS answers (`AccessDeniedException`, S3's `AccessDenied`), and never
reaches moto.

What is checked is what IAM checks for the actions the service's policies use: the action, the resource's ARN (a
table, its index, an object), and the condition keys `dynamodb:LeadingKeys` (the partition key of every item a call
touches) and `dynamodb:Attributes` (the top-level attributes a write names). A call is allowed when both the session
policy and the role's own policies (template.yaml's, resolved) allow it, and neither denies it. A statement with a
construct this module does not evaluate (`NotAction`, another condition operator) is refused with the construct
named, not guessed at."""

from __future__ import annotations

import json
import re
import secrets
import string
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, NoReturn

# IAM's limit on a session policy's plain text.
MAX_POLICY_CHARS = 2048
# The sessions kept at most (each a policy of 2 KB at most): far more blocks than one machine runs within the hour
# their credentials last, and a bound on what a long-running stack keeps whatever it runs.
MAX_SESSIONS = 4096
_KEY_CHARS = string.ascii_uppercase + string.digits
# The access keys the stack vends start so (a temporary key's ASIA, then a mark): one it no longer holds a session for
# (expired, or the oldest past MAX_SESSIONS) is refused as expired, never taken for one of moto's.
_KEY_PREFIX = "ASIACNVS"
_TRANSACTION_ITEMS = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
}
_S3_ACTIONS = {
    "HeadObject": "GetObject",
    "CreateMultipartUpload": "PutObject",
    "UploadPart": "PutObject",
    "CompleteMultipartUpload": "PutObject",
    "AbortMultipartUpload": "AbortMultipartUpload",
}
_IAM_PREFIXES = {
    "sfn": "states",
    "eventbridge": "events",
    "bedrock-runtime": "bedrock",
    "secrets-manager": "secretsmanager",
}
# Words of DynamoDB's expressions that are not attribute names.
_EXPRESSION_WORDS = {
    "set", "remove", "add", "delete", "and", "or", "not", "between", "in",
    "attribute_exists", "attribute_not_exists", "attribute_type", "begins_with", "contains", "size",
    "if_not_exists", "list_append",
}  # fmt: skip
# A path's first name (`#name`, or a bare name) where it starts: not a value (`:v`) nor a path's later part.
_PATH_START = re.compile(r"(?<![:#.\w])(#?[A-Za-z_][A-Za-z0-9_]*)")
_EQUALITY = re.compile(r"(#?[A-Za-z_][A-Za-z0-9_]*)\s*=\s*(:[A-Za-z0-9_]+)")


class UnsupportedPolicyError(Exception):
    """A session policy uses a construct this module does not evaluate."""


@dataclass(frozen=True)
class _Session:
    policy: dict[str, Any]
    # The role's own policies, when the stack knows the role: IAM allows what both allow.
    role_policy: dict[str, Any] | None
    expires: float
    arn: str


@dataclass(frozen=True)
class Request:
    """One action a call asks IAM for: its resource's ARN and its condition keys (each multi-valued)."""

    action: str
    resource: str
    context: Mapping[str, list[str]]


class SessionPolicies:
    """The sessions the stack vended with a policy, by access key, and the check of each call signed with one.
    `partition_key(table, index)` names the partition key attribute of a table (or of its index); `role_policies`
    gives the policy documents of the template's roles, by ARN."""

    def __init__(
        self,
        partition_key: Callable[[str, str | None], str | None],
        account_id: str,
        region: str,
        role_policies: Mapping[str, list[dict[str, Any]]] | None = None,
    ):
        self.partition_key = partition_key
        self.role_policies = dict(role_policies or {})
        self.account_id = account_id
        self.region = region
        self._sessions: dict[str, _Session] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._sessions)

    def answer(self, client: Any, operation: str, params: Mapping[str, Any]) -> dict[str, Any] | None:
        """The answer of an AssumeRole with a session policy (vended here), None for any other call, which this
        raises the AWS error of when it is signed with vended credentials whose policy does not allow it."""
        service = client.meta.service_model.service_id.hyphenize()
        if service == "sts" and operation == "AssumeRole" and params.get("Policy"):
            # The client's hooks see the call as they see any other (the record of what each function calls).
            model = client.meta.service_model.operation_model(operation)
            client._emit_api_params(api_params=dict(params), operation_model=model, context={})
            return self._vend(client, params)
        credentials = getattr(client._request_signer, "_credentials", None)
        key = getattr(credentials, "access_key", None) or ""
        if not key.startswith(_KEY_PREFIX):
            return None
        session = self._sessions.get(key)
        if session is None or session.expires < time.time():
            expired = "ExpiredToken" if service == "s3" else "ExpiredTokenException"
            _refuse(client, operation, expired, "The security token included in the request is expired")
        for request in requests(service, operation, params, self.partition_key, self.region, self.account_id):
            if not allows(session.policy, request) or (
                session.role_policy is not None and not allows(session.role_policy, request)
            ):
                message = (
                    f"User: {session.arn} is not authorized to perform: {request.action} on resource: "
                    f"{request.resource} because no session policy and role policy both allow it"
                )
                _refuse(client, operation, "AccessDenied" if service == "s3" else "AccessDeniedException", message)
        return None

    def _vend(self, client: Any, params: Mapping[str, Any]) -> dict[str, Any]:
        policy_text = str(params["Policy"])
        if len(policy_text) > MAX_POLICY_CHARS:
            _refuse(client, "AssumeRole", "PackedPolicyTooLarge", "Packed size of the session policy is too large")
        policy = json.loads(policy_text)
        for statement in _statements(policy):
            _check_supported(statement)
        seconds = int(params.get("DurationSeconds") or 3600)
        key = _KEY_PREFIX + "".join(secrets.choice(_KEY_CHARS) for _ in range(20 - len(_KEY_PREFIX)))
        role = str(params["RoleArn"])
        arn = f"arn:aws:sts::{self.account_id}:assumed-role/{role.rsplit('/', 1)[-1]}/{params['RoleSessionName']}"
        now = time.time()
        with self._lock:
            # Sessions end as their credentials expire: what the stack keeps does not grow with the runs it has run.
            self._sessions = {k: s for k, s in self._sessions.items() if s.expires >= now}
            for oldest in list(self._sessions)[: max(0, len(self._sessions) + 1 - MAX_SESSIONS)]:
                del self._sessions[oldest]
            documents = self.role_policies.get(role)
            role_policy = None if documents is None else {"Statement": [s for d in documents for s in _statements(d)]}
            self._sessions[key] = _Session(policy, role_policy, now + seconds, arn)
        expiration = datetime.now(UTC) + timedelta(seconds=seconds)
        return {
            "Credentials": {
                "AccessKeyId": key,
                "SecretAccessKey": secrets.token_urlsafe(30),
                "SessionToken": secrets.token_urlsafe(64),
                "Expiration": expiration,
            },
            "AssumedRoleUser": {"AssumedRoleId": f"AROA{key[4:]}:{params['RoleSessionName']}", "Arn": arn},
            "PackedPolicySize": min(100, len(policy_text) * 100 // MAX_POLICY_CHARS),
            "ResponseMetadata": {"HTTPStatusCode": 200, "RetryAttempts": 0},
        }


def _refuse(client: Any, operation: str, code: str, message: str) -> NoReturn:
    status = 403 if code == "AccessDenied" else 400
    error = {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": status}}
    raise client.exceptions.from_code(code)(error, operation)


# ---------------------------------------------------------------- what a call asks for


def requests(
    service: str,
    operation: str,
    params: Mapping[str, Any],
    partition_key: Callable[[str, str | None], str | None],
    region: str,
    account_id: str,
) -> list[Request]:
    """The (action, resource, condition keys) IAM authorizes one call as."""
    if service == "dynamodb":
        return list(_dynamodb(operation, params, partition_key, f"arn:aws:dynamodb:{region}:{account_id}:table/"))
    if service == "s3":
        bucket = f"arn:aws:s3:::{params.get('Bucket', '')}"
        if operation in ("ListObjects", "ListObjectsV2"):
            return [Request("s3:ListBucket", bucket, {"s3:prefix": [str(params.get("Prefix", ""))]})]
        if "Key" not in params:
            return [Request(f"s3:{operation}", bucket, {})]
        found = [Request(f"s3:{_S3_ACTIONS.get(operation, operation)}", f"{bucket}/{params['Key']}", {})]
        if operation == "CopyObject":
            found = [Request("s3:PutObject", found[0].resource, {})]
            source = params["CopySource"]
            source = f"{source['Bucket']}/{source['Key']}" if isinstance(source, Mapping) else str(source).lstrip("/")
            found.append(Request("s3:GetObject", f"arn:aws:s3:::{source}", {}))
        return found
    prefix = _IAM_PREFIXES.get(service, service)
    if service == "sfn" and operation in ("SendTaskSuccess", "SendTaskFailure", "SendTaskHeartbeat"):
        return [Request(f"states:{operation}", "*", {})]
    arn = next((str(v) for k, v in params.items() if k.lower().endswith("arn")), "*")
    return [Request(f"{prefix}:{operation}", arn, {})]


def _dynamodb(
    operation: str, params: Mapping[str, Any], partition_key: Callable[[str, str | None], str | None], arns: str
) -> Iterator[Request]:
    def request(
        action: str, table: str, items: list[Mapping[str, Any]], item: Mapping[str, Any], write: bool
    ) -> Request:
        table = table.rsplit(":table/", 1)[-1]
        key = partition_key(table, None)
        leading = [str(_scalar(i[key])) for i in items if key and key in i]
        context: dict[str, list[str]] = {"dynamodb:LeadingKeys": leading}
        names = _attributes(item, items) if write else _projected(item)
        if names is not None:
            context["dynamodb:Attributes"] = names
        return Request(f"dynamodb:{action}", arns + table, context)

    if operation in ("GetItem", "DeleteItem", "UpdateItem"):
        yield request(operation, params["TableName"], [params.get("Key", {})], params, operation != "GetItem")
    elif operation == "PutItem":
        yield request(operation, params["TableName"], [params.get("Item", {})], params, True)
    elif operation == "BatchGetItem":
        for table, wanted in params.get("RequestItems", {}).items():
            yield request(operation, table, list(wanted.get("Keys", [])), wanted, False)
    elif operation == "BatchWriteItem":
        for table, writes in params.get("RequestItems", {}).items():
            items = [w["PutRequest"]["Item"] if "PutRequest" in w else w["DeleteRequest"]["Key"] for w in writes]
            yield request(operation, table, items, {}, True)
    elif operation in ("TransactWriteItems", "TransactGetItems"):
        for entry in params.get("TransactItems", []):
            for kind, part in entry.items():
                action = "GetItem" if kind == "Get" else _TRANSACTION_ITEMS[kind]
                item = part.get("Item") or part.get("Key", {})
                yield request(action, part["TableName"], [item], part, kind != "Get")
    elif operation == "Query":
        table, index = params["TableName"].rsplit(":table/", 1)[-1], params.get("IndexName")
        key = partition_key(table, index)
        names = params.get("ExpressionAttributeNames", {})
        values = params.get("ExpressionAttributeValues", {})
        leading = [
            str(_scalar(values[value]))
            for name, value in _EQUALITY.findall(params.get("KeyConditionExpression", ""))
            if names.get(name, name) == key and value in values
        ]
        resource = arns + table + (f"/index/{index}" if index else "")
        context: dict[str, list[str]] = {"dynamodb:LeadingKeys": leading}
        projected = _projected(params)
        if projected is not None:
            context["dynamodb:Attributes"] = projected
        yield Request("dynamodb:Query", resource, context)
    else:
        yield Request(f"dynamodb:{operation}", arns + str(params.get("TableName", "*")), {})


def _scalar(value: Mapping[str, Any]) -> Any:
    return next(iter(value.values()))


def _expression_names(expression: str, names: Mapping[str, str]) -> list[str]:
    found = []
    for token in _PATH_START.findall(expression):
        if token.startswith("#"):
            found.append(names.get(token, token))
        elif token.lower() not in _EXPRESSION_WORDS:
            found.append(token)
    return found


def _attributes(part: Mapping[str, Any], items: list[Mapping[str, Any]]) -> list[str]:
    """The top-level attributes a write names: its item's or key's, and those of its expressions."""
    names: list[str] = [name for item in items for name in item]
    aliases = part.get("ExpressionAttributeNames", {})
    for field in ("UpdateExpression", "ConditionExpression"):
        names += _expression_names(str(part.get(field, "")), aliases)
    return list(dict.fromkeys(names))


def _projected(part: Mapping[str, Any]) -> list[str] | None:
    """The attributes a read asks for, or None when it asks for all."""
    projection = part.get("ProjectionExpression")
    if not projection:
        return None
    return list(dict.fromkeys(_expression_names(str(projection), part.get("ExpressionAttributeNames", {}))))


# ---------------------------------------------------------------- a policy's answer


def _statements(policy: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    found = policy.get("Statement", [])
    return [found] if isinstance(found, Mapping) else list(found)


def _as_list(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


_OPERATORS = {"StringEquals", "StringLike"}
_QUALIFIERS = {"", "ForAllValues:", "ForAnyValue:"}


def _check_supported(statement: Mapping[str, Any]) -> None:
    unknown = sorted(set(statement) - {"Sid", "Effect", "Action", "Resource", "Condition"})
    if unknown:
        raise UnsupportedPolicyError(
            f"a session policy statement uses {unknown}, which the embedded stack does not evaluate"
        )
    for operator in statement.get("Condition", {}):
        qualifier, _, name = operator.rpartition(":")
        qualifier = f"{qualifier}:" if qualifier else ""
        if qualifier not in _QUALIFIERS or name.removesuffix("IfExists") not in _OPERATORS:
            raise UnsupportedPolicyError(f"condition operator {operator} is not evaluated by the embedded stack")


def _like(pattern: str, value: str, case: bool = True) -> bool:
    expression = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(expression, value, 0 if case else re.IGNORECASE) is not None


def _condition_holds(operator: str, keys: Mapping[str, Any], context: Mapping[str, list[str]]) -> bool:
    qualifier, _, name = operator.rpartition(":")
    if_exists = name.endswith("IfExists")
    name = name.removesuffix("IfExists")

    def equal(expected: str, value: str) -> bool:
        return _like(expected, value) if name == "StringLike" else expected == value

    for key, expected in keys.items():
        wanted = _as_list(expected)
        values = context.get(key)
        if qualifier == "ForAllValues":
            if values and not all(any(equal(w, v) for w in wanted) for v in values):
                return False
        elif qualifier == "ForAnyValue":
            if not values or not any(equal(w, v) for w in wanted for v in values):
                return False
        elif values is None:
            if not if_exists:
                return False
        elif not (len(values) == 1 and any(equal(w, values[0]) for w in wanted)):
            return False
    return True


def allows(policy: Mapping[str, Any], request: Request) -> bool:
    """Whether the policy allows the request: a statement allows it, and none denies it."""
    allowed = False
    for statement in _statements(policy):
        _check_supported(statement)
        if not any(_like(a, request.action, case=False) for a in _as_list(statement.get("Action", []))):
            continue
        if not any(_like(r, request.resource) for r in _as_list(statement.get("Resource", []))):
            continue
        conditions = statement.get("Condition", {})
        if not all(_condition_holds(op, keys, request.context) for op, keys in conditions.items()):
            continue
        if statement.get("Effect") == "Deny":
            return False
        allowed = True
    return allowed


def moto_partition_key(account_id: str, region: str) -> Callable[[str, str | None], str | None]:
    """The partition key attribute of a table of moto's (or of its index), by the table's name."""

    def partition_key(table: str, index: str | None) -> str | None:
        from moto.dynamodb.models import dynamodb_backends

        found = dynamodb_backends[account_id][region].tables.get(table)
        if found is None:
            return None
        if index is None:
            return str(found.hash_key_attr)
        for candidate in [*found.global_indexes, *found.indexes]:
            if candidate.name == index:
                return next(str(k["AttributeName"]) for k in candidate.schema if k["KeyType"] == "HASH")
        return None

    return partition_key
