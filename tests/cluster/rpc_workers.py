"""Starting real ``ggml-rpc-server`` workers on loopback for tests of the master's core."""

from __future__ import annotations

import socket
import time

from conftest import free_port


def wait_port(host: str, port: int, timeout: float = 15.0) -> None:
    """Wait until something accepts TCP connections on ``host:port``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"nothing listens on {host}:{port} after {timeout} s")
            time.sleep(0.05)


def start_rpc_workers(engine, procs, count: int = 2) -> list[str]:
    """Start ``count`` RPC workers on 127.0.0.1; returns their ``host:port`` endpoints."""
    endpoints = []
    for _ in range(count):
        port = free_port()
        procs.popen([engine.rpc_server, "-H", "127.0.0.1", "-p", str(port), "-t", "1"])
        endpoints.append(f"127.0.0.1:{port}")
    for ep in endpoints:
        host, port = ep.rsplit(":", 1)
        wait_port(host, int(port))
    return endpoints
