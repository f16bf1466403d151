"""canvas_local.heap: glibc's free pages go back to the system, at most once per window."""

from __future__ import annotations

import ctypes

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
    # On this platform's libc: either glibc with malloc_trim, or none (musl, macOS), and then no trim.
    libc = heap._libc()
    assert libc is None or isinstance(libc, ctypes.CDLL)
