"""A packet capture on the simulated LAN without tcpdump: AF_PACKET sockets on the bridge-side
ends of hosts' cables (what a sniffer on the same Wi-Fi, or an ARP spoofer, gets to read).

Frames are kept whole (:attr:`Capture.frames`); :meth:`Capture.blob` joins them for searching,
and :meth:`Capture.tcp_streams` reassembles, naively, the TCP payload sent to one port (enough
to replay it).
"""

from __future__ import annotations

import socket
import struct
import threading

ETH_P_ALL = 0x0003


class Capture:
    """Capture every frame on interfaces ``ifnames`` (root namespace) until :meth:`stop`."""

    def __init__(self, ifnames: list[str]) -> None:
        self.frames: list[tuple[str, bytes]] = []
        self._socks = []
        for name in ifnames:
            s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 20)
            s.bind((name, 0))
            s.settimeout(0.2)
            self._socks.append((name, s))
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._read, args=(n, s), daemon=True) for n, s in self._socks]
        for t in self._threads:
            t.start()

    def _read(self, name: str, s: socket.socket) -> None:
        while not self._stop.is_set():
            try:
                frame = s.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                return
            self.frames.append((name, frame))

    def stop(self) -> "Capture":
        self._stop.set()
        for t in self._threads:
            t.join(5)
        for _n, s in self._socks:
            s.close()
        return self

    def blob(self) -> bytes:
        """Every captured frame, concatenated (a pattern split across frames is also searched
        for by :meth:`contains`)."""
        return b"".join(f for _n, f in self.frames)

    def contains(self, pattern: bytes) -> bool:
        """Whether ``pattern`` appears in a frame, or in a TCP stream's payload across frames."""
        if pattern in self.blob():
            return True
        return any(pattern in data for data in self.tcp_payloads().values())

    @property
    def nbytes(self) -> int:
        return sum(len(f) for _n, f in self.frames)

    def _tcp(self):
        """(src ip, src port, dst ip, dst port, seq, payload) of each IPv4 TCP frame, once per
        frame even when two interfaces saw it."""
        seen = set()
        for _n, f in self.frames:
            if len(f) < 34 or f[12:14] != b"\x08\x00" or f[23] != 6:
                continue
            ihl = (f[14] & 0x0F) * 4
            total = struct.unpack("!H", f[16:18])[0]
            ip = f[14:14 + total]
            src, dst = socket.inet_ntoa(ip[12:16]), socket.inet_ntoa(ip[16:20])
            tcp = ip[ihl:]
            sport, dport, seq = struct.unpack("!HHI", tcp[:8])
            off = (tcp[12] >> 4) * 4
            payload = tcp[off:]
            key = (src, sport, dst, dport, seq, len(payload))
            if key in seen:
                continue
            seen.add(key)
            yield src, sport, dst, dport, seq, payload

    def tcp_payloads(self) -> dict[tuple, bytes]:
        """{(src, sport, dst, dport): payload in sequence order} (retransmissions dropped)."""
        parts: dict[tuple, dict[int, bytes]] = {}
        for src, sport, dst, dport, seq, payload in self._tcp():
            if payload:
                parts.setdefault((src, sport, dst, dport), {}).setdefault(seq, payload)
        return {k: b"".join(v[s] for s in sorted(v)) for k, v in parts.items()}

    def streams_to(self, ip: str, port: int) -> list[bytes]:
        """The payload of every connection sent to ``ip:port``, in the order they started."""
        return [data for (src, _sp, dst, dport), data in self.tcp_payloads().items()
                if dst == ip and dport == port]
