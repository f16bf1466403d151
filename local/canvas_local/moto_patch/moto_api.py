"""moto's own server API (`/moto-api/`), signed as the stack's server wants its callers: no patch, its documented
configuration."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from canvas_local.lambda_runtime import REGION


def enable_state_machine_execution(endpoint_url: str, credentials: Credentials | None = None) -> None:
    """Make moto's server run executions through its ASL interpreter (moto's documented server config).

    The setting is process-wide (moto.core.config.default_user_config), so it also reaches `mock_aws`. The
    request is signed with `credentials` (a server that checks its callers, moto_server.CallerCheck, wants them).
    """
    _moto_api(endpoint_url, "config", {"stepfunctions": {"execute_state_machine": True}}, credentials)


def disable_state_machine_execution(endpoint_url: str, credentials: Credentials | None = None) -> None:
    _moto_api(endpoint_url, "config", {"stepfunctions": {"execute_state_machine": False}}, credentials)


def reset_backends(endpoint_url: str, credentials: Credentials | None = None) -> None:
    """Forget every resource: moto's backends are process-wide, shared by each server started here."""
    _moto_api(endpoint_url, "reset", None, credentials)


def _moto_api(endpoint_url: str, action: str, body: dict[str, Any] | None, credentials: Credentials | None) -> None:
    url = f"{endpoint_url}/moto-api/{action}"
    data = json.dumps(body).encode("utf-8")
    headers = {"Content-Type": "application/json"}
    if credentials is not None:
        signed = AWSRequest(method="POST", url=url, data=data, headers=headers)
        SigV4Auth(credentials, "moto", REGION).add_auth(signed)
        headers = dict(signed.headers.items())
    request = urllib.request.Request(url, data=data, headers=headers, method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:  # raises on a status other than 2xx
        response.read()
