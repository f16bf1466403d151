"""Fixtures of every tier (settings read afresh by each test), and those the statemachine and e2e tiers share:
embedded stacks (canvas_local.LocalStack) that stop after the test, on template.yaml or on the small fixture
stack in tests/fixtures/mini_stack."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from canvas_core import settings
from canvas_local.stack import DEFAULT_TEMPLATE, LocalStack

MINI_STACK_TEMPLATE = Path(__file__).parent / "fixtures" / "mini_stack" / "template.yaml"


@pytest.fixture(autouse=True)
def fresh_settings() -> Iterator[None]:
    """No settings model read by one test is answered to another."""
    settings.reset()
    yield
    settings.reset()


class _CurrentStdout:
    """Writes to sys.stdout as it is when written to (pytest's capture replaces it between a test's phases)."""

    def write(self, text: str) -> int:
        return sys.stdout.write(text)

    def flush(self) -> None:
        sys.stdout.flush()


@pytest.fixture
def log_lines(capsys: pytest.CaptureFixture[str]) -> Iterator[Callable[[], list[dict[str, Any]]]]:
    """`log_lines()`: the JSON lines canvas_core's logger wrote since the last call. Its handler keeps the stream it
    was made with, so it writes to this test's captured output meanwhile."""
    from canvas_core.observability import logger

    handler = logger.registered_handler
    assert isinstance(handler, logging.StreamHandler)
    previous, handler.stream = handler.stream, _CurrentStdout()

    def read() -> list[dict[str, Any]]:
        return [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]

    yield read
    handler.stream = previous


@pytest.fixture
def local_stack_factory() -> Iterator[Callable[..., LocalStack]]:
    """`start(template=template.yaml, **LocalStack options)` returns a started stack."""
    stacks: list[LocalStack] = []

    def start(template: Path | str = DEFAULT_TEMPLATE, **options: Any) -> LocalStack:
        stack = LocalStack(template, **options)
        stacks.append(stack)
        return stack.start()

    yield start
    for stack in reversed(stacks):
        stack.stop()


@pytest.fixture
def mini_stack(local_stack_factory: Callable[..., LocalStack]) -> LocalStack:
    """The fixture stack: a table, a bucket, a Map/Choice/Catch/waitForTaskToken machine, three routes."""
    return local_stack_factory(MINI_STACK_TEMPLATE)
