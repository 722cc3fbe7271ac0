"""Which of this host's interfaces zeroconf may use when it is to use "all of them" (#37).

zeroconf's ``InterfaceChoice.All`` with IPv6 opens a socket on every interface that has an IPv6
address, the loopback's ``::1`` included. Where no route carries IPv6 multicast out of such an
interface (always ``lo`` on Linux; every interface of a host without IPv6), zeroconf's first
send fails with "Network is unreachable" and it logs a Python traceback at start. Both programs
browse or advertise on every interface by default, so they ask here first: IPv4 on every
interface, as before, and IPv6 only on the interfaces that can send to the mDNS group; none
left means IPv4 only. One log line says what was left out.
"""

from __future__ import annotations

import logging
import socket

import ifaddr
from zeroconf import InterfaceChoice, IPVersion

log = logging.getLogger("herd.agent.mdns")

#: The mDNS group and port of IPv6 (RFC 6762).
MDNS_IPV6_GROUP = ("ff02::fb", 5353)

#: What zeroconf's ``interfaces`` takes: a choice, or addresses (IPv4) and indexes (IPv6).
Interfaces = InterfaceChoice | list[str | int]


def can_send_ipv6_multicast(index: int) -> bool:
    """True when the kernel has a route for the IPv6 mDNS group out of interface ``index``.

    A connected UDP socket makes the same route lookup a send would, and sends nothing.
    """
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as s:
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_IF, index)
            s.connect((*MDNS_IPV6_GROUP, 0, index))
    except OSError as exc:
        log.debug("mDNS: no IPv6 multicast out of interface %d: %s", index, exc.strerror or exc)
        return False
    return True


def every_usable_interface() -> tuple[Interfaces, IPVersion]:
    """zeroconf's ``interfaces`` and ``ip_version`` for "every interface of this host"."""
    adapters = ifaddr.get_adapters()
    with_ipv6 = [a for a in adapters if any(isinstance(ip.ip, tuple) for ip in a.ips)]
    ipv6_indexes = [a.index for a in with_ipv6 if a.index is not None and can_send_ipv6_multicast(a.index)]
    left_out = [a.nice_name for a in with_ipv6 if a.index not in ipv6_indexes]
    if not ipv6_indexes:
        if with_ipv6:
            log.info("mDNS over IPv4 only: no interface can send IPv6 multicast (%s)", ", ".join(left_out))
        return InterfaceChoice.All, IPVersion.V4Only
    if left_out:
        log.debug("mDNS over IPv6 leaves out %s: no IPv6 multicast route there", ", ".join(left_out))
    ipv4 = [ip.ip for a in adapters for ip in a.ips if isinstance(ip.ip, str)]
    return [*dict.fromkeys(ipv4), *ipv6_indexes], IPVersion.All
