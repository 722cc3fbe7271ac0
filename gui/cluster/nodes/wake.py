"""Waking a sleeping worker PC by Wake-on-LAN (#36).

Each paired agent reports, in its authenticated ``/status``, the MAC address of the interface
this master reaches it on and that subnet's broadcast address (``wake``); discovery keeps them
with the pairing (:meth:`~gui.cluster.nodes.records.PairingStore.set_wake`) every time it reads
the node, so they are there when the node is asleep and answers nothing. Waking it is sending the
magic packet — six 0xFF bytes, then its MAC sixteen times — to that broadcast address on UDP
ports 9 and 7 (the two that network cards and routers listen for by convention).

The PC wakes only if its firmware and OS allow it (BIOS/UEFI "Wake on LAN", and on Windows the
network adapter's "Allow this device to wake the computer"): see the README.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import re
import socket
from dataclasses import dataclass

log = logging.getLogger(__name__)

#: The UDP ports a magic packet is sent to (the "discard" and "echo" ports).
WAKE_PORTS = (9, 7)

_MAC = re.compile(r"^[0-9a-f]{2}([:-]?)[0-9a-f]{2}(\1[0-9a-f]{2}){4}$", re.IGNORECASE)


def parse_mac(text: str) -> bytes:
    """The six bytes of a MAC address written ``aa:bb:cc:dd:ee:ff``, with dashes, or bare;
    ValueError naming the text otherwise."""
    text = text.strip()
    if not _MAC.match(text):
        raise ValueError(f"{text[:40]!r} is not a MAC address (six pairs of hex digits, like aa:bb:cc:dd:ee:ff)")
    return bytes.fromhex(re.sub("[:-]", "", text))


def magic_packet(mac: str) -> bytes:
    """The Wake-on-LAN magic packet for ``mac``: 6 × 0xFF, then the MAC 16 times (102 bytes)."""
    return b"\xff" * 6 + parse_mac(mac) * 16


@dataclass(frozen=True)
class WakeTarget:
    """Where to send a node's magic packet.

    Attributes:
        mac: its MAC address, ``aa:bb:cc:dd:ee:ff``.
        broadcast: the broadcast address of its subnet (IPv4).
        api: ``host:port`` of its API where the master last reached it ("" if unknown): where
            to ask whether it woke up.
    """

    mac: str
    broadcast: str
    api: str = ""

    @classmethod
    def from_status(cls, status: object, api: str = "") -> "WakeTarget | None":
        """The target an agent's ``/status`` reports (its ``wake`` part), read at ``api``
        (``host:port``), or None when it reports none or something unusable."""
        wake = status.get("wake") if isinstance(status, dict) else None
        if not isinstance(wake, dict):
            return None
        return cls.from_json({**wake, "api": api})

    @classmethod
    def from_json(cls, data: object) -> "WakeTarget | None":
        """A target from ``{"mac", "broadcast"}`` (as stored or reported), or None if unusable."""
        if not isinstance(data, dict):
            return None
        mac, broadcast, api = data.get("mac"), data.get("broadcast"), data.get("api", "")
        if not isinstance(mac, str) or not isinstance(broadcast, str) or not isinstance(api, str):
            return None
        try:
            parse_mac(mac)
            ipaddress.IPv4Address(broadcast)
        except ValueError:
            return None
        return cls(mac=mac.lower().replace("-", ":"), broadcast=broadcast, api=api)

    def to_json(self) -> dict:
        """``{"mac", "broadcast", "api"}``, as the pairing file keeps it."""
        return {"mac": self.mac, "broadcast": self.broadcast, "api": self.api}


def send_wake(target: WakeTarget, ports: tuple[int, ...] = WAKE_PORTS) -> int:
    """Send the magic packet for ``target`` to its broadcast address on each of ``ports``;
    returns how many were sent. OSError (with the OS's reason) when none could be."""
    packet = magic_packet(target.mac)
    sent, last_error = 0, None
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
        for port in ports:
            try:
                sock.sendto(packet, (target.broadcast, port))
                sent += 1
            except OSError as exc:
                last_error = exc
    if not sent and last_error is not None:
        raise last_error
    return sent


def remember_wake(store, node_id: str, status: object, api: str = "") -> None:
    """Keep the MAC and broadcast address a paired node's ``/status`` (read at ``api``,
    ``host:port``) reports with its pairing in ``store`` (a
    :class:`~gui.cluster.nodes.records.PairingStore`): what the master does each time it reads
    the node, so the address is there once the node sleeps."""
    target = WakeTarget.from_status(status, api)
    if target is None:
        return
    try:
        store.set_wake(node_id, target)
    except (ValueError, OSError) as exc:  # an unreadable pairing file is reported where it is read
        log.debug("could not keep the wake address of %s: %s", node_id, exc)


#: Seconds between magic packets while waiting for a node to wake (a UDP packet may be lost).
RESEND_S = 10.0


async def wake_and_wait(target: WakeTarget, answers, timeout: float, *, interval: float = 1.0,
                        progress=None) -> float | None:
    """Send ``target``'s magic packet, again every :data:`RESEND_S` seconds, until ``answers()``
    (a coroutine function: does the node answer now?) is true or ``timeout`` seconds passed.

    ``progress(seconds waited)`` is called after each unanswered try. Returns the seconds it took,
    or None when the node did not answer in time. OSError when no packet could be sent at all.
    """
    loop = asyncio.get_running_loop()
    started = loop.time()
    sent_at = None
    while True:
        now = loop.time()
        if sent_at is None or now - sent_at >= RESEND_S:
            await asyncio.to_thread(send_wake, target)
            sent_at = now
        if await answers():
            return loop.time() - started
        waited = loop.time() - started
        if waited >= timeout:
            return None
        if progress is not None:
            progress(waited)
        await asyncio.sleep(min(interval, max(0.0, timeout - waited)))


def wake_node(store, node_id: str) -> WakeTarget:
    """Send the magic packet of the paired node ``node_id`` (in ``store``, a
    :class:`~gui.cluster.nodes.records.PairingStore`) and return where it went: what the node
    card's *Wake* button does (#36). ValueError in words when its MAC is not known; OSError when
    the packet could not be sent."""
    from agent.i18n import translate
    target = store.wake_target(node_id)
    if target is None:
        raise ValueError(translate("Wake", "The MAC address of this node is not known yet: herd learns it when "
                                           "it reads the node while it is awake."))
    send_wake(target)
    return target


def waking_message(name: str, waited: float) -> str:
    """What the user reads while ``name`` is being woken: "Waking gaming-pc… 12 s" (#36)."""
    from agent.i18n import translate
    return translate("Wake", "Waking {name}… {seconds} s").format(name=name, seconds=int(waited))


async def wake_paired(store, node_ids, timeout: float, *, identity, progress=None, interval: float = 1.0) -> dict:
    """Wake those of the paired nodes ``node_ids`` (in ``store``, a
    :class:`~gui.cluster.nodes.records.PairingStore`) that sleep, and wait for them, at most
    ``timeout`` seconds in all: what Start and ``herd up`` do before they look for the plan's
    nodes (#36).

    Only a node whose MAC and last address are known and that does not answer there now (with
    its pinned key, asked as ``identity``, this master's) is woken; the others are left as they
    are, so an awake node costs one ping and a node never read awake keeps today's behaviour
    (the launch goes on without it, or says it is missing). ``progress(name, seconds waited)``
    is called while waiting. Returns ``{node id: seconds it took to answer, or None if it did
    not}`` for the nodes it woke.
    OSError when no packet could be sent at all.
    """
    from agent.client import AgentClient, AgentError
    names = store.names()
    clients = {}
    for node_id in node_ids:
        target = store.wake_target(node_id)
        if target is not None and target.api:
            clients[node_id] = (target, AgentClient(f"https://{target.api}", timeout=2.0, identity=identity,
                                                    pinned=store.get(node_id), node_id=node_id))

    async def answers(node_id: str) -> bool:
        try:
            return (await clients[node_id][1].ping()).get("id") in (None, node_id)
        except AgentError:
            return False

    async def wake_one(node_id: str) -> float | None:
        name = names.get(node_id) or node_id
        return await wake_and_wait(clients[node_id][0], lambda: answers(node_id), timeout, interval=interval,
                                   progress=(lambda s: progress(name, s)) if progress else None)

    try:
        awake = await asyncio.gather(*(answers(n) for n in clients))
        asleep = [n for n, up in zip(clients, awake) if not up]
        took = await asyncio.gather(*(wake_one(n) for n in asleep))
        return dict(zip(asleep, took))
    finally:
        await asyncio.gather(*(c.aclose() for _, c in clients.values()), return_exceptions=True)
