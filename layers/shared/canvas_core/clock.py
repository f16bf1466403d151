"""Time and ids in one place, so tests can reason about them."""

import time
import uuid


def now_ms() -> int:
    return int(time.time() * 1000)


def new_id() -> str:
    return str(uuid.uuid4())


def parse_uuid(name: str, value: str) -> str:
    """The canonical lower-case form of a UUID path parameter, or InvalidUuidError."""
    from canvas_core.errors import InvalidUuidError

    try:
        return str(uuid.UUID(value))
    except (ValueError, TypeError, AttributeError):
        raise InvalidUuidError(name, value) from None
