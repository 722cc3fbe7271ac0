"""A curve's history stays bounded however long the cluster runs, and still covers days (#36)."""

from __future__ import annotations

import math

import pytest

from gui.cluster.nodes.history import RANGES, TIERS, Series


def test_a_week_of_samples_every_second_stays_bounded_and_covers_the_days():
    s = Series("decode", own="decode", raw_points=700)
    t0 = 1_800_000_000.0  # (a whole quarter hour, so the buckets line up with the test's arithmetic)
    week = 7 * 86400
    for i in range(0, week, 1):
        s.add(t0 + i, 50.0 if (i // 3600) % 2 else 10.0)
    now = t0 + week - 1
    assert len(s.t) == 700  # the raw ring
    # the last minutes: every sample
    ts, vs = s.points(RANGES["minutes"], now)
    assert len(ts) == 601 and ts[-1] == now and ts[1] - ts[0] == 1.0
    # the last hours: one point a minute, hours alternating 10 and 50 tok/s
    ts, vs = s.points(RANGES["hours"], now)
    assert 6 * 60 <= len(ts) <= 6 * 60 + 1
    assert set(vs) == {10.0, 50.0}
    # the last days: one point a quarter hour, covering all three days
    ts, vs = s.points(RANGES["days"], now)
    assert ts[0] <= now - RANGES["days"] + TIERS[1][0] and len(ts) <= 3 * 96 + 1
    assert set(vs) == {10.0, 50.0}
    # every memory is a ring: a week at one a second holds no more than these
    assert all(len(m.t) <= keep for m, (_, keep) in zip(s._means, TIERS))


def test_a_silence_is_a_gap_in_the_means_too():
    s = Series("alpha", node_id="n1", raw_points=10)
    t0 = 1_800_000_000.0
    for i in range(120):  # two minutes of values
        s.add(t0 + i, 1.0)
    for i in range(3600, 3720):  # an hour later, two more
        s.add(t0 + i, 2.0)
    ts, vs = s.points(RANGES["hours"], t0 + 3719)
    finite = [v for v in vs if not math.isnan(v)]
    assert finite == [1.0, 1.0, 2.0, 2.0]
    # between them the line breaks rather than sloping across the hour
    assert math.isnan(vs[2])


def test_value_at_and_lost():
    s = Series("alpha", node_id="n1", gap_s=5.0)
    s.add(100.0, 3.0)
    assert s.value_at(102.0) == 3.0 and s.current_at(104.0)
    assert s.value_at(106.0) is None and not s.current_at(106.0)
    s.gap(107.0)
    assert s.value_at(107.5) is None
    assert s.peak() == pytest.approx(3.0)
