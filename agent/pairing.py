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

Guessing is bounded, and nobody can deny the owner a pairing (#25; the argument in full is in
``docs/security.md``):

* a PIN has :data:`agent.protocol.PIN_DIGITS` (10) digits, is accepted only for :data:`PIN_TTL`
  seconds after ``herd-agent pin`` showed it (:class:`PinFile`), and takes at most
  :data:`GUESSES_PER_PIN` (10 000) attempts in all: a guessing attacker's chance is at most
  10 000 / 10¹⁰ = 10⁻⁶ per PIN shown;
* attempts are admitted at most :data:`ATTEMPT_RATE` a second for all sources together
  (:class:`AttemptGate`), so one window of :data:`PIN_TTL` seconds takes at most
  :data:`WINDOW_ATTEMPTS` (6 020) of them, fewer than the cap: a flood can never use up the PIN
  the owner is typing. Showing the PIN again keeps it only while its next window cannot reach the
  cap either (:data:`KEEP_PIN_BELOW`); otherwise a fresh PIN is shown;
* the gate serves sources in turn — first come, first served, one waiting attempt per source — so
  an attacker with many addresses delays the owner's attempt by at most one attempt per address
  (50 addresses: 2.5 s), never shuts it out;
* each source (an IPv4 address, an IPv6 /64) backs off exponentially after a failed attempt
  (:class:`PeerBackoff`), so a flood from one host costs it time and not the others.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import ipaddress
import json
import secrets
import time
from collections import OrderedDict, deque
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from spake2 import SPAKE2_A, SPAKE2_B
from spake2.spake2 import SPAKEError

from agent import protocol as P
from agent.files import write_atomic

#: Seconds a shown PIN is accepted.
PIN_TTL = 300.0
#: Attempts (started exchanges) one PIN takes in all: 10⁻⁶ of the 10¹⁰ PINs.
GUESSES_PER_PIN = 10_000
#: Attempts admitted per second, all sources together, and the burst (:class:`AttemptGate`).
ATTEMPT_RATE = 20.0
ATTEMPT_BURST = 20
#: The most attempts one window of PIN_TTL seconds can take: below GUESSES_PER_PIN.
WINDOW_ATTEMPTS = int(ATTEMPT_BURST + ATTEMPT_RATE * PIN_TTL)
#: ``herd-agent pin`` shows the current PIN again only while it has had fewer attempts than this.
KEEP_PIN_BELOW = GUESSES_PER_PIN - WINDOW_ATTEMPTS
#: Seconds an attempt may wait for its turn at the gate before it is refused (429).
GATE_WAIT = 10.0
#: Sources waiting at the gate at once (more are refused at once).
GATE_QUEUE = 1024
#: Seconds an unfinished exchange is kept.
SESSION_TTL = 30.0
#: Unfinished exchanges kept at once (oldest dropped first); more than the gate admits in
#: SESSION_TTL, so a flood never pushes out the owner's exchange before its second step.
MAX_SESSIONS = int(ATTEMPT_BURST + ATTEMPT_RATE * SESSION_TTL) + 64
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


def format_pin(pin: str) -> str:
    """A PIN as people read it: ``12345 67890``."""
    half = (len(pin) + 1) // 2
    return f"{pin[:half]} {pin[half:]}"


def normalise_pin(text: str) -> str:
    """What a person typed (spaces and dashes anywhere) → the PIN's digits."""
    return "".join(ch for ch in str(text) if ch not in " -\t")


