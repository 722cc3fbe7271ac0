"""Rate-limited logging for messages a remote peer can trigger at will (refused connections,
failed pairings, bad datagrams): without a limit a flood of them fills the disk with the log."""

from __future__ import annotations

import logging
import time
from typing import Callable


class RateLimitedLog:
    """At most ``burst`` records per ``key`` per ``window`` seconds; the rest are counted and
    reported in one line when the window reopens."""

    def __init__(self, logger: logging.Logger, burst: int = 5, window: float = 60.0,
                 clock: Callable[[], float] = time.monotonic, max_keys: int = 256) -> None:
        self.logger = logger
        self.burst = burst
        self.window = window
        self._clock = clock
        self._max_keys = max_keys
        self._keys: dict[str, list] = {}  # key -> [window start, records in it, suppressed]
        self.suppressed = 0

    def log(self, key: str, level: int, msg: str, *args) -> bool:
        """Log unless ``key`` is over its limit; returns whether it was logged."""
        if not self.allow(key, level):
            return False
        self.logger.log(level, msg, *args)
        return True

    def allow(self, key: str, level: int = logging.WARNING) -> bool:
        """Count one record of ``key``: True if it may be logged now (the caller logs it)."""
        now = self._clock()
        entry = self._keys.get(key)
        if entry is None or now - entry[0] >= self.window:
            if entry is not None and entry[2]:
                self.logger.log(level, "(%d more like the next were not logged in the last %.0f s)",
                                entry[2], self.window)
            if entry is None and len(self._keys) >= self._max_keys:
                self._keys.pop(next(iter(self._keys)))
            entry = self._keys[key] = [now, 0, 0]
        if entry[1] >= self.burst:
            entry[2] += 1
            self.suppressed += 1
            return False
        entry[1] += 1
        return True
