"""Wake-on-LAN's pieces on the master (#36): the magic packet, the MAC and broadcast address a
node reports, and keeping them with the pairing. The packet on a real network: tests/e2e/
test_wake_on_lan.py."""

from __future__ import annotations

import pytest

from agent.hardware import wake_on_lan_address
from gui.cluster.nodes.records import PairingStore
from gui.cluster.nodes.wake import WakeTarget, magic_packet, parse_mac, remember_wake


@pytest.mark.parametrize("text", ["aa:bb:cc:dd:ee:0f", "AA-BB-CC-DD-EE-0F", "aabbccddee0f", " aa:bb:cc:dd:ee:0f\n"])
def test_mac_spellings(text):
    assert parse_mac(text) == bytes([0xAA, 0xBB, 0xCC, 0xDD, 0xEE, 0x0F])


@pytest.mark.parametrize("text", ["", "aa:bb:cc:dd:ee", "aa:bb:cc:dd:ee:ff:00", "aa:bb-cc:dd:ee:ff",
                                  "gg:bb:cc:dd:ee:ff", "aabbccddeeff0"])
def test_what_is_not_a_mac_is_named(text):
    with pytest.raises(ValueError, match=r"is not a MAC address \(six pairs of hex digits"):
        parse_mac(text)


def test_the_magic_packet():
    packet = magic_packet("01:23:45:67:89:ab")
    assert len(packet) == 102
    assert packet[:6] == b"\xff" * 6
    assert [packet[6 + 6 * i:12 + 6 * i] for i in range(16)] == [bytes.fromhex("0123456789ab")] * 16


@pytest.mark.parametrize("status", [None, [], {}, {"wake": None}, {"wake": "aa:bb:cc:dd:ee:ff"},
                                    {"wake": {"mac": "aa:bb:cc:dd:ee:ff"}},
                                    {"wake": {"mac": "nonsense", "broadcast": "10.0.0.255"}},
                                    {"wake": {"mac": "aa:bb:cc:dd:ee:ff", "broadcast": "fe80::1"}},
                                    {"wake": {"mac": 5, "broadcast": "10.0.0.255"}}])
def test_an_unusable_report_is_no_target(status):
    assert WakeTarget.from_status(status) is None


def _paired_store(tmp_path) -> PairingStore:
    from agent.identity import load_or_create
    store = PairingStore(tmp_path / "pairings.json")
    store.put("node-1", load_or_create(tmp_path / "n1", "agent", "n1").cert_pem.decode(), name="den")
    return store


def test_the_pairing_keeps_what_the_node_last_reported(tmp_path):
    store = _paired_store(tmp_path)
    assert store.wake_target("node-1") is None
    remember_wake(store, "node-1", {"wake": {"mac": "AA-BB-CC-DD-EE-FF", "broadcast": "192.168.1.255",
                                             "interface": "eth0", "address": "192.168.1.7"}})
    assert store.wake_target("node-1") == WakeTarget("aa:bb:cc:dd:ee:ff", "192.168.1.255")
    written = store.path.stat().st_mtime_ns
    remember_wake(store, "node-1", {"wake": {"mac": "aa:bb:cc:dd:ee:ff", "broadcast": "192.168.1.255"}})
    assert store.path.stat().st_mtime_ns == written  # unchanged: not written again
    remember_wake(store, "node-1", {"wake": {"mac": "aa:bb:cc:dd:ee:01", "broadcast": "10.1.0.255"}})
    assert store.wake_target("node-1") == WakeTarget("aa:bb:cc:dd:ee:01", "10.1.0.255")
    remember_wake(store, "stranger", {"wake": {"mac": "aa:bb:cc:dd:ee:02", "broadcast": "10.1.0.255"}})
    assert "stranger" not in store.names()  # only paired nodes are kept


def test_loopback_has_nothing_to_wake_by():
    assert wake_on_lan_address("127.0.0.1") is None
    assert wake_on_lan_address("not an address") is None
