"""bench/growth.py: growth per run is the slope of samples over the second half of the runs, so a step at the
start (caches, pools filled once) is not counted as growth and a steady growth is."""

from __future__ import annotations

import math

import pytest

from bench.growth import second_half, slope, slope_error

pytestmark = pytest.mark.unit


def test_a_step_at_the_start_is_not_growth_but_a_steady_slope_is():
    # Given RSS samples every 10 runs of 200: 100 MB filled over the first 20 runs, then 40 kB a run
    samples = [(n, 300_000 + (100_000 if n >= 20 else 0) + 40 * n) for n in range(0, 201, 10)]
    # When growth is measured over the second half
    later = second_half(samples, 200)
    growth = slope(later)
    # Then it is the steady 40 kB a run, where (last - first) / runs counts the step too
    assert [n for n, _ in later] == list(range(100, 201, 10))
    assert growth == pytest.approx(40.0)
    assert (samples[-1][1] - samples[0][1]) / 200 == pytest.approx(540.0)


def test_the_window_can_end_before_the_last_runs_and_samples_come_in_any_order():
    # Given samples recorded by concurrent clients out of order, the last ones taken as clients ran out of runs
    samples = [(30, 3.0), (10, 1.0), (20, 2.0), (25, 2.5), (15, 1.5), (35, -100.0)]
    # When the window ends at run 30
    later = second_half(samples, 40, last=30)
    # Then it holds runs 20 to 30, sorted, and the ramp-down after it does not count
    assert later == [(20, 2.0), (25, 2.5), (30, 3.0)]
    assert slope(later) == pytest.approx(0.1)


@pytest.mark.parametrize("points", [[], [(1, 1.0), (2, 2.0)], [(5, 1.0), (5, 2.0), (5, 3.0)]])
def test_too_few_samples_give_no_slope(points):
    # When growth is asked of fewer than three samples, or of samples all taken at one run count
    # Then there is no figure rather than a made-up one
    assert math.isnan(slope(points))


def test_the_slope_error_is_zero_on_a_line_and_grows_with_the_noise():
    # Given samples on a line, and the same samples with alternating noise of 10 and of 40
    line = [(n, 5.0 * n) for n in range(0, 50, 5)]
    noisy = [(n, y + (10 if i % 2 else -10)) for i, (n, y) in enumerate(line)]
    noisier = [(n, y + (40 if i % 2 else -40)) for i, (n, y) in enumerate(line)]
    # Then the error is nought on the line and four times larger for four times the noise
    assert slope_error(line) == pytest.approx(0.0, abs=1e-9)
    assert slope_error(noisier) == pytest.approx(4 * slope_error(noisy))
    assert slope_error(noisy) > 0
