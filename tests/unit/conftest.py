"""Fixtures of the unit tier."""

from __future__ import annotations

import os

import pytest


@pytest.fixture
def model_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Dummy AWS credentials, and no model ids or endpoint override from the developer's environment."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    for name in list(os.environ):
        if name.endswith("_MODEL_ID") or name == "AWS_ENDPOINT_URL":
            monkeypatch.delenv(name)
