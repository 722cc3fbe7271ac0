"""Pairing: trading the PIN shown on the worker for a bearer token, with brute-force lockout.

A 6-digit PIN has a million values; without a limit a LAN host could try them all in minutes.
After :attr:`PinGuard.max_failures` wrong PINs in a row every attempt — right or wrong — is
refused for :attr:`PinGuard.lockout` seconds. The counter is global, not per address: on a LAN
addresses are cheap to change.
"""

from __future__ import annotations

import hashlib
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


# --- proving identity ---------------------------------------------------------------------------
#
# mDNS records are not authenticated: anyone on the LAN can advertise a paired node's id. Before a
# master sends a node's bearer token to an address, it asks that address to prove it holds the
# token's hash (which only the real agent keeps): ``POST /prove {token_id, nonce}`` answers
# ``{mac, address}`` with mac = HMAC-SHA256(key=sha256(token), nonce || node id || address).
# ``address`` is the IP the agent was reached at (its own end of the connection), so a rogue that
# relays the challenge to the real agent gets a proof for the real agent's address, not its own.

#: Bytes of the random nonce a master sends (hex on the wire).
PROOF_NONCE_MIN = 16
PROOF_NONCE_MAX = 64
#: Hex digits of the token id.
TOKEN_ID_HEX = 16


def token_id_for_hash(token_sha256: str) -> str:
    """The public id of a pairing, from the token's SHA-256 (hex).

    Derived rather than a prefix of the hash itself, so it reveals nothing about the proof key.
    """
    return hashlib.sha256(b"herd-token-id:" + bytes.fromhex(token_sha256)).hexdigest()[:TOKEN_ID_HEX]


def token_id(token: str) -> str:
    """The public id of the pairing ``token`` belongs to (what the master sends to ``/prove``)."""
    return token_id_for_hash(hash_token(token))


def proof_mac(token_sha256: str, nonce: bytes, node_id: str, address: str) -> str:
    """HMAC-SHA256 keyed by the token's hash over ``nonce || node_id || 0 || address`` (hex)."""
    msg = nonce + node_id.encode("utf-8") + b"\0" + address.encode("utf-8")
    return hmac.new(bytes.fromhex(token_sha256), msg, hashlib.sha256).hexdigest()


class ProofLimiter:
    """Caps ``/prove`` to ``rate`` answers per ``window`` seconds (global, like the PIN guard:
    addresses are cheap on a LAN). A proof only reveals MACs of nonces the caller picks under a key
    it does not know, but an unbounded endpoint would still be a free CPU sink."""

    def __init__(self, rate: int = 20, window: float = 10.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.window = window
        self._clock = clock
        self._times: list[float] = []

    def take(self) -> float:
        """0 if a proof may be answered now (and count it), else seconds until one may."""
        now = self._clock()
        self._times = [t for t in self._times if now - t < self.window]
        if len(self._times) >= self.rate:
            return self.window - (now - self._times[0])
        self._times.append(now)
        return 0.0
