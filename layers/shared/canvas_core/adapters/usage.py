"""Names of an account item's monthly usage counters: `credits_used_<yyyymm>` and `runs_<yyyymm>`, in UTC.

The writes that debit credits and admit runs add to the month's counter in the same transaction, so the counters
never disagree with the balance; a month that saw no use has no attribute (read as zero)."""

from __future__ import annotations

from datetime import UTC, datetime

from canvas_core.clock import now_ms


def month_of(ms: int | None = None) -> str:
    """`yyyymm` of a moment (now by default), in UTC."""
    return datetime.fromtimestamp((now_ms() if ms is None else ms) / 1000, UTC).strftime("%Y%m")


def credits_used_counter(month: str | None = None) -> str:
    return f"credits_used_{month or month_of()}"


def runs_counter(month: str | None = None) -> str:
    return f"runs_{month or month_of()}"
