"""The dashboard's memory: timestamped values of one curve, bounded, over minutes, hours or days.

A home cluster serves for days (#36), so a curve cannot keep every sample, nor forget them at
each Start. A :class:`Series` keeps the newest samples as they came (a ring of
:data:`RAW_POINTS`) and, beside them, the means of whole minutes and of quarter hours (rings too),
so the last few minutes show every sample and the last days show one point per quarter hour,
in bounded memory whatever the uptime. :data:`RANGES` names the spans a user can pick and
:func:`Series.points` gives the points for one. Qt-free: the widget only draws them.

A NaN value is a gap: nothing was measured (an interval without a reply, a failed probe, a
silence longer than ``gap_s``); a line breaks there instead of sloping across it.
"""

from __future__ import annotations

import math
from collections import deque

#: Samples kept as they came, per curve: half an hour at one a second.
RAW_POINTS = 1800
#: The coarser memories: (seconds per point, points kept): a day of minutes, a week of quarters.
TIERS = ((60.0, 24 * 60), (900.0, 7 * 96))
#: The spans a user can choose, in seconds, by name.
RANGES = {"minutes": 10 * 60.0, "hours": 6 * 3600.0, "days": 3 * 86400.0}


class _Means:
    """Means of the values in consecutive buckets of ``bucket_s`` seconds, the newest ``keep``."""

    def __init__(self, bucket_s: float, keep: int) -> None:
        self.bucket_s = bucket_s
        self.t: deque[float] = deque(maxlen=keep)
        self.v: deque[float] = deque(maxlen=keep)
        self._start: float | None = None
        self._sum = 0.0
        self._n = 0

    def add(self, t: float, v: float) -> None:
        start = math.floor(t / self.bucket_s) * self.bucket_s
        if self._start is not None and start > self._start:
            self._close()
            if start - self._start > self.bucket_s:  # whole buckets without a sample: a break
                self._push(self._start + self.bucket_s * 1.5, math.nan)
        if self._start is None or start > self._start:
            self._start, self._sum, self._n = start, 0.0, 0
        if not math.isnan(v):
            self._sum += v
            self._n += 1

    def points(self) -> tuple[list[float], list[float]]:
        """The closed buckets' means, and the open bucket's so far (at its middle)."""
        ts, vs = list(self.t), list(self.v)
        if self._start is not None:
            ts.append(self._start + self.bucket_s / 2)
            vs.append(self._sum / self._n if self._n else math.nan)
        return ts, vs

    def _close(self) -> None:
        self._push(self._start + self.bucket_s / 2, self._sum / self._n if self._n else math.nan)

    def _push(self, t: float, v: float) -> None:
        if self.t and math.isnan(v) and math.isnan(self.v[-1]):
            return  # one break is enough
        self.t.append(t)
        self.v.append(v)


class Series:
    """One curve's history; NaN marks a gap.

    Attributes:
        label: the name shown in the legend and the hover readout.
        node_id: the node measured, or None for the server's own curves.
        own: the key of a server curve (``decode``, ``live``, ``prompt``), or None for a node's.
        gap_s: a silence longer than this breaks the line, and a value is current this long.
        t, v: the newest samples as they came (a ring of ``raw_points``).
    """

    def __init__(self, label: str, node_id: str | None = None, own: str | None = None,
                 gap_s: float = 5.0, raw_points: int = RAW_POINTS) -> None:
        self.label = label
        self.node_id = node_id
        self.own = own
        self.gap_s = gap_s
        self.t: deque[float] = deque(maxlen=raw_points)
        self.v: deque[float] = deque(maxlen=raw_points)
        self._means = [_Means(bucket_s, keep) for bucket_s, keep in TIERS]

    def add(self, t: float, v: float) -> None:
        """A value measured at wall-clock time ``t``."""
        if self.t and t - self.t[-1] > self.gap_s and not math.isnan(self.v[-1]):
            # a silence: break the line where the last value stopped being current
            self._append(self.t[-1] + self.gap_s, math.nan)
        self._append(t, v)

    def gap(self, t: float) -> None:
        """Nothing was measured at ``t`` (an idle interval, a failed probe)."""
        if self.t and not math.isnan(self.v[-1]):
            self._append(t, math.nan)

    def _append(self, t: float, v: float) -> None:
        self.t.append(t)
        self.v.append(v)
        for means in self._means:
            means.add(t, v)

    def value_at(self, t: float) -> float | None:
        """The value current at ``t``: the latest at or before it, unless that is a gap or
        older than ``gap_s``."""
        best = None
        for ti, vi in zip(self.t, self.v):
            if ti > t:
                break
            best = (ti, vi)
        if best is None or math.isnan(best[1]) or t - best[0] > self.gap_s:
            return None
        return best[1]

    def current_at(self, t: float) -> bool:
        """Whether the curve had a value within ``gap_s`` before ``t`` (a lost node has not)."""
        return self.value_at(t) is not None

    def peak(self) -> float:
        """The largest value kept as it came (0 without any)."""
        return max((v for v in self.v if not math.isnan(v)), default=0.0)

    def points(self, span_s: float, now: float) -> tuple[list[float], list[float]]:
        """The points to draw for the last ``span_s`` seconds before ``now``: every sample when
        the raw ring reaches that far back, else the finest means that do."""
        since = now - span_s
        if not self.t or self.t[0] <= since or len(self.t) < (self.t.maxlen or 0):
            ts, vs = list(self.t), list(self.v)
        else:
            for means in self._means:
                ts, vs = means.points()
                if ts and (ts[0] <= since or len(means.t) < (means.t.maxlen or 0)):
                    break
        keep = [i for i, ti in enumerate(ts) if ti >= since]
        return [ts[i] for i in keep], [vs[i] for i in keep]
