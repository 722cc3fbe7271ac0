"""Port numbers handed to child processes (agent/ports.py): never the same one twice in a row."""

import socket

import pytest

from agent.ports import free_port


def test_ports_handed_out_together_are_all_different_and_bindable():
    """Three hundred asks in a row, none bound in between (as when workers are started together
    and bind later): every number differs, and each can still be bound. The kernel alone repeats
    numbers at this count — two RPC workers were once told one port."""
    ports = [free_port() for _ in range(300)]
    assert len(set(ports)) == len(ports)
    for port in ports[:20]:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


def test_an_address_that_is_not_this_computers_is_refused():
    with pytest.raises(OSError):
        free_port("192.0.2.1")  # TEST-NET-1: never an address of this computer; nothing is sent
