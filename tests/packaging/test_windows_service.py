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


def test_private_folders_are_left_to_system_and_administrators():
    cmd = service_windows.restrict_acl_command(PureWindowsPath(r"C:\ProgramData\llama-herd\state"))
    assert cmd[:3] == ["icacls", r"C:\ProgramData\llama-herd\state", "/inheritance:r"]
    grants = cmd[cmd.index("/grant:r") + 1:]
    # by SID, so it works on a French or Chinese Windows too; nobody else keeps access
    assert grants == ["*S-1-5-18:(OI)(CI)F", "*S-1-5-32-544:(OI)(CI)F"]


# --- the service's run loop, which is plain asyncio and runs anywhere -------------------------

def _info(port: int) -> dict | None:
    import json
    import urllib.request

    from agent.identity import client_context
    try:  # /info is public: any server key will do
        with urllib.request.urlopen(f"https://127.0.0.1:{port}/api/v1/info", timeout=2,
                                    context=client_context()) as resp:
            return json.load(resp)
    except OSError:
        return None


def _wait_for(cond, timeout: float, what: str):
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def _service_thread(target):
    import threading

    result: dict = {}

    def run():
        try:
            result["rc"] = target()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            result["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, result


def test_service_runner_serves_until_the_scm_stop_event(tmp_path):
    """What SvcDoRun runs: the agent from the service's command line, stopped by SvcStop's event
    from another thread (no signals: a service thread cannot install them)."""
    import socket
    import threading

    from conftest import free_port

    from agent.main import build_parser

    api, rpc, echo = free_port(), free_port(), free_port()
    args = build_parser().parse_args([
        "service", "--config", str(tmp_path / "agent.toml"), "--state-dir", str(tmp_path / "state"),
        "--bind", "127.0.0.1", "--api-port", str(api), "--rpc-port", str(rpc),
        "--echo-port", str(echo), "--no-mdns", "--name", "svc-test"])
    args.log_file = tmp_path / "logs" / "herd-agent.log"
    stop = threading.Event()
    thread, result = _service_thread(lambda: service_windows._run_agent_for_service(args, stop))
    info = _wait_for(lambda: _info(api) or result.get("error"), 30, "the agent's /api/v1/info")
    assert isinstance(info, dict), info
    assert info["name"] == "svc-test" and info["ports"]["rpc"] == rpc
    assert (tmp_path / "state" / "agent-state.json").is_file()
    stop.set()
    thread.join(timeout=10)
    assert not thread.is_alive(), "the agent did not stop within 10 s of the stop event"
    assert result == {"rc": 0}
    # it stopped listening (SO_REUSEADDR: the closed connections' TIME_WAIT does not count)
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", api))
        s.listen()


def test_service_runner_reports_a_taken_port_as_failure(tmp_path):
    """Exit code 1 (not 0) is what makes the service exit as failed and the SCM restart it."""
    import asyncio
    import socket
    import threading

    from conftest import free_port

    from agent.settings import Settings, load_state

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        settings = Settings(name="svc-test", bind="127.0.0.1", api_port=taken.getsockname()[1],
                            rpc_port=free_port(), echo_port=free_port(), mdns=False)
        state = load_state(tmp_path)
        rc = asyncio.run(service_windows.serve_until(settings, state, threading.Event()))
    assert rc == 1


def test_file_logging_catches_logs_and_stray_output(tmp_path):
    """Under the SCM there is no console: log records and print() both have to land in files."""
    import subprocess

    log_file = tmp_path / "logs" / "herd-agent.log"
    code = (
        "import logging, sys\n"
        "from pathlib import Path\n"
        "from agent.service_windows import setup_file_logging\n"
        f"setup_file_logging(Path({str(log_file)!r}))\n"
        "logging.getLogger('herd.agent').info('agent says hello')\n"
        "logging.getLogger('aiohttp.access').info('noise')\n"
        "print('stray print')\n"
        "print('stray error', file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "" and proc.stderr == ""
    text = log_file.read_text()
    assert "INFO herd.agent: agent says hello" in text
    assert "noise" not in text
    out = log_file.with_suffix(".out.log").read_text()
    assert "stray print" in out and "stray error" in out


def test_the_service_does_not_run_on_when_its_state_folder_cannot_be_locked(tmp_path, caplog):
    """On Windows, an ``icacls`` that fails leaves the service stopped with the reason logged,
    not running on with its pairing key readable by every user (#32). There is no Windows (nor
    ``icacls``) here: a stand-in answers for ``icacls`` as it does when access is denied."""
    import subprocess

    from conftest import free_port

    from agent.main import build_parser

    api = free_port()
    args = build_parser().parse_args([
        "service", "--config", str(tmp_path / "agent.toml"), "--state-dir", str(tmp_path / "state"),
        "--bind", "127.0.0.1", "--api-port", str(api), "--rpc-port", str(free_port()),
        "--echo-port", str(free_port()), "--no-mdns", "--name", "svc-test"])
    args.log_file = tmp_path / "logs" / "herd-agent.log"
    asked: list[list[str]] = []

    def icacls_denied(argv, **kw):  # the stand-in for icacls (Windows only)
        asked.append(argv)
        return subprocess.CompletedProcess(argv, 5, "", "tmp\\state: Access is denied.\n")

    rc = service_windows._run_agent_for_service(args, __import__("threading").Event(), acl_run=icacls_denied)
    assert rc == 1
    assert asked == [service_windows.restrict_acl_command(tmp_path / "state")]
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert any(str(tmp_path / "state") in e and "Access is denied" in e for e in errors), errors
    assert not (tmp_path / "state" / "agent-state.json").exists()  # the agent never started
    assert _info(api) is None
