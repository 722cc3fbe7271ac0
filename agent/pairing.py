"""Pairing: trading the PIN shown on the worker for a bearer token, with brute-force lockout.

A 6-digit PIN has a million values; without a limit a LAN host could try them all in minutes.
After :attr:`PinGuard.max_failures` wrong PINs in a row every attempt — right or wrong — is
refused for :attr:`PinGuard.lockout` seconds. The counter is global, not per address: on a LAN
addresses are cheap to change.
"""

from __future__ import annotations

import hmac
import secrets
import time
from typing import Callable

from agent.settings import MAX_ADDRESSES_PER_MASTER, AgentState, PairedMaster, hash_token, new_pin


class PairingLocked(Exception):
    """Too many wrong PINs; ``retry_after`` seconds remain."""

    def __init__(self, retry_after: float) -> None:
        super().__init__(f"too many wrong PINs; pairing is locked for {retry_after:.0f} s")
        self.retry_after = retry_after


class WrongPin(Exception):
    """The PIN did not match; ``tries_left`` before the lockout."""

    def __init__(self, tries_left: int) -> None:
        super().__init__(f"wrong PIN ({tries_left} tries left before a lockout)")
        self.tries_left = tries_left


class PinGuard:
    """Checks PINs and counts failures.

    Attributes:
        max_failures: wrong PINs in a row that trigger a lockout.
        lockout: seconds the lockout lasts.
    """

    def __init__(self, max_failures: int = 5, lockout: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.max_failures = max_failures
        self.lockout = lockout
        self._clock = clock
        self._failures = 0
        self._locked_until = 0.0

    def locked_for(self) -> float:
        """Seconds left in the current lockout (0 when not locked)."""
        return max(0.0, self._locked_until - self._clock())

    def check(self, given: str, expected: str) -> None:
        """Return if ``given`` is right; else raise :class:`WrongPin` or :class:`PairingLocked`."""
        left = self.locked_for()
        if left > 0:
            raise PairingLocked(left)
        if hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8")):
            self._failures = 0
            return
        self._failures += 1
        if self._failures >= self.max_failures:
            self._failures = 0
            self._locked_until = self._clock() + self.lockout
            raise PairingLocked(self.lockout)
        raise WrongPin(self.max_failures - self._failures)


def pair_master(state: AgentState, address: str, name: str = "") -> str:
    """Record a newly paired master, rotate the PIN, save the state; returns the new token.

    The PIN rotates so that one PIN seen over a shoulder pairs one master, not every later one.
    """
    token = secrets.token_urlsafe(32)
    state.masters.append(PairedMaster(name=name[:100], token_sha256=hash_token(token),
                                      addresses=[address] if address else [], paired_at=time.time()))
    state.pin = new_pin()
    state.save()
    return token


def note_address(state: AgentState, master: PairedMaster, address: str) -> bool:
    """Remember that ``master`` called from ``address`` (its lease may have changed).

    Returns True when the state changed (and was saved). Oldest addresses drop off first.
    """
    if not address or address in master.addresses:
        return False
    master.addresses.append(address)
    del master.addresses[:-MAX_ADDRESSES_PER_MASTER]
    state.save()
    return True
