"""When a failed delivery is tried again: exponential backoff with jitter, over more than 72 hours.

RETRY_DELAYS[n] is the base delay after attempt n+1 fails; the wait is drawn from [base, 1.5 x base), so the
schedule never runs shorter than its bases (they add up to 72 h 36 min 10 s). After the last one fails, the
delivery goes to the dead-letter queue. Every delay is scaled by WEBHOOK_RETRY_TIME_SCALE (tests)."""

from __future__ import annotations

import random

MINUTE, HOUR = 60, 3600
RETRY_DELAYS: tuple[int, ...] = (
    10,
    1 * MINUTE,
    5 * MINUTE,
    30 * MINUTE,
    1 * HOUR,
    2 * HOUR,
    4 * HOUR,
    8 * HOUR,
    12 * HOUR,
    12 * HOUR,
    16 * HOUR,
    17 * HOUR,
)
MAX_ATTEMPTS = len(RETRY_DELAYS) + 1
JITTER = 0.5


def retry_delay_seconds(attempt: int, scale: float = 1.0, rng: random.Random | None = None) -> float | None:
    """Seconds to wait after attempt `attempt` (1-based) failed; None when it was the last."""
    if attempt >= MAX_ATTEMPTS:
        return None
    base = RETRY_DELAYS[attempt - 1]
    return base * (1 + JITTER * (rng or random).random()) * scale
