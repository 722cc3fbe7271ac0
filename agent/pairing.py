"""Pairing by PAKE (SPAKE2): a master and an agent that share the PIN shown on the agent agree on a
key and swap their long-term certificates under it. The PIN never crosses the wire.

The exchange (both messages inside TLS, but its result does not depend on TLS):

1. master → agent ``pair/start {msg: A}``; agent → master ``{session, msg: B}``. ``A`` and ``B``
   are SPAKE2 messages (the PIN blinds them); each side derives the key ``K``. Nothing the agent
   sends here depends on ``K``, so a passive or relaying attacker can test no guess offline.
2. master → agent ``pair/finish {session, cert: Cm, mac: Mm}`` with
   ``Mm = HMAC(K, "master" ‖ T)`` and ``T = SHA-256(transcript of A, B, Cm)``. The agent checks
   ``Mm``: a wrong PIN (or a relay that swapped ``Cm`` for its own) fails here, and the session is
   gone — one online guess per session. On success it pins ``Cm`` and answers
   ``{cert: Ca, mac: Ma}`` with ``Ma = HMAC(K, "agent" ‖ T ‖ SHA-256(Ca))``; the master checks
   ``Ma`` and pins ``Ca``.

A relaying rogue therefore learns nothing and can make no pairing of its own: it cannot change a
certificate without ``K``, and ``K`` needs the PIN.

Guessing is bounded three ways: a PIN is accepted only for :data:`PIN_TTL` seconds after
``herd-agent pin`` showed it (:class:`PinFile`); each address backs off exponentially after a
failed attempt (:class:`PeerBackoff`, so one host's flood does not lock out another); and a PIN
takes at most :data:`GUESSES_PER_PIN` attempts in all, after which it must be shown anew.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from spake2 import SPAKE2_A, SPAKE2_B
from spake2.spake2 import SPAKEError

from agent import protocol as P
from agent.files import write_atomic

#: Seconds a shown PIN is accepted.
PIN_TTL = 300.0
#: Attempts (started exchanges) one PIN takes in all before it must be shown again.
GUESSES_PER_PIN = 20
#: Seconds an unfinished exchange is kept.
SESSION_TTL = 30.0
#: Unfinished exchanges kept at once (oldest dropped first).
MAX_SESSIONS = 32
#: Back-off of one address after its n-th failed attempt: min(BASE * 2**(n-1), MAX) seconds.
BACKOFF_BASE = 1.0
BACKOFF_MAX = 300.0
#: Addresses whose back-off is remembered (the oldest are forgotten first).
MAX_PEERS = 4096

ID_MASTER = b"llama-herd master"
ID_AGENT = b"llama-herd agent"
PIN_FILE = "pin.json"


class PairingLocked(Exception):
    """This address must wait ``retry_after`` seconds before its next attempt."""

    def __init__(self, retry_after: float) -> None:
        super().__init__(f"too many failed pairing attempts from this address; retry in {retry_after:.0f} s")
        self.retry_after = retry_after


class WrongPin(Exception):
    """The key confirmation failed: the PIN was wrong (or someone tampered with the exchange)."""


class NoPin(Exception):
    """No PIN is shown on the agent now (never shown, expired, used up)."""

    def __init__(self) -> None:
        super().__init__("no pairing PIN is shown on this node now: run `herd-agent pin` on it "
                         f"(a PIN is accepted for {PIN_TTL / 60:.0f} minutes)")


class BadExchange(Exception):
    """A malformed or unknown exchange (bad message, unknown or expired session)."""


def _lp(*parts: bytes) -> bytes:
    return b"".join(len(p).to_bytes(4, "big") + p for p in parts)


def transcript(msg_a: bytes, msg_b: bytes, master_cert_der: bytes) -> bytes:
    """``T``: the hash both MACs cover (see the module docstring)."""
    return hashlib.sha256(_lp(b"llama-herd pair v1", msg_a, msg_b, master_cert_der)).digest()


def master_mac(key: bytes, t: bytes) -> bytes:
    return hmac.new(key, b"master" + t, hashlib.sha256).digest()


def agent_mac(key: bytes, t: bytes, agent_cert_der: bytes) -> bytes:
    return hmac.new(key, b"agent" + t + hashlib.sha256(agent_cert_der).digest(), hashlib.sha256).digest()


def valid_pin_text(pin) -> bool:
    return isinstance(pin, str) and pin.isascii() and pin.isdigit() and len(pin) == P.PIN_DIGITS


def new_pin() -> str:
    """A fresh random pairing PIN."""
    return f"{secrets.randbelow(10 ** P.PIN_DIGITS):0{P.PIN_DIGITS}d}"


# --- the master's side ------------------------------------------------------------------------

class MasterExchange:
    """The master's half of one exchange: ``start()`` → A; ``finish(B)`` → the MAC to send;
    ``verify(agent_cert_der, mac)`` checks the agent's answer."""

    def __init__(self, pin: str, master_cert_der: bytes) -> None:
        self._spake = SPAKE2_A(pin.encode("ascii"), idA=ID_MASTER, idB=ID_AGENT)
        self._cert = master_cert_der
        self.msg_a = self._spake.start()
        self._key: bytes | None = None
        self._t: bytes | None = None

    def finish(self, msg_b: bytes) -> bytes:
        try:
            self._key = self._spake.finish(msg_b)
        except (SPAKEError, ValueError) as exc:
            raise BadExchange(f"the agent's PAKE message is unusable ({exc})") from None
        self._t = transcript(self.msg_a, msg_b, self._cert)
        return master_mac(self._key, self._t)

    def verify(self, agent_cert_der: bytes, mac: bytes) -> bool:
        """True when the agent's MAC proves it knew the PIN and sent ``agent_cert_der``."""
        assert self._key is not None and self._t is not None
        return hmac.compare_digest(agent_mac(self._key, self._t, agent_cert_der), mac)


