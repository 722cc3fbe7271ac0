"""The service-related sub-commands through the installed `herd-agent` program."""

from __future__ import annotations

import subprocess
import sys

import pytest

from agent import systemd


@pytest.fixture(autouse=True)
def _own_config_dirs(tmp_path, monkeypatch):
    """Keep the developer's own agent config and state out of these runs."""
    for var in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME"):
        monkeypatch.setenv(var, str(tmp_path / "xdg" / var.lower()))


def herd_agent(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["herd-agent", *args], capture_output=True, text=True, timeout=60)


def test_help_lists_the_service_commands():
    out = herd_agent("--help").stdout
    for cmd in ("install-service", "uninstall-service", "firewall", "service"):
        assert cmd in out


def test_firewall_dry_run_prints_the_netsh_lines():
    out = herd_agent("firewall", "add", "--dry-run", "--api-port", "7101", "--rpc-port", "7102",
                     "--echo-port", "7103")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert sum("add rule" in ln for ln in lines) == 4
    assert any("localport=7102" in ln and "remoteip=localsubnet" in ln for ln in lines)
    # names with spaces are quoted as Windows' command line parser expects
    assert any('"name=llama-herd agent - llama.cpp RPC"' in ln for ln in lines)


def test_firewall_takes_ports_from_the_config_file(tmp_path):
    cfg = tmp_path / "agent.toml"
    cfg.write_text("api_port = 6001\nrpc_port = 6002\necho_port = 6003\n")
    out = herd_agent("firewall", "add", "--dry-run", "--config", str(cfg))
    assert out.returncode == 0, out.stderr
    for port in (6001, 6002, 6003):
        assert f"localport={port}" in out.stdout


def test_firewall_rejects_a_bad_port():
    out = herd_agent("firewall", "add", "--dry-run", "--rpc-port", "99999")
    assert out.returncode == 2
    assert "rpc-port" in out.stderr and "99999" in out.stderr
    assert out.stdout == ""


def test_service_recovery_dry_run_prints_sc_failure():
    out = herd_agent("service", "recovery", "--dry-run")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0].startswith("sc.exe failure HerdAgent reset= 86400 actions= restart/")


def test_service_mode_refuses_off_windows():
    if sys.platform == "win32":
        pytest.skip("this checks the refusal on other systems")
    out = herd_agent("service")
    assert out.returncode == 1
    assert "Windows only" in out.stderr and "install-service" in out.stderr


def test_install_service_dry_run(tmp_path):
    import pwd

    user = next(p for p in pwd.getpwall() if p.pw_uid not in (0, 65534) and p.pw_name != "nobody")
    proc = herd_agent("install-service", "--user", user.pw_name, "--config", str(tmp_path / "a.toml"),
                      "--unit-dir", str(tmp_path), "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert f"User={user.pw_name}" in proc.stdout
    assert f"--config {tmp_path / 'a.toml'}" in proc.stdout
    assert not (tmp_path / systemd.UNIT_NAME).exists()


def test_install_service_refuses_root(tmp_path):
    proc = herd_agent("install-service", "--user", "root", "--unit-dir", str(tmp_path))
    assert proc.returncode == 1
    assert "must not run as root" in proc.stderr
    assert not (tmp_path / systemd.UNIT_NAME).exists()


def test_uninstall_service_from_a_unit_dir(tmp_path):
    (tmp_path / systemd.UNIT_NAME).write_text("[Unit]\n")
    proc = herd_agent("uninstall-service", "--unit-dir", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert not (tmp_path / systemd.UNIT_NAME).exists()
    proc = herd_agent("uninstall-service", "--unit-dir", str(tmp_path))
    assert proc.returncode == 1 and "not installed" in proc.stderr


def test_service_pin_reads_the_service_state(tmp_path):
    from agent.pairing import PinFile
    from agent.settings import load_state

    missing = herd_agent("service", "pin", "--state-dir", str(tmp_path))
    assert missing.returncode == 1 and "has not started yet" in missing.stderr
    load_state(tmp_path)  # what the service writes on its first start
    out = herd_agent("service", "pin", "--state-dir", str(tmp_path))
    assert out.returncode == 0, out.stderr
    # the PIN shown is the one the service accepts for the next few minutes
    shown = out.stdout.strip()
    digits = shown.replace(" ", "")
    assert len(digits) == 10 and digits.isdigit() and PinFile(tmp_path).current() == digits
