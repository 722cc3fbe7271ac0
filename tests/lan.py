"""A simulated home LAN: network namespaces on a bridge, with real multicast (mDNS works).

Each :class:`Host` is a namespace with its own address; the bridge also gets an address so the
test process itself can reach the hosts. Names and the subnet are unique to the run, and
:meth:`Lan.close` removes everything (namespaces kill their processes' network with them).
Needs root; :func:`can_build_lan` says whether this machine can.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from dataclasses import dataclass, field


def can_build_lan() -> tuple[bool, str]:
    """(True, "") when namespaces can be made here, else (False, the reason)."""
    if os.name != "posix" or os.geteuid() != 0:
        return False, "the simulated LAN needs root (network namespaces)"
    if shutil.which("ip") is None:
        return False, "the simulated LAN needs iproute2 (`ip`)"
    return True, ""


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


@dataclass
class Host:
    """One simulated PC: namespace ``ns`` with address ``ip`` on link ``dev``."""

    name: str
    ns: str
    ip: str
    dev: str
    peer: str
    procs: list[subprocess.Popen] = field(default_factory=list)

    def cmd(self, argv: list[str]) -> list[str]:
        """``argv`` wrapped to run inside this host's namespace."""
        return ["ip", "netns", "exec", self.ns, *[str(a) for a in argv]]

    def popen(self, argv: list[str], **kw) -> subprocess.Popen:
        """Start a process on this host; it is stopped by :meth:`Lan.close`."""
        kw.setdefault("stdin", subprocess.DEVNULL)
        proc = subprocess.Popen(self.cmd(argv), **kw)
        self.procs.append(proc)
        return proc

    def run(self, argv: list[str], **kw) -> subprocess.CompletedProcess:
        """Run a process on this host to completion."""
        kw.setdefault("capture_output", True)
        kw.setdefault("text", True)
        kw.setdefault("stdin", subprocess.DEVNULL)
        return subprocess.run(self.cmd(argv), **kw)

    def link(self, up: bool) -> None:
        """Plug or unplug this host's cable (the bridge-side end of its veth)."""
        _ip("link", "set", self.peer, "up" if up else "down")

    def add_addresses(self, count: int, first: int = 100) -> list[str]:
        """Give this host ``count`` more addresses on its link (``<subnet>.first`` on): one
        device that speaks from many addresses, as an attacker can. Returns them."""
        subnet = self.ip.rsplit(".", 1)[0]
        added = []
        for i in range(first, first + count):
            ip = f"{subnet}.{i}"
            _ip("-n", self.ns, "addr", "add", f"{ip}/24", "dev", self.dev)
            added.append(ip)
        return added

    def limit_rate(self, rate: str = "100mbit") -> None:
        """Shape this host's outgoing traffic with a token bucket (netem is not available)."""
        subprocess.run(["ip", "netns", "exec", self.ns, "tc", "qdisc", "replace", "dev", self.dev, "root",
                        "tbf", "rate", rate, "burst", "32kbit", "latency", "400ms"], check=True)


class Lan:
    """A bridge plus hosts. Use as a context manager or call :meth:`close`."""

    def __init__(self, names: list[str]) -> None:
        tag = f"{os.getpid() % 10000:04d}{random.randrange(100):02d}"
        self.bridge = f"hb{tag}"
        self.subnet = f"10.{random.randrange(200, 250)}.{random.randrange(1, 250)}"
        self.bridge_ip = f"{self.subnet}.254"
        self.hosts: dict[str, Host] = {}
        try:
            _ip("link", "add", self.bridge, "type", "bridge")
            _ip("link", "set", self.bridge, "up")
            _ip("addr", "add", f"{self.bridge_ip}/24", "dev", self.bridge)
            for i, name in enumerate(names, start=1):
                ns = f"h{tag}{name}"[:15]
                dev, peer = f"v{tag}{i}"[:15], f"p{tag}{i}"[:15]
                _ip("netns", "add", ns)
                _ip("link", "add", dev, "type", "veth", "peer", "name", peer)
                _ip("link", "set", peer, "master", self.bridge)
                _ip("link", "set", peer, "up")
                _ip("link", "set", dev, "netns", ns)
                _ip("-n", ns, "link", "set", dev, "up")
                _ip("-n", ns, "link", "set", "lo", "up")
                ip = f"{self.subnet}.{i}"
                _ip("-n", ns, "addr", "add", f"{ip}/24", "dev", dev)
                # mDNS goes to 224.0.0.251; make sure the LAN link carries it.
                _ip("-n", ns, "route", "add", "224.0.0.0/4", "dev", dev)
                self.hosts[name] = Host(name, ns, ip, dev, peer)
        except BaseException:
            self.close()
            raise

    def __getitem__(self, name: str) -> Host:
        return self.hosts[name]

    def __enter__(self) -> "Lan":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Stop every process started on a host, then remove namespaces, links and the bridge."""
        for host in self.hosts.values():
            for p in host.procs:
                if p.poll() is None:
                    p.terminate()
            for p in host.procs:
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(timeout=5)
        for host in self.hosts.values():
            subprocess.run(["ip", "link", "del", host.peer], capture_output=True)
            subprocess.run(["ip", "netns", "del", host.ns], capture_output=True)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)
        self.hosts.clear()
