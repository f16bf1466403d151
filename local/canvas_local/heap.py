"""Giving glibc's free memory back to the operating system while the embedded stack runs.

glibc keeps the pages of freed chunks in its heaps for reuse, and returns them to the system only from a heap's top;
in a long-lived process whose allocations interleave (a run's items, its blocks' libraries, moto's requests), RSS then
follows the peak of what was ever in use rather than what is. `malloc_trim(0)` releases every free page of every
arena (docs/benchmarks.md, "Where a run's memory goes"). Elsewhere than glibc it is a no-op.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import threading
import time
from typing import Any

# How often, at most: a trim walks the heaps, a few milliseconds for a stack of a few hundred MB.
TRIM_SECONDS = 5.0

_lock = threading.Lock()
_last = [0.0]


@functools.cache
def _libc() -> Any:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc if hasattr(libc, "malloc_trim") else None
    except OSError:
        return None


def trim(every: float = TRIM_SECONDS) -> bool:
    """malloc_trim(0), unless it ran less than `every` seconds ago; True when it ran and released something."""
    libc = _libc()
    if libc is None:
        return False
    now = time.monotonic()
    with _lock:
        if now - _last[0] < every:
            return False
        _last[0] = now
    return bool(libc.malloc_trim(0))
