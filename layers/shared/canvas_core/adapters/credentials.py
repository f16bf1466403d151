"""STS: credentials of a role narrowed by a session policy, vended by trusted code for code that is not (a block:
canvas_core/isolation.py)."""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import ClientError

from canvas_core.adapters.aws import LazyClient
from canvas_core.errors import StorageBusyError, StorageError
from canvas_core.models.blocks import BlockCredentials

# STS's answers to a session policy it will not pack into a session token.
_TOO_LARGE = {"PackedPolicyTooLarge", "PackedPolicyTooLargeException"}
_BUSY = {"Throttling", "ThrottlingException", "RequestLimitExceeded", "ServiceUnavailable", "InternalFailure"}


class PolicyTooLargeError(Exception):
    """STS refused the session policy as too large once packed."""


class SessionVendor:
    sts = LazyClient("sts")

    def __init__(self, sts: Any = None):
        self.sts = sts

    def vend(self, role_arn: str, session_name: str, policy: dict[str, Any], seconds: int) -> BlockCredentials:
        """Credentials of `role_arn` for `seconds`, limited to what both the role and `policy` allow."""
        try:
            answer = self.sts.assume_role(
                RoleArn=role_arn,
                RoleSessionName=session_name,
                Policy=json.dumps(policy, separators=(",", ":")),
                DurationSeconds=seconds,
            )
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code in _TOO_LARGE:
                raise PolicyTooLargeError(code) from exc
            if code in _BUSY:
                raise StorageBusyError(f"STS AssumeRole failed: {code}") from exc
            raise StorageError(f"STS AssumeRole failed: {code}") from exc
        given = answer["Credentials"]
        return BlockCredentials(
            access_key_id=given["AccessKeyId"],
            secret_access_key=given["SecretAccessKey"],
            session_token=given["SessionToken"],
            expiration=given["Expiration"].isoformat()
            if hasattr(given["Expiration"], "isoformat")
            else str(given["Expiration"]),
        )
