"""A sniffer on one host's cable of the simulated LAN (tests/lan.py): a raw packet socket on the
bridge-side end of the host's veth, in the test's own namespace, sees every frame the host sends
and receives — what a device on the same Wi-Fi with a sniffer could read. It keeps the TCP
payloads to or from one port, so a test can say which bytes crossed the LAN in the clear.
Needs root (``AF_PACKET``)."""

from __future__ import annotations

import socket
import struct
import threading

ETH_P_ALL = 0x0003
ETH_P_IP = 0x0800
IPPROTO_TCP = 6


def tcp_payload(frame: bytes, port: int) -> bytes:
    """The TCP payload of an Ethernet ``frame`` carrying IPv4 to or from ``port`` (b"" otherwise)."""
    if len(frame) < 14 + 20 or struct.unpack("!H", frame[12:14])[0] != ETH_P_IP:
        return b""
    ip = frame[14:]
    ihl = (ip[0] & 0x0F) * 4
    total = struct.unpack("!H", ip[2:4])[0]
    if ip[9] != IPPROTO_TCP or len(ip) < ihl + 20:
        return b""
    tcp = ip[ihl:total]
    sport, dport = struct.unpack("!HH", tcp[:4])
    if port not in (sport, dport):
        return b""
    return bytes(tcp[(tcp[12] >> 4) * 4:])


class WireSniffer:
    """Records the TCP payloads crossing link ``device`` to or from ``port`` while in a ``with``.

    Attributes:
        payload: every recorded payload byte, in the order the frames passed.
        frames: how many frames carried such a payload.
    """

    def __init__(self, device: str, port: int) -> None:
        self.device, self.port = device, port
        self.payload = bytearray()
        self.frames = 0
        self._sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        self._sock.bind((device, 0))
        self._sock.settimeout(0.1)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._record, name=f"sniff {device}", daemon=True)

    def _record(self) -> None:
        while not self._stop.is_set():
            try:
                frame = self._sock.recv(262144)
            except TimeoutError:
                continue
            except OSError:
                return
            data = tcp_payload(frame, self.port)
            if data:
                self.frames += 1
                self.payload += data

    def __enter__(self) -> "WireSniffer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._sock.close()

    def saw(self, secret: str | bytes) -> bool:
        """Whether ``secret`` crossed the link in the clear."""
        return (secret.encode() if isinstance(secret, str) else secret) in self.payload
