"""Time and ids in one place, so tests can reason about them."""

import time
import uuid
from datetime import UTC, datetime


def now_ms() -> int:
    return int(time.time() * 1000)


def iso_utc(ms: int) -> str:
    """Epoch milliseconds as ISO 8601 in UTC, to the millisecond: 2025-11-21T04:40:00.000Z."""
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def new_id() -> str:
    return str(uuid.uuid4())


def parse_uuid(name: str, value: str) -> str:
    """The canonical lower-case form of a UUID path parameter, or InvalidUuidError."""
    from canvas_core.errors import InvalidUuidError

    try:
        return str(uuid.UUID(value))
    except (ValueError, TypeError, AttributeError):
        raise InvalidUuidError(name, value) from None
