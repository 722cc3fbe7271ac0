"""The non-Windows-only parts of the agent's Windows service mode and firewall subcommands:
the command lines they build, the paths they use, and the errors on bad input."""

from __future__ import annotations

import sys
from pathlib import PureWindowsPath

import pytest

from agent import firewall, protocol, service_windows


def test_rules_cover_every_agent_port_and_mdns():
    rules = firewall.rules(api_port=7001, rpc_port=7002, echo_port=7003)
    assert {(r.protocol, r.port) for r in rules} == {("TCP", 7001), ("TCP", 7002), ("UDP", 7003),
                                                     ("UDP", 5353)}
    assert len({r.name for r in rules}) == len(rules)
    assert all(r.name.startswith(firewall.RULE_GROUP) for r in rules)


def test_default_ports_are_the_protocol_defaults():
    ports = {r.port for r in firewall.rules()}
    assert {protocol.DEFAULT_API_PORT, protocol.DEFAULT_RPC_PORT, protocol.DEFAULT_ECHO_PORT} <= ports


def test_rule_names_do_not_depend_on_ports():
    """`remove` deletes by name, so it must find rules created for other ports."""
    a = [r.name for r in firewall.rules(1000, 1001, 1002)]
    b = [r.name for r in firewall.rules(2000, 2001, 2002)]
    assert a == b


def test_add_commands_limit_to_local_subnet_and_are_idempotent():
    rules = firewall.rules(7001, 7002, 7003)
    cmds = firewall.add_commands(rules)
    adds = [c for c in cmds if c[3] == "add"]
    deletes = [c for c in cmds if c[3] == "delete"]
    assert len(adds) == len(deletes) == len(rules)
    for rule, add in zip(rules, adds):
        assert add[:5] == ["netsh", "advfirewall", "firewall", "add", "rule"]
        assert f"name={rule.name}" in add
        assert "dir=in" in add and "action=allow" in add
        assert f"protocol={rule.protocol}" in add and f"localport={rule.port}" in add
        assert "remoteip=localsubnet" in add
    # each add is preceded by the delete of the same name: re-running leaves one rule
    for i in range(0, len(cmds), 2):
        assert cmds[i][3] == "delete" and cmds[i + 1][3] == "add"
        assert cmds[i][5] == cmds[i + 1][5]


def test_remove_commands_delete_each_rule_by_name():
    rules = firewall.rules()
    cmds = firewall.remove_commands(rules)
    assert cmds == [["netsh", "advfirewall", "firewall", "delete", "rule", f"name={r.name}"]
                    for r in rules]


@pytest.mark.parametrize("ports", [(0, 2, 3), (1, 70000, 3), (1, 2, -5), (True, 2, 3), ("80", 2, 3)])
def test_bad_ports_are_named(ports):
    with pytest.raises(firewall.FirewallError, match="is not a port number"):
        firewall.rules(*ports)


def test_running_netsh_off_windows_is_refused_with_advice():
    if sys.platform == "win32":
        pytest.skip("this checks the refusal on other systems")
    with pytest.raises(firewall.FirewallError, match="Windows only.*ufw"):
        firewall.run_commands(firewall.add_commands(firewall.rules()), check_each=True)


def test_service_paths_live_under_programdata():
    paths = service_windows.service_paths({"ProgramData": r"D:\PD"})
    assert paths["log"] == PureWindowsPath(r"D:\PD\llama-herd\logs\herd-agent.log")
    assert paths["config"] == PureWindowsPath(r"D:\PD\llama-herd\agent.toml")
    assert paths["state_dir"] == PureWindowsPath(r"D:\PD\llama-herd\state")
    # without the variable (it is always set on Windows, but be safe) the standard folder
    assert service_windows.program_data({}) == PureWindowsPath(r"C:\ProgramData\llama-herd")


def test_recovery_commands_restart_on_failure():
    cmds = service_windows.recovery_commands()
    assert cmds[0] == ["sc.exe", "failure", "HerdAgent", "reset=", "86400", "actions=",
                       "restart/5000/restart/10000/restart/60000"]
    assert cmds[1] == ["sc.exe", "failureflag", "HerdAgent", "1"]
    custom = service_windows.recovery_commands("Other", (1000,), 60)
    assert custom[0][2] == "Other" and custom[0][4] == "60" and custom[0][6] == "restart/1000"


@pytest.mark.parametrize("delays, reset", [((), 10), ((-1,), 10), ((1000,), -1)])
def test_recovery_rejects_bad_settings(delays, reset):
    with pytest.raises(service_windows.ServiceError):
        service_windows.recovery_commands(delays_ms=delays, reset_s=reset)


def test_service_name_matches_the_msi():
    """The MSI's ServiceInstall and the code that serves the SCM must agree on the name."""
    from pathlib import Path

    wxs = (Path(__file__).resolve().parents[2] / "packaging" / "windows" / "herd-agent.wxs").read_text()
    assert f'Name="{service_windows.SERVICE_NAME}"' in wxs


def test_windows_only_parts_refuse_elsewhere():
    if sys.platform == "win32":
        pytest.skip("this checks the refusal on other systems")
    with pytest.raises(service_windows.ServiceError, match="Windows only"):
        service_windows.run_commands(service_windows.recovery_commands())
    with pytest.raises(service_windows.ServiceError, match="Windows only"):
        service_windows.run_service(lambda argv, stop: 0, [], __import__("pathlib").Path("x.log"))
