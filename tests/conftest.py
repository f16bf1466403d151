"""Fixtures of every tier (settings read afresh by each test), and those the statemachine and e2e tiers share:
embedded stacks (canvas_local.LocalStack) that stop after the test, on template.yaml or on the small fixture
stack in tests/fixtures/mini_stack."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from canvas_core import settings
from canvas_local.stack import DEFAULT_TEMPLATE, LocalStack

MINI_STACK_TEMPLATE = Path(__file__).parent / "fixtures" / "mini_stack" / "template.yaml"


@pytest.fixture(autouse=True)
def fresh_settings() -> Iterator[None]:
    """Each test reads canvas_core's settings from the environment as it leaves it (a process keeps them once
    read, as a Lambda container does); a test that changes a variable after they were read calls
    `settings.reset()`."""
    settings.reset()
    yield
    settings.reset()


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
