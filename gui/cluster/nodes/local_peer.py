"""Which local process is at the other end of a loopback TCP connection, and whether this master
started it — what lets the master's forwarders (:mod:`gui.cluster.nodes.tunnel`) serve only the
llama-server herd launched (#25).

A forwarder listens on ``127.0.0.1``; any program of any account on the master can connect to
it, and would get a worker's RPC under the master's key. So each accepted connection is traced
to the process that owns its client socket, and admitted only when that process is this master
process itself or one it started (a child or grandchild: llama-server, a calibration run):

* **Linux**: the client socket is the line of ``/proc/net/tcp`` whose local address is the
  connection's peer and whose remote address is the forwarder; its inode is then looked for
  among the open files (``/proc/<pid>/fd``) of this process and its descendants — only those,
  so no other account's processes are read. Another account's process never has that inode.
* **Windows**: ``GetExtendedTcpTable`` (iphlpapi) lists each TCP connection with its owning
  process id; the peer's row gives the pid, checked against this process's descendants
  (psutil). Written for Windows and not run by the tests here (they run on Linux).
* **Elsewhere** (macOS, BSD) no owner is looked up: :func:`started_here` answers None and the
  forwarder admits any local connection, as ``docs/security.md`` says.
"""

from __future__ import annotations

import logging
import os
import socket
import struct
import sys
from pathlib import Path

import psutil

log = logging.getLogger(__name__)


def _ours() -> set[int]:
    """This process and every process it started, as far as they still run."""
    me = psutil.Process()
    pids = {me.pid}
    try:
        pids.update(p.pid for p in me.children(recursive=True))
    except psutil.Error:
        pass
    return pids


def _hex_v4(ip: str, port: int) -> str:
    """``127.0.0.1:8080`` as /proc/net/tcp writes it: ``0100007F:1F90`` (the address in host order)."""
    packed = socket.inet_aton(ip)
    return f"{struct.unpack('<I', packed)[0]:08X}:{port:04X}"


def _linux_inode(peer: tuple[str, int], local: tuple[str, int], table: Path = Path("/proc/net/tcp")) -> int | None:
    """The inode of the client socket ``peer`` → ``local``, from ``table``."""
    want_local, want_remote = _hex_v4(*peer), _hex_v4(*local)
    try:
        lines = table.read_text().splitlines()[1:]
    except OSError:
        return None
    for line in lines:
        f = line.split()
        if len(f) > 9 and f[1] == want_local and f[2] == want_remote:
            inode = int(f[9])
            return inode or None
    return None


def _linux_owner(inode: int, candidates: set[int]) -> int | None:
    """Which of ``candidates`` has socket ``inode`` open."""
    target = f"socket:[{inode}]"
    for pid in candidates:
        fd_dir = f"/proc/{pid}/fd"
        try:
            names = os.listdir(fd_dir)
        except OSError:
            continue
        for name in names:
            try:
                if os.readlink(f"{fd_dir}/{name}") == target:
                    return pid
            except OSError:
                continue
    return None


def _windows_owner(peer: tuple[str, int], local: tuple[str, int]) -> int | None:  # pragma: no cover - Windows
    """The owning pid of the TCP connection ``peer`` → ``local`` (GetExtendedTcpTable)."""
    import ctypes  # noqa: PLC0415
    from ctypes import wintypes  # noqa: PLC0415

    AF_INET, TCP_TABLE_OWNER_PID_ALL = 2, 5

    class Row(ctypes.Structure):
        _fields_ = [("state", wintypes.DWORD), ("local_addr", wintypes.DWORD), ("local_port", wintypes.DWORD),
                    ("remote_addr", wintypes.DWORD), ("remote_port", wintypes.DWORD), ("pid", wintypes.DWORD)]

    get_table = ctypes.windll.iphlpapi.GetExtendedTcpTable
    size = wintypes.DWORD(0)
    get_table(None, ctypes.byref(size), False, AF_INET, TCP_TABLE_OWNER_PID_ALL, 0)
    for _attempt in range(3):  # the table may grow between the two calls
        buf = ctypes.create_string_buffer(size.value)
        if get_table(buf, ctypes.byref(size), False, AF_INET, TCP_TABLE_OWNER_PID_ALL, 0) == 0:
            break
    else:
        return None
    count = struct.unpack_from("<I", buf, 0)[0]
    rows = ctypes.cast(ctypes.addressof(buf) + ctypes.sizeof(wintypes.DWORD), ctypes.POINTER(Row))

    def addr(ip: str) -> int:
        return struct.unpack("<I", socket.inet_aton(ip))[0]

    def port(p: int) -> int:  # the table keeps ports in network order in the low 16 bits
        return socket.htons(p)

    for i in range(count):
        r = rows[i]
        if (r.local_addr, r.local_port & 0xFFFF, r.remote_addr, r.remote_port & 0xFFFF) == (
                addr(peer[0]), port(peer[1]), addr(local[0]), port(local[1])):
            return int(r.pid)
    return None


def owner_pid(peer: tuple[str, int], local: tuple[str, int], candidates: set[int] | None = None) -> int | None:
    """The pid of the process whose socket ``peer`` is connected to ``local`` (both loopback) —
    on Linux looked for among ``candidates`` (default: this process and its descendants), on
    Windows among all; None if not found."""
    if sys.platform.startswith("linux"):
        inode = _linux_inode(peer, local)
        return _linux_owner(inode, candidates if candidates is not None else _ours()) if inode else None
    if sys.platform == "win32":  # pragma: no cover - Windows
        try:
            return _windows_owner(peer, local)
        except (OSError, AttributeError, ValueError) as exc:
            log.warning("could not look up the owner of a local connection: %s", exc)
            return None
    return None


def started_here(peer: tuple[str, int], local: tuple[str, int]) -> bool | None:
    """Is the process at the other end of the loopback connection ``peer`` → ``local`` this
    master process or one it started? None where this cannot be told (see the module docstring)."""
    if not (sys.platform.startswith("linux") or sys.platform == "win32"):
        return None
    ours = _ours()
    pid = owner_pid(peer, local, ours)
    return pid is not None and pid in ours