def source_key(address: str) -> str:
    """Who an attempt is counted against: an IPv4 address, or an IPv6 address's /64 (a host
    picks any address in its /64 at will)."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is None:
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip.ipv4_mapped or ip) if isinstance(ip, ipaddress.IPv6Address) else str(ip)


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
        """Show a PIN: a fresh one, or the current one with its time renewed (only while its
        next window cannot reach :data:`GUESSES_PER_PIN`). Returns it."""
        d = self._read()
        pin = self.current()
        if pin is None or int(d.get("guesses", 0)) >= KEEP_PIN_BELOW:
            pin = new_pin()
        guesses = int(d.get("guesses", 0)) if d.get("pin") == pin else 0
        self._write({"pin": pin, "shown_at": self._clock(), "guesses": guesses})
        return pin

    def guesses(self) -> int:
        """Attempts the current PIN has had."""
        return int(self._read().get("guesses", 0))

    def seconds_left(self) -> float:
        d = self._read()
        if self.current() is None:
            return 0.0
        return max(0.0, PIN_TTL - (self._clock() - float(d["shown_at"])))

    def count_guess(self, n: int = 1) -> None:
        """``n`` more attempts against the current PIN (kept in the file: a restart of the agent
        does not reset them)."""
        d = self._read()
        if d:
            d["guesses"] = int(d.get("guesses", 0)) + n
            self._write(d)

    def consume(self) -> None:
        """The PIN paired a master: it pairs no other."""
        self._write({"used": True})

    def _write(self, d: dict) -> None:
        write_atomic(self.path, json.dumps(d).encode("utf-8"), mode=0o600)


class AttemptGate:
    """At most :data:`ATTEMPT_RATE` attempts a second (burst :data:`ATTEMPT_BURST`) for all
    sources together, served in turn: an attempt that finds no token waits in line, first come
    first served, with at most one waiting attempt per source (a second from the same source is
    refused at once). So a flood from many addresses makes the owner wait at most one attempt per
    address, and the number of attempts in any window is bounded.

    Attributes:
        refused: attempts turned away (the source already waiting, the line full, a long wait).
        admitted: attempts let through.
    """

    def __init__(self, rate: float = ATTEMPT_RATE, burst: int = ATTEMPT_BURST, *,
                 max_wait: float = GATE_WAIT, max_queue: int = GATE_QUEUE,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.burst = burst
        self.max_wait = max_wait
        self.max_queue = max_queue
        self._clock = clock
        self._tokens = float(burst)
        self._at = clock()
        self._line: deque[tuple[str, asyncio.Future]] = deque()
        self._waiting: set[str] = set()
        self._timer: asyncio.TimerHandle | None = None
        self.refused = 0
        self.admitted = 0

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._at) * self.rate)
        self._at = now

    async def admit(self, source: str) -> bool:
        """Wait for ``source``'s turn; False when it is refused (see the class docstring)."""
        self._refill()
        if not self._line and self._tokens >= 1.0:
            self._tokens -= 1.0
            self.admitted += 1
            return True
        if source in self._waiting or len(self._line) >= self.max_queue:
            self.refused += 1
            return False
        fut = asyncio.get_running_loop().create_future()
        self._line.append((source, fut))
        self._waiting.add(source)
        self._schedule()
        try:
            await asyncio.wait_for(asyncio.shield(fut), self.max_wait)
        except asyncio.TimeoutError:
            if not fut.done():
                fut.cancel()
            self.refused += 1
            return False
        finally:
            self._waiting.discard(source)
        self.admitted += 1
        return True

    def _schedule(self) -> None:
        if self._timer is None and self._line:
            wait = max(0.0, (1.0 - self._tokens) / self.rate)
            self._timer = asyncio.get_running_loop().call_later(wait, self._serve)

    def _serve(self) -> None:
        self._timer = None
        self._refill()
        while self._line and self._tokens >= 1.0:
            _source, fut = self._line.popleft()
            if fut.done():  # gave up waiting (or its connection went)
                continue
            self._tokens -= 1.0
            fut.set_result(None)
        self._schedule()


class PeerBackoff:
    """Exponential back-off per source (:func:`source_key`) after failed attempts."""

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
        self.gate = AttemptGate()
        self._cert = agent_cert_der
        self._clock = clock
        self._sessions: OrderedDict[str, _Session] = OrderedDict()

    async def start(self, peer: str, msg_a: bytes) -> tuple[str, bytes]:
        """Step 1: returns ``(session id, B)``. Raises PairingLocked, NoPin or BadExchange.

        Waits for the source's turn at the gate (:class:`AttemptGate`). Counts as an attempt for
        the source (its guess is fixed in ``A``): a session that is never finished costs the same
        back-off as a wrong PIN.
        """
        source = source_key(peer)
        wait = self.backoff.wait(source)
        if wait > 0:
            raise PairingLocked(wait)
        if self.pins.current() is None:
            raise NoPin()
        if not await self.gate.admit(source):
            raise PairingLocked(1.0 / self.gate.rate + 1.0)
        pin = self.pins.current()  # read again: it may have been used or expired meanwhile
        if pin is None:
            raise NoPin()
        self._expire()
        spake = SPAKE2_B(pin.encode("ascii"), idA=ID_MASTER, idB=ID_AGENT)
        msg_b = spake.start()
        try:
            key = spake.finish(msg_a)
        except (SPAKEError, ValueError) as exc:
            raise BadExchange(f"msg is not a usable PAKE message ({exc})") from None
        self.backoff.failed(source)     # until finished with the right PIN
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
        self.backoff.succeeded(source_key(peer))
        self.pins.consume()
        return agent_mac(s.key, t, self._cert)

    def _expire(self) -> None:
        now = self._clock()
        for sid in [s for s, v in self._sessions.items() if now - v.created > SESSION_TTL]:
            del self._sessions[sid]
