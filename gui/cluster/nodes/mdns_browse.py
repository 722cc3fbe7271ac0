"""Browsing mDNS for herd agents: the half of discovery that listens to the network (#33).

:class:`MdnsBrowse` owns the zeroconf instance and its browser. Each record of the herd service
type is resolved and read (``agent.protocol.parse_txt``); a usable one is handed on as a *hint*
— the node id, the address to look at, the record as read — and :class:`Discovery` decides what
it stands for by asking the agent there (#25). A goodbye is handed on by the record's name.

Zeroconf callbacks never raise: whatever a rogue or broken advertiser sends is ignored.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
from collections.abc import Awaitable, Callable

from zeroconf import IPVersion, ServiceStateChange
from zeroconf.asyncio import AsyncServiceBrowser, AsyncServiceInfo, AsyncZeroconf

from agent import protocol as P
from agent.mdns_interfaces import every_usable_interface

log = logging.getLogger("gui.cluster.nodes.discovery")  # discovery's own log, as before the split

#: ``on_record(name, advert, host)``: a usable record ``name`` read as ``advert``, to be looked at
#: on ``host`` (its address that is chosen to reach it).
OnRecord = Callable[[str, P.NodeAdvert, str], Awaitable[None]]


class MdnsBrowse:
    """A continuous mDNS browse for herd agents, handing on what it hears.

    Args:
        interfaces: addresses of the interfaces to browse on; None browses on every interface
            that can (IPv6 only where the kernel routes the mDNS group out, #37).
        on_record: called (awaited in a task of its own) for every usable record added or changed.
        on_goodbye: called with the record's name when an advertiser says goodbye.
    """

    def __init__(self, interfaces: list[str] | None, on_record: OnRecord,
                 on_goodbye: Callable[[str], None]) -> None:
        self.interfaces = interfaces
        self._on_record = on_record
        self._on_goodbye = on_goodbye
        self._aiozc: AsyncZeroconf | None = None
        self._browser: AsyncServiceBrowser | None = None
        self._tasks: set[asyncio.Task] = set()

    async def start(self) -> None:
        """Open the zeroconf sockets and start browsing (again a no-op once started)."""
        if self._aiozc is not None:
            return
        if self.interfaces is None:
            ifaces, ipv = every_usable_interface()  # no ::1 socket and its traceback (#37)
        else:
            ifaces = self.interfaces
            ipv = IPVersion.All if any(":" in a for a in self.interfaces) else IPVersion.V4Only
        self._aiozc = AsyncZeroconf(interfaces=ifaces, ip_version=ipv)
        self._browser = AsyncServiceBrowser(self._aiozc.zeroconf, P.SERVICE_TYPE,
                                            handlers=[self._on_change])

    async def stop(self) -> None:
        """Stop browsing, end the records still being read, and close the zeroconf sockets."""
        for t in list(self._tasks):
            t.cancel()
        for t in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        if self._browser is not None:
            await self._browser.async_cancel()
            self._browser = None
        if self._aiozc is not None:
            await self._aiozc.async_close()
            self._aiozc = None

    def _on_change(self, zeroconf, service_type: str, name: str, state_change: ServiceStateChange) -> None:
        # Called by zeroconf on the event loop; must never raise.
        try:
            if state_change in (ServiceStateChange.Added, ServiceStateChange.Updated):
                task = asyncio.get_running_loop().create_task(self._read(service_type, name))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            elif state_change is ServiceStateChange.Removed:
                self._on_goodbye(name)
        except Exception:
            log.exception("ignored a zeroconf event for %r", name)

    async def _read(self, service_type: str, name: str) -> None:
        """Resolve record ``name`` and hand it on when it is a usable herd agent's."""
        try:
            if self._aiozc is None:
                return
            info = AsyncServiceInfo(service_type, name)
            if not await info.async_request(self._aiozc.zeroconf, 3000):
                return
            addresses = [a for a in info.parsed_addresses() if self.usable(a)]
            friendly = name[: -len(service_type) - 1] if name.endswith("." + service_type) else name
            advert = P.parse_txt(info.properties, name=friendly, addresses=addresses)
            host = pick_host(list(advert.addresses)) if advert else None
            if advert is None or host is None:
                log.debug("ignored mDNS record %r: not a usable herd agent", name)
                return
            await self._on_record(name, advert, host)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("ignored an unreadable mDNS record %r", name)

    def usable(self, address: str) -> bool:
        """Loopback addresses only make sense when browsing includes loopback: a record heard on
        a LAN interface that says 127.0.0.1 points at this machine, not at the advertiser."""
        try:
            if not ipaddress.ip_address(address.split("%", 1)[0]).is_loopback:
                return True
        except ValueError:
            return False
        if self.interfaces is None:
            return True
        return any(ipaddress.ip_address(i.split("%", 1)[0]).is_loopback for i in self.interfaces
                   if _is_ip(i))


def pick_host(addresses: list[str]) -> str | None:
    """The address to reach a node by: IPv4 first (simplest for ``--rpc``), then global IPv6."""
    v4 = [a for a in addresses if ":" not in a]
    if v4:
        return v4[0]
    v6 = [a for a in addresses if not ipaddress.ip_address(a).is_link_local]
    return v6[0] if v6 else None


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text.split("%", 1)[0])
        return True
    except ValueError:
        return False