# --- the agent's side -------------------------------------------------------------------------

@dataclass
class _Session:
    spake: SPAKE2_B
    msg_a: bytes
    msg_b: bytes
    key: bytes
    peer: str
    created: float


class PinFile:
    """The PIN shown now and when, in ``<state dir>/pin.json`` (owner-only).

    ``herd-agent pin`` (another process) writes it; the running agent reads it at each attempt,
    so showing a PIN needs no call into the agent. The file never holds more than the current
    PIN; a used or expired PIN is worthless.
    """

    def __init__(self, folder: Path, clock: Callable[[], float] = time.time) -> None:
        self.path = Path(folder) / PIN_FILE
        self._clock = clock

    def _read(self) -> dict:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def current(self) -> str | None:
        """The PIN if one is shown and still accepted, else None."""
        d = self._read()
        pin, shown = d.get("pin"), d.get("shown_at")
        if not valid_pin_text(pin) or not isinstance(shown, (int, float)):
            return None
        if d.get("used") or d.get("guesses", 0) >= GUESSES_PER_PIN:
            return None
        age = self._clock() - float(shown)
        return pin if 0 <= age <= PIN_TTL else None

    def show(self) -> str:
        """Show a PIN: a fresh one, or the current one with its time renewed. Returns it."""
        d = self._read()
        pin = self.current() or new_pin()
        guesses = d.get("guesses", 0) if d.get("pin") == pin else 0
        self._write({"pin": pin, "shown_at": self._clock(), "guesses": guesses})
        return pin

    def seconds_left(self) -> float:
        d = self._read()
        if self.current() is None:
            return 0.0
        return max(0.0, PIN_TTL - (self._clock() - float(d["shown_at"])))

    def count_guess(self) -> None:
        d = self._read()
        if d:
            d["guesses"] = int(d.get("guesses", 0)) + 1
            self._write(d)

    def consume(self) -> None:
        """The PIN paired a master: it pairs no other."""
        self._write({"used": True})

    def _write(self, d: dict) -> None:
        write_atomic(self.path, json.dumps(d).encode("utf-8"), mode=0o600)


