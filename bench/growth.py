"""Growth per run from footprints sampled as runs end, shared by bench/load.py, bench/soak.py and bench/memory.py.

What a stack fills once (caches, thread pools, execution environments, a window of ended executions) shows as a
step at the start of a load; what each run keeps shows as a slope. So growth is the least-squares slope of the
samples over the second half of the runs, not (RSS at the end - RSS at the start) / runs.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence


def slope(points: Sequence[tuple[int, float]]) -> float:
    """Least-squares growth per run of (runs ended, value) points; nan with fewer than three, or one x."""
    if len(points) < 3 or len({x for x, _ in points}) < 2:
        return math.nan
    xs, ys = zip(*points, strict=True)
    return statistics.linear_regression(xs, ys).slope


def slope_error(points: Sequence[tuple[int, float]]) -> float:
    """The slope's standard error (how far the samples' noise lets it move); nan with fewer than three points."""
    if len(points) < 3 or len({x for x, _ in points}) < 2:
        return math.nan
    xs, ys = zip(*points, strict=True)
    fit = statistics.linear_regression(xs, ys)
    residuals = sum((y - fit.intercept - fit.slope * x) ** 2 for x, y in points)
    mean_x = statistics.fmean(xs)
    spread = sum((x - mean_x) ** 2 for x in xs)
    return math.sqrt(residuals / (len(points) - 2) / spread)


def second_half[T](samples: Sequence[tuple[int, T]], runs: int, last: int | None = None) -> list[tuple[int, T]]:
    """The samples taken once half of `runs` had ended, and (with `last`) no later than `last` runs ended; sorted
    by runs ended."""
    end = runs if last is None else last
    return sorted((s for s in samples if runs / 2 <= s[0] <= end), key=lambda s: s[0])
