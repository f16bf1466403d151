"""API requests first: what the embedded stack does so that a poll or a create is not queued behind the
work of every run in flight.

On AWS, API Gateway, DynamoDB and Step Functions scale apart from each other. Here one process serves them
all, and moto's services take one request at a time (moto_patch), so under load a poll would wait behind
dozens of block writes. The front door marks the thread serving an API request; calls to moto from that
thread carry a header; moto's per-service locks let such calls in before the ones runs make.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import boto3

HEADER = "x-canvas-local-priority"

_marked = threading.local()


@contextmanager
def api_request() -> Iterator[None]:
    """Calls to moto made in this thread until exit go before those of runs."""
    _marked.on = True
    try:
        yield
    finally:
        _marked.on = False


def mark_api_calls() -> None:
    """Have every boto3 client built from now on (the default session) tag calls made for an API request."""
    boto3.setup_default_session()
    assert boto3.DEFAULT_SESSION is not None
    boto3.DEFAULT_SESSION.events.register("request-created", _tag)


def marked() -> bool:
    """Whether this thread is serving an API request."""
    return getattr(_marked, "on", False)


def _tag(request: Any, **_: Any) -> None:
    if marked():
        request.headers[HEADER] = "1"


class PriorityLock:
    """A reentrant lock that admits waiting priority holders before other waiters."""

    def __init__(self) -> None:
        self._changed = threading.Condition(threading.Lock())
        self._owner: int | None = None
        self._depth = 0
        self._priority_waiting = 0

    def acquire(self, priority: bool = False) -> None:
        me = threading.get_ident()
        with self._changed:
            if self._owner == me:
                self._depth += 1
                return
            if priority:
                self._priority_waiting += 1
            try:
                while self._owner is not None or (not priority and self._priority_waiting):
                    self._changed.wait()
            finally:
                if priority:
                    self._priority_waiting -= 1
            self._owner, self._depth = me, 1

    def release(self) -> None:
        with self._changed:
            if self._owner != threading.get_ident():
                raise RuntimeError("release of a lock this thread does not hold")
            self._depth -= 1
            if self._depth == 0:
                self._owner = None
                self._changed.notify_all()

    @contextmanager
    def held(self, priority: bool = False) -> Iterator[None]:
        self.acquire(priority)
        try:
            yield
        finally:
            self.release()

    # The context manager protocol of threading.RLock, for holders without a priority.
    def __enter__(self) -> PriorityLock:
        self.acquire()
        return self

    def __exit__(self, *_: Any) -> None:
        self.release()
