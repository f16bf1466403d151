"""e2e tier: a real HTTP client against one embedded stack (`canvas serve`'s LocalStack) per module."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from canvas_local.stack import LocalStack

KEY_A = "sk_canvas_e2e_account_a_" + "a" * 24
KEY_B = "sk_canvas_e2e_account_b_" + "b" * 24


@pytest.fixture(scope="module")
def service() -> Iterator[LocalStack]:
    with LocalStack(api_keys=[KEY_A, KEY_B]) as stack:
        yield stack


@pytest.fixture(scope="module")
def http(service: LocalStack) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=service.base_url, headers={"X-API-KEY": KEY_A}, timeout=30) as client:
        yield client


def poll_until_finished(client: httpx.Client, run_id: str, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        data = client.get(f"/v1/run/{run_id}").json()["data"]
        if data["status"] != "running":
            return data
        if time.monotonic() > deadline:
            raise AssertionError(f"run {run_id} still running after {timeout}s: {data}")
        time.sleep(0.2)
