"""Advertising the agent over mDNS (DNS-SD type :data:`agent.protocol.SERVICE_TYPE`).

One :class:`~zeroconf.asyncio.AsyncZeroconf` per agent. The TXT record carries the ports and the
worker's state; state changes are coalesced (a master connecting makes the worker flip
``ready``/``busy`` several times within a second) and then re-announced. On close a goodbye
(TTL 0) is sent so browsers drop the node at once instead of after the record's TTL.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket

import psutil
from zeroconf import IPVersion, NonUniqueNameException
from zeroconf.asyncio import AsyncServiceInfo, AsyncZeroconf

from agent import protocol as P
from agent.mdns_interfaces import every_usable_interface

log = logging.getLogger("herd.agent.mdns")

#: Seconds state changes are gathered before one TXT update is announced.
UPDATE_DELAY = 0.3


def lan_addresses() -> list[str]:
    """Every non-loopback IPv4 address of this machine, for the A records.

    Only IPv4: the RPC path is IPv4-only (``ggml-rpc-server -H`` takes a numeric IPv4 address),
    and a master that paired over IPv6 would then be refused by the relay on IPv4. The
    announcements themselves still go out over IPv6 multicast too where the host has it.
    """
    out = []
    for addrs in psutil.net_if_addrs().values():
        for a in addrs:
            if a.family != socket.AF_INET:
                continue
            try:
                ip = ipaddress.IPv4Address(a.address)
            except ValueError:
                continue
            if not (ip.is_loopback or ip.is_unspecified or ip.is_link_local):
                out.append(str(ip))
    return out


class Advertiser:
    """Registers this node's service and keeps its TXT record current.

    Args:
        name: friendly node name (the instance name; zeroconf appends " (2)" on a clash).
        port: the API port (the SRV record's port).
        txt: initial TXT properties.
        interfaces: IPs to advertise on and as; empty = every interface (IPv4 and IPv6
            multicast) with every IPv4 address of the host.
    """

    def __init__(self, name: str, port: int, txt: dict[str, str], interfaces: list[str]) -> None:
        self.name = P.instance_name(name)
        self.port = port
        self.txt = dict(txt)
        self.interfaces = list(interfaces)
        self._zc: AsyncZeroconf | None = None
        self._info: AsyncServiceInfo | None = None
        self._pending: asyncio.TimerHandle | None = None
        self._update_task: asyncio.Task | None = None

    @property
    def registered_name(self) -> str | None:
        """The full service name once registered (may differ from ``name`` after a clash)."""
        return self._info.name if self._info else None

    async def start(self) -> None:
        """Create the Zeroconf instance and register (probing first, as RFC 6762 asks)."""
        if self.interfaces:
            addresses = self.interfaces
            has_v6 = any(ipaddress.ip_address(a).version == 6 for a in addresses)
            has_v4 = any(ipaddress.ip_address(a).version == 4 for a in addresses)
            ip_version = IPVersion.All if has_v4 and has_v6 else (IPVersion.V6Only if has_v6 else IPVersion.V4Only)
            interfaces = addresses
        else:
            addresses = lan_addresses()
            interfaces, ip_version = every_usable_interface()  # no ::1 socket (#37)
        self._zc = AsyncZeroconf(interfaces=interfaces, ip_version=ip_version)
        self._info = AsyncServiceInfo(
            P.SERVICE_TYPE, f"{self.name}.{P.SERVICE_TYPE}", port=self.port, properties=self.txt,
            parsed_addresses=addresses, server=f"{_host_label(self.name)}.local.")
        try:
            await self._zc.async_register_service(self._info, allow_name_change=True)
        except NonUniqueNameException:
            log.error("mDNS: the name %r is taken on this network", self.name)
            raise
        log.info("mDNS: advertising %s on %s", self._info.name, ", ".join(addresses) or "no address")

    def update(self, txt: dict[str, str]) -> None:
        """Schedule a TXT update (coalesced over :data:`UPDATE_DELAY`)."""
        if txt == self.txt:
            return
        self.txt = dict(txt)
        if self._pending is None and self._info is not None:
            loop = asyncio.get_running_loop()
            self._pending = loop.call_later(UPDATE_DELAY, self._flush)

    def _flush(self) -> None:
        self._pending = None
        if self._zc is None or self._info is None:
            return
        self._info = AsyncServiceInfo(
            P.SERVICE_TYPE, self._info.name, port=self.port, properties=self.txt,
            parsed_addresses=self._info.parsed_addresses(), server=self._info.server)
        self._update_task = asyncio.get_running_loop().create_task(self._announce(self._info))

    async def _announce(self, info: AsyncServiceInfo) -> None:
        try:
            await self._zc.async_update_service(info)
        except Exception as exc:  # an update failing must not take the agent down
            log.warning("mDNS: TXT update failed: %s", exc)

    async def close(self) -> None:
        """Send the goodbye and close the Zeroconf instance."""
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None
        if self._update_task is not None:
            await asyncio.wait([self._update_task], timeout=1.0)
        if self._zc is not None:
            try:
                if self._info is not None:
                    goodbye = await asyncio.wait_for(self._zc.async_unregister_service(self._info), 2.0)
                    await asyncio.wait_for(goodbye, 2.0)
            except Exception as exc:
                log.warning("mDNS: goodbye failed: %s", exc)
            await self._zc.async_close()
            self._zc = None


def _host_label(name: str) -> str:
    """A host label for the SRV target: letters, digits and dashes only."""
    label = "".join(c if c.isascii() and c.isalnum() else "-" for c in name).strip("-")[:50]
    return label or "herd-node"
