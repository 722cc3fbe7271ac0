"""Leases: a worker belongs to one master at a time.

The first paired master that starts the RPC worker (``rpc/start``) or connects to the relay
takes the lease. While it holds it, another paired master's ``rpc/start`` and ``rpc/stop`` are
refused (409, naming the holder) and its RPC connections are refused by the relay. The holder
keeps the lease by using it — an RPC connection open, or an API call — and gives it back with
``rpc/stop``. A lease unused for :data:`LEASE_IDLE` seconds is stale: it ends by itself, so a
master that went away does not keep the worker, and its key gets no RPC answer from then on
until it takes the lease again.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

#: Seconds without an RPC connection or an API call after which a lease ends.
LEASE_IDLE = 120.0


@dataclass
class Lease:
    """Who holds the worker: a master's key fingerprint and name, since when, last use."""

    fingerprint: str
    name: str
    since: float
    last_used: float


class Leases:
    """The one lease of a worker.

    Args:
        in_use: ``in_use()`` — is an RPC connection open now (the lease does not go stale then)?
        idle: :data:`LEASE_IDLE` by default.
    """

    def __init__(self, in_use: Callable[[], bool] = lambda: False, idle: float = LEASE_IDLE,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.in_use = in_use
        self.idle = idle
        self._clock = clock
        self._lease: Lease | None = None

    def current(self) -> Lease | None:
        """The lease, or None (a stale one ends here)."""
        lease = self._lease
        if lease is not None and not self.in_use() and self._clock() - lease.last_used > self.idle:
            self._lease = None
        return self._lease

    def take(self, fingerprint: str, name: str = "") -> Lease | None:
        """Take (or keep using) the lease for ``fingerprint``; returns the other master's lease
        when it holds the worker (and then nothing changes), else None."""
        lease = self.current()
        now = self._clock()
        if lease is not None and lease.fingerprint != fingerprint:
            return lease
        if lease is None:
            self._lease = Lease(fingerprint, name, time.time(), now)
        else:
            lease.last_used = now
        return None

    def touch(self, fingerprint: str) -> None:
        """The holder used the worker (an API call): its lease is fresh again."""
        lease = self.current()
        if lease is not None and lease.fingerprint == fingerprint:
            lease.last_used = self._clock()

    def release(self, fingerprint: str) -> None:
        """The holder gives the worker back."""
        if self._lease is not None and self._lease.fingerprint == fingerprint:
            self._lease = None

    def idle_for(self) -> float:
        lease = self.current()
        return 0.0 if lease is None else self._clock() - lease.last_used
