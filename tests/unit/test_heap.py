"""canvas_local.heap: glibc's free pages go back to the system, at most once per window."""

from __future__ import annotations

import ctypes
import platform

import pytest

from canvas_local import heap

pytestmark = pytest.mark.unit


def test_a_trim_runs_at_most_once_per_window(monkeypatch):
    # Given a libc that counts its trims
    calls = []

    class Libc:
        def malloc_trim(self, pad: int) -> int:
            calls.append(pad)
            return 1

    monkeypatch.setattr(heap, "_libc", lambda: Libc())
    monkeypatch.setattr(heap, "_last", [0.0])
    # When the stack asks three times in a row
    answers = [heap.trim(every=60), heap.trim(every=60), heap.trim(every=60)]
    # Then glibc trimmed once, with no padding kept
    assert answers == [True, False, False]
    assert calls == [0]


def test_without_glibc_a_trim_does_nothing(monkeypatch):
    monkeypatch.setattr(heap, "_libc", lambda: None)
    assert heap.trim(every=0) is False


def test_glibcs_malloc_trim_is_found_where_it_exists():
    # On this platform's libc: glibc (which has malloc_trim) gives it; musl and macOS have none, and then no trim
    libc = heap._libc()
    if platform.libc_ver()[0] == "glibc":
        assert isinstance(libc, ctypes.CDLL) and hasattr(libc, "malloc_trim")
    else:
        assert libc is None
