"""What this machine is (CPU, RAM, network cards) and how loaded it is right now.

Everything is read on demand: an idle agent samples nothing. Load rates (CPU %, network
bytes/s) are averaged between two successive calls of :meth:`LoadMeter.sample`.
"""

from __future__ import annotations

import ipaddress
import os
import platform
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil

_WIFI_NAME = re.compile(r"wi-?fi|wlan|wireless|802\.11|airport", re.IGNORECASE)


def cpu_model() -> str:
    """The CPU's marketing name, as well as the OS tells it."""
    try:
        if sys.platform.startswith("linux"):
            for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
                if line.lower().startswith(("model name", "hardware", "cpu model")):
                    return line.split(":", 1)[1].strip()
        elif sys.platform == "darwin":
            out = subprocess.run(["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True,
                                 text=True, timeout=2)
            if out.stdout.strip():
                return out.stdout.strip()
        elif sys.platform == "win32":
            import winreg  # noqa: PLC0415 - Windows only
            key = winreg.OpenKey(winreg.HKEY_LOCAL_MACHINE, r"HARDWARE\DESCRIPTION\System\CentralProcessor\0")
            return str(winreg.QueryValueEx(key, "ProcessorNameString")[0]).strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return platform.processor() or platform.machine() or "unknown"


def is_wifi(name: str) -> bool:
    """Is the network interface ``name`` wireless?"""
    if sys.platform.startswith("linux"):
        return Path(f"/sys/class/net/{name}/wireless").exists() or Path(f"/sys/class/net/{name}/phy80211").exists()
    return bool(_WIFI_NAME.search(name))


def nics() -> list[dict]:
    """Network interfaces that are up, with addresses, link speed (Mbit/s, 0 = unknown) and Wi-Fi."""
    stats = psutil.net_if_stats()
    addrs = psutil.net_if_addrs()
    out = []
    for name, st in sorted(stats.items()):
        if not st.isup:
            continue
        ips = [a.address.split("%", 1)[0] for a in addrs.get(name, [])
               if a.family in (socket.AF_INET, socket.AF_INET6)]
        loopback = all(ip.startswith("127.") or ip == "::1" for ip in ips) if ips else name == "lo"
        out.append({"name": name, "addresses": ips, "speed_mbps": int(st.speed or 0), "mtu": st.mtu,
                    "wifi": is_wifi(name), "loopback": loopback})
    return out


_MAC = re.compile(r"^[0-9a-f]{2}([:-][0-9a-f]{2}){5}$", re.IGNORECASE)


def wake_on_lan_address(local_ip: str) -> dict | None:
    """Where a Wake-on-LAN packet for this machine goes, seen from the master that reached it at
    ``local_ip`` (this side's address of the master's connection): the interface holding that
    address, its MAC (``aa:bb:cc:dd:ee:ff``) and its IPv4 subnet's broadcast address (#36).

    None when no interface holds the address or it has no usable MAC (loopback, a tunnel).
    """
    try:
        wanted = ipaddress.ip_address(local_ip.split("%", 1)[0])
    except ValueError:
        return None
    for name, addrs in psutil.net_if_addrs().items():
        here = [a for a in addrs if a.family in (socket.AF_INET, socket.AF_INET6)
                and _same_ip(a.address, wanted)]
        if not here:
            continue
        mac = next((a.address for a in addrs if a.family == psutil.AF_LINK and _MAC.match(a.address or "")), "")
        mac = mac.lower().replace("-", ":")
        if not mac or mac == "00:00:00:00:00:00":
            return None
        broadcast = None
        if here[0].family == socket.AF_INET and here[0].netmask:
            # from address and mask: an address added without "brd" reports no broadcast
            broadcast = str(ipaddress.IPv4Interface(f"{wanted}/{here[0].netmask}").network.broadcast_address)
        return {"interface": name, "mac": mac, "address": str(wanted), "broadcast": broadcast}
    return None


def _same_ip(text: str, ip) -> bool:
    try:
        return ipaddress.ip_address(text.split("%", 1)[0]) == ip
    except ValueError:
        return False


def machine_id() -> str:
    """A stable, anonymous name of this computer: the same for every program on it (an agent,
    the master), another on every other computer. It tells the master which workers share its
    RAM, whatever address it reaches them at. A hash of the OS's own machine id
    (``/etc/machine-id``, Windows' ``MachineGuid``), else of the host name and a network card's
    address; never the id itself."""
    import hashlib  # noqa: PLC0415

    raw = ""
    for path in ("/etc/machine-id", "/var/lib/dbus/machine-id"):
        try:
            raw = Path(path).read_text().strip()
        except OSError:
            continue
        if raw:
            break
    if not raw and sys.platform == "win32":
        try:
            import winreg  # noqa: PLC0415

            with winreg.OpenKey(winreg.HKEY_LOCAL_MACHINE, r"SOFTWARE\Microsoft\Cryptography") as key:
                raw = str(winreg.QueryValueEx(key, "MachineGuid")[0])
        except OSError:
            raw = ""
    if not raw:
        import uuid  # noqa: PLC0415

        raw = f"{socket.gethostname()}/{uuid.getnode():012x}"
    return hashlib.sha256(("llama-herd machine " + raw).encode()).hexdigest()[:16]


def hardware_summary() -> dict:
    """Static facts: OS, CPU, cores, RAM total, and this computer's :func:`machine_id`."""
    vm = psutil.virtual_memory()
    return {
        "machine": machine_id(),
        "hostname": socket.gethostname(),
        "os": f"{platform.system()} {platform.release()}",
        "arch": platform.machine(),
        "cpu_model": cpu_model(),
        "cpu_cores": psutil.cpu_count(logical=False) or os.cpu_count() or 0,
        "cpu_threads": psutil.cpu_count(logical=True) or os.cpu_count() or 0,
        "ram_total_bytes": vm.total,
    }


class LoadMeter:
    """Live load, averaged since the previous :meth:`sample` (since creation on the first call)."""

    def __init__(self) -> None:
        psutil.cpu_percent(interval=None)  # primes psutil's counter
        self._last_t = time.monotonic()
        self._last_net = psutil.net_io_counters()

    def sample(self) -> dict:
        """CPU %, RAM used/free, network bytes/s in and out."""
        now = time.monotonic()
        net = psutil.net_io_counters()
        cpu = psutil.cpu_percent(interval=None)
        dt = max(now - self._last_t, 1e-6)
        rx = max(0, net.bytes_recv - self._last_net.bytes_recv) / dt
        tx = max(0, net.bytes_sent - self._last_net.bytes_sent) / dt
        self._last_t, self._last_net = now, net
        vm = psutil.virtual_memory()
        return {
            "cpu_percent": cpu,
            "ram_used_bytes": vm.total - vm.available,
            "ram_free_bytes": vm.available,
            "net_rx_bytes_per_s": round(rx, 1),
            "net_tx_bytes_per_s": round(tx, 1),
        }
