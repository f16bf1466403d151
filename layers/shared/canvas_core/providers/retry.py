"""Retries of a model call inside one invocation: a passing failure (throttling, a 5xx, a dropped connection)
is tried again with capped exponential backoff and full jitter, honouring a server's Retry-After; when the
attempts are spent it becomes `BlockRetryableError`, which the state machine retries again later.

Only failures where the server is not working on the request are `TransientError`: a call that timed out waiting for
its answer is not, since the server may still be generating it (the providers raise `BlockFatalError` for it)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable

from canvas_core.errors import BlockRetryableError
from canvas_core.observability import logger
from canvas_core.settings import provider_settings

MAX_BACKOFF_SECONDS = 20.0


def retry_backoff_seconds() -> float:
    """The first retry's backoff ceiling (MODEL_RETRY_BACKOFF_SECONDS, default 1 s); it doubles per attempt."""
    return provider_settings().model_retry_backoff_seconds


class TransientError(Exception):
    """One attempt failed for a passing reason."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


def with_retries[T](
    call: Callable[[], T], *, attempts: int, backoff_seconds: float, sleep: Callable[[float], None] = time.sleep
) -> T:
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except TransientError as exc:
            if attempt == attempts:
                raise BlockRetryableError(f"{exc} (after {attempts} attempts)") from exc
            delay = random.uniform(0, backoff_seconds * 2 ** (attempt - 1))
            if exc.retry_after is not None:
                delay = max(delay, exc.retry_after)
            delay = min(delay, MAX_BACKOFF_SECONDS)
            logger.warning("Model call failed; retrying", extra={"attempt": attempt, "reason": str(exc)})
            if delay > 0:
                sleep(delay)
    raise AssertionError("unreachable")
