"""Fixtures of the unit tier."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from canvas_local.moto_server import MotoServer


@pytest.fixture(autouse=True)
def offline_models(monkeypatch: pytest.MonkeyPatch) -> None:
    """The unit tier's models are the offline provider's, unless a test sets MODEL_PROVIDER itself (settings have no
    default for it: a function gets it from template.yaml, the local stack its own)."""
    monkeypatch.setenv("MODEL_PROVIDER", "offline")


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
        if name.endswith(("_MODEL_ID", "_MAX_OUTPUT_TOKENS")) or name == "AWS_ENDPOINT_URL":
            monkeypatch.delenv(name)


@pytest.fixture
def environment_of(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], None]:
    """`environment_of("GetRunFunction")`: the process's environment holds what template.yaml gives that function, as
    its Lambda's would (settings read from then on see it)."""
    from canvas_core import settings
    from tests.support import function_environment

    def use(logical_id: str) -> None:
        for name, value in function_environment(logical_id).items():
            monkeypatch.setenv(name, value)
        settings.reset()

    return use


@pytest.fixture
def caches() -> Iterator[Callable[[bool], None]]:
    """`use(True)` installs canvas_local.moto_patch's caches, `use(False)` removes them; the state before is
    restored."""
    from moto.dynamodb.models.table import Table

    from canvas_local import moto_patch
    from canvas_local.moto_patch import packed_items

    installed_before = Table.query is packed_items._query_partition

    def use(installed: bool) -> None:
        if installed:
            moto_patch.install_caches()
        else:
            moto_patch.uninstall_caches()

    yield use
    use(installed_before)


@pytest.fixture
def moto_server() -> Iterator[MotoServer]:
    """moto's server for the stack, started on a loopback port and stopped after the test."""
    from canvas_local.moto_server import MotoServer

    server = MotoServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()
