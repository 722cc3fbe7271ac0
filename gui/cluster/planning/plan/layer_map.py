"""llama.cpp's layer map and its exact inverse: which device each layer slot goes to for
``-ngl N -ts …`` (:func:`layer_map`), and the whole-number ``-ts`` counts that reproduce a layout
slot for slot (:func:`layer_map_inverse`). The rules are in the package's docstring.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np


def slot_span(slots: Iterable[int], empty: str = "-") -> str:
    """Layer slots as runs, the one way herd writes them: ``[0, 1, 2, 5]`` → ``"0-2, 5"``,
    ``range(3, 6)`` → ``"3-5"``, nothing → ``empty``."""
    runs: list[str] = []
    start = prev = None
    for s in sorted(slots):
        if start is not None and s == prev + 1:
            prev = s
            continue
        if start is not None:
            runs.append(f"{start}-{prev}" if prev != start else f"{start}")
        start = prev = s
    if start is not None:
        runs.append(f"{start}-{prev}" if prev != start else f"{start}")
    return ", ".join(runs) or empty


class PlanError(ValueError):
    """A plan, a split or llama.cpp arguments that cannot work. The message says why."""


def layer_map(n_layer: int, ngl: int, ts: Sequence[float]) -> list[int]:
    """The device index of every slot (``-1`` = host CPU), exactly as llama.cpp computes it.

    ``n_layer`` blocks plus the output slot; ``ngl`` is ``-ngl`` (negative = all slots); ``ts``
    is ``-ts`` in model order. The cumulative fractions are float32, as in llama.cpp, so the
    result matches llama-server slot for slot (including its rounding at run boundaries).
    """
    n = n_layer + 1
    ngl = n if ngl < 0 else min(ngl, n)
    start = n - ngl
    if ngl == 0 or not ts:
        return [-1] * n
    acc: list[np.float32] = []
    s = np.float32(0)
    for x in ts:
        if x < 0:
            raise PlanError(f"tensor split values must not be negative, got {x}")
        s = np.float32(s + np.float32(x))
        acc.append(s)
    if s == 0:
        raise PlanError("all tensor split values are zero (llama.cpp would split by free memory)")
    acc = [np.float32(a / s) for a in acc]
    out = [-1] * start
    k = 0
    for i in range(start, n):
        frac = np.float32(np.float32(i - start) / np.float32(ngl))
        # upper_bound over a non-decreasing list: the first split point strictly above frac
        while not acc[k] > frac:
            k += 1
        out.append(k)
    return out


def layer_map_inverse(layout: Sequence[int], n_devices: int) -> tuple[int, list[int]]:
    """``(ngl, ts)`` with whole-number ``ts`` that makes :func:`layer_map` return ``layout``.

    ``layout`` gives each slot's device index (``-1`` = host); it must be a run of host slots
    followed by non-decreasing device indices (the only layouts llama.cpp can produce).
    """
    if not layout:
        raise PlanError("a layout needs at least one slot")
    counts = [0] * n_devices
    host = 0
    prev = -1
    for slot, d in enumerate(layout):
        if d < -1 or d >= n_devices:
            raise PlanError(f"slot {slot}: device index {d} is outside 0…{n_devices - 1}")
        if d == -1:
            if prev != -1:
                raise PlanError(f"slot {slot}: host slots must all come first")
            host += 1
        else:
            if d < prev:
                raise PlanError(f"slot {slot}: devices must be in model order (got {d} after {prev})")
            counts[d] += 1
        prev = d
    return len(layout) - host, counts


def check_slot_count(value, what: str) -> int:
    """``value`` as a slot count (a whole number, not negative); :class:`PlanError` naming ``what``
    otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise PlanError(f"{what}: expected a whole number of slots, got {value!r}")
    if value < 0:
        raise PlanError(f"{what}: must not be negative, got {value}")
    return int(value)