class PeerBackoff:
    """Exponential back-off per address after failed attempts."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._peers: OrderedDict[str, tuple[int, float]] = OrderedDict()  # addr -> (failures, until)

    def wait(self, peer: str) -> float:
        """Seconds ``peer`` must still wait (0 = may try now)."""
        _n, until = self._peers.get(peer, (0, 0.0))
        return max(0.0, until - self._clock())

    def failed(self, peer: str) -> None:
        n, _until = self._peers.pop(peer, (0, 0.0))
        n += 1
        self._peers[peer] = (n, self._clock() + min(BACKOFF_BASE * 2 ** (n - 1), BACKOFF_MAX))
        while len(self._peers) > MAX_PEERS:
            self._peers.popitem(last=False)

    def succeeded(self, peer: str) -> None:
        self._peers.pop(peer, None)


class AgentPairing:
    """The agent's half: checks the PIN window and back-off, runs exchanges.

    Args:
        pins: where the shown PIN is read from.
        agent_cert_der: this agent's certificate (what a successful exchange hands out).
    """

    def __init__(self, pins: PinFile, agent_cert_der: bytes,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.pins = pins
        self.backoff = PeerBackoff(clock)
        self._cert = agent_cert_der
        self._clock = clock
        self._sessions: OrderedDict[str, _Session] = OrderedDict()

    def start(self, peer: str, msg_a: bytes) -> tuple[str, bytes]:
        """Step 1: returns ``(session id, B)``. Raises PairingLocked, NoPin or BadExchange.

        Counts as an attempt for ``peer`` (its guess is fixed in ``A``): a session that is never
        finished costs the same back-off as a wrong PIN.
        """
        wait = self.backoff.wait(peer)
        if wait > 0:
            raise PairingLocked(wait)
        pin = self.pins.current()
        if pin is None:
            raise NoPin()
        self._expire()
        spake = SPAKE2_B(pin.encode("ascii"), idA=ID_MASTER, idB=ID_AGENT)
        msg_b = spake.start()
        try:
            key = spake.finish(msg_a)
        except (SPAKEError, ValueError) as exc:
            raise BadExchange(f"msg is not a usable PAKE message ({exc})") from None
        self.backoff.failed(peer)     # until finished with the right PIN
        self.pins.count_guess()
        # One open exchange per address: a newer one replaces it.
        for sid in [s for s, v in self._sessions.items() if v.peer == peer]:
            del self._sessions[sid]
        sid = secrets.token_hex(16)
        self._sessions[sid] = _Session(spake, msg_a, msg_b, key, peer, self._clock())
        while len(self._sessions) > MAX_SESSIONS:
            self._sessions.popitem(last=False)
        return sid, msg_b

    def finish(self, peer: str, sid: str, master_cert_der: bytes, mac: bytes) -> bytes:
        """Step 2: checks the master's MAC; returns the agent's MAC over its certificate.

        Raises WrongPin (the session is gone either way) or BadExchange. The caller pins the
        master's certificate only after this returned.
        """
        self._expire()
        s = self._sessions.pop(sid, None)
        if s is None or s.peer != peer:
            raise BadExchange("unknown or expired pairing session; start again")
        t = transcript(s.msg_a, s.msg_b, master_cert_der)
        if not hmac.compare_digest(master_mac(s.key, t), mac):
            raise WrongPin("wrong PIN (or the exchange was tampered with)")
        self.backoff.succeeded(peer)
        self.pins.consume()
        return agent_mac(s.key, t, self._cert)

    def _expire(self) -> None:
        now = self._clock()
        for sid in [s for s, v in self._sessions.items() if now - v.created > SESSION_TTL]:
            del self._sessions[sid]
