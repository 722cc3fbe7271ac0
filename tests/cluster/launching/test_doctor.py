"""Doctor pieces that need no cluster (the whole doctor runs against real agents in test_cli)."""

from __future__ import annotations

from agent.engine_lookup import Engine
from gui.cluster.launching.doctor import ERROR, OK, WARNING, _wifi_nic, check_engine, has_errors


def test_wifi_nic_of_the_link_is_found_by_address():
    # No Wi-Fi adapter on a test machine: the NIC list is what agent.hardware.nics() reports.
    nics = [{"name": "eth0", "addresses": ["10.0.0.2"], "wifi": False},
            {"name": "wlan0", "addresses": ["192.168.1.7"], "wifi": True}]
    assert _wifi_nic(nics, "192.168.1.7")["name"] == "wlan0"
    assert _wifi_nic(nics, "10.0.0.2") is None and _wifi_nic(nics, None) is None


def test_engine_findings(tmp_path):
    assert [f.severity for f in check_engine(Engine())] == [ERROR]
    assert "herd engine install" in check_engine(Engine())[0].message
    fake = tmp_path / "llama-server"
    assert check_engine(Engine(llama_server=fake, build=1))[0].severity == WARNING
    ok = check_engine(Engine(llama_server=fake, build=11434))
    assert ok[0].severity == OK and not has_errors(ok)
