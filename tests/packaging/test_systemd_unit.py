"""`herd-agent install-service` / `uninstall-service`: the systemd unit they write and remove."""

from __future__ import annotations

import configparser
import grp
import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agent import systemd

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def unprivileged_user() -> pwd.struct_passwd:
    """An existing unprivileged account other than `nobody` (Debian always has `daemon`)."""
    for pw in sorted(pwd.getpwall(), key=lambda p: (p.pw_name != "daemon", p.pw_uid)):
        if pw.pw_uid not in (0, 65534) and pw.pw_name != "nobody":
            return pw
    pytest.fail("no unprivileged account on this system")


def parse_unit(text: str) -> configparser.ConfigParser:
    cp = configparser.ConfigParser(strict=False, interpolation=None, delimiters=("=",))
    cp.optionxform = str  # keys are case-sensitive in systemd
    cp.read_string(text)
    return cp


@pytest.fixture
def user():
    return unprivileged_user()


def test_unit_runs_unprivileged_restarts_and_logs_to_journal(tmp_path, user):
    program = ["/opt/herd agent/bin/herd-agent"]
    spec = systemd.build_spec(user.pw_name, str(tmp_path / "cfg dir" / "agent.toml"), program)
    unit = parse_unit(systemd.render_unit(spec))
    svc = unit["Service"]
    assert svc["User"] == user.pw_name
    assert svc["Group"] == grp.getgrgid(user.pw_gid).gr_name
    assert svc["Restart"] == "on-failure"
    assert svc["StandardOutput"] == "journal" and svc["StandardError"] == "journal"
    assert svc["NoNewPrivileges"] == "yes"
    assert svc["ExecStart"] == (f'"/opt/herd agent/bin/herd-agent" --config '
                                f'"{tmp_path}/cfg dir/agent.toml"')
    assert unit["Install"]["WantedBy"] == "multi-user.target"
    assert "network-online.target" in unit["Unit"]["After"]
    # a flood of connections meets the agent's own caps, not the default 1024 open files
    from agent.api_guard import FD_LIMIT
    assert svc["LimitNOFILE"] == str(FD_LIMIT)


def test_default_config_is_in_the_users_home(user):
    spec = systemd.build_spec(user.pw_name, None, ["/usr/bin/herd-agent"])
    assert spec.config == str(Path(user.pw_dir) / ".config" / "llama-herd" / "agent.toml")
    assert spec.exec_start[-2:] == ("--config", spec.config)


def test_root_and_unknown_users_are_refused():
    with pytest.raises(systemd.ServiceInstallError, match="must not run as root"):
        systemd.build_spec("root", None, ["/usr/bin/herd-agent"])
    with pytest.raises(systemd.ServiceInstallError, match="account of its own"):
        systemd.build_spec("nobody", None, ["/usr/bin/herd-agent"])
    with pytest.raises(systemd.ServiceInstallError, match="no user named 'no-such-user-x'"):
        systemd.build_spec("no-such-user-x", None, ["/usr/bin/herd-agent"])


@pytest.mark.parametrize("arg, expected", [
    ("/usr/bin/herd-agent", "/usr/bin/herd-agent"),
    ("/a b/c", '"/a b/c"'),
    ("50%", "50%%"),           # % starts a specifier
    ("$HOME", "$$HOME"),       # $ starts a variable
    ('say "hi"', '"say \\"hi\\""'),
])
def test_exec_arguments_are_quoted_for_systemd(arg, expected):
    assert systemd.quote_arg(arg) == expected


def test_generated_unit_passes_systemd_analyze_verify(tmp_path, user):
    """systemd's own checker: unknown keys, bad values and a missing program all show up here."""
    if shutil.which("systemd-analyze") is None:
        msg = "systemd-analyze not installed (apt-get install systemd)"
        if IN_CI:
            pytest.fail(msg)
        pytest.skip(msg)
    program = [shutil.which("herd-agent") or sys.executable]
    spec = systemd.build_spec(user.pw_name, str(tmp_path / "agent.toml"), program)
    path = tmp_path / systemd.UNIT_NAME
    path.write_text(systemd.render_unit(spec))
    proc = subprocess.run(["systemd-analyze", "verify", str(path)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    # verify reports unknown keys and unparsable values as warnings with exit code 0
    assert proc.stderr.strip() == "", proc.stderr

    broken = tmp_path / "broken" / systemd.UNIT_NAME
    broken.parent.mkdir()
    broken.write_text(path.read_text().replace("Restart=on-failure", "Restart=sometimes"))
    proc = subprocess.run(["systemd-analyze", "verify", str(broken)], capture_output=True,
                          text=True, timeout=60)
    assert "sometimes" in proc.stderr  # the check above would catch a bad value


def test_install_and_uninstall_into_a_unit_dir(tmp_path, user, capsys):
    units = tmp_path / "units"
    path = systemd.install(user.pw_name, str(tmp_path / "agent.toml"), units, dry_run=False)
    assert path == units / systemd.UNIT_NAME
    text = path.read_text()
    assert f"User={user.pw_name}" in text
    assert oct(path.stat().st_mode & 0o777) == oct(0o644)
    assert [p.name for p in units.iterdir()] == [systemd.UNIT_NAME]  # no temp file left
    assert "systemctl link" in capsys.readouterr().out
    systemd.uninstall(units, dry_run=False)
    assert not path.exists()
    with pytest.raises(systemd.ServiceInstallError, match="not installed"):
        systemd.uninstall(units, dry_run=False)


def test_dry_run_writes_nothing_and_shows_the_systemctl_steps(tmp_path, user, capsys):
    path = systemd.install(user.pw_name, None, None, dry_run=True)
    out = capsys.readouterr().out
    assert path == systemd.SYSTEM_UNIT_DIR / systemd.UNIT_NAME
    assert "# would run: systemctl enable --now herd-agent.service" in out
    assert "[Service]" in out
    systemd.uninstall(None, dry_run=True)
    out = capsys.readouterr().out
    assert "systemctl disable --now herd-agent.service" in out
    assert f"would remove {path}" in out


def test_desktop_entry_opens_the_pin_window_on_the_services_state(tmp_path, user):
    spec = systemd.build_spec(user.pw_name, None, program=["/opt/herd tools/herd-agent"])
    entry = parse_unit(systemd.render_desktop_entry(spec))["Desktop Entry"]
    assert entry["Name"] == "Show pairing PIN" and entry["Name[zh_CN]"] == "显示配对 PIN"
    assert entry["Terminal"] == "false" and entry["Type"] == "Application"
    # the service runs with HOME set and no XDG_STATE_HOME: its state is where platformdirs
    # puts it for that home, and the entry points the window there
    env = {"HOME": user.pw_dir, "PATH": os.environ.get("PATH", "")}
    where = subprocess.run([sys.executable, "-c", "from agent.settings import default_state_dir; "
                            "print(default_state_dir())"], env={**env, "PYTHONPATH": os.pathsep.join(sys.path)},
                           capture_output=True, text=True, check=True).stdout.strip()
    assert spec.state_dir == where
    assert entry["Exec"] == "\"/opt/herd tools/herd-agent\" pin --window --state-dir " + \
        systemd.desktop_exec_arg(where)


@pytest.mark.parametrize("arg, expected", [
    ("/usr/bin/herd-agent", "/usr/bin/herd-agent"),
    ("/opt/my dir/herd-agent", '"/opt/my dir/herd-agent"'),
    ("100%", "100%%"),
    ('say "hi" $HOME', '"say \\\\"hi\\\\" \\\\$HOME"'),
])
def test_desktop_exec_arguments_are_quoted(arg, expected):
    assert systemd.desktop_exec_arg(arg) == expected


def test_desktop_entry_passes_desktop_file_validate(tmp_path, user):
    if shutil.which("desktop-file-validate") is None:
        msg = "desktop-file-validate not installed (apt-get install desktop-file-utils)"
        if IN_CI:
            pytest.fail(msg)
        pytest.skip(msg)
    spec = systemd.build_spec(user.pw_name, None, program=["/opt/herd tools/herd-agent"])
    path = tmp_path / systemd.DESKTOP_NAME
    path.write_text(systemd.render_desktop_entry(spec), encoding="utf-8")
    proc = subprocess.run(["desktop-file-validate", str(path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "", proc.stdout + proc.stderr
    # the check above would catch a broken entry
    path.write_text(path.read_text().replace("Type=Application", "Type=Program"))
    proc = subprocess.run(["desktop-file-validate", str(path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "Program" in proc.stdout


def test_install_writes_and_uninstall_removes_the_desktop_entry(tmp_path, user, capsys):
    units, apps = tmp_path / "units", tmp_path / "applications"
    systemd.install(user.pw_name, None, units, dry_run=False, apps_dir=apps)
    entry = apps / systemd.DESKTOP_NAME
    assert "pin --window" in entry.read_text()
    assert oct(entry.stat().st_mode & 0o777) == oct(0o644)  # every desktop user's menu reads it
    assert [p.name for p in apps.iterdir()] == [systemd.DESKTOP_NAME]  # no temp file left
    assert "Show pairing PIN" in capsys.readouterr().out
    systemd.uninstall(units, dry_run=False, apps_dir=apps)
    assert not entry.exists()
    # a unit written for an image goes without an entry unless a folder is named for it
    systemd.install(user.pw_name, None, units, dry_run=False)
    assert not apps.exists() or not any(apps.iterdir())
    assert [p.name for p in units.iterdir()] == [systemd.UNIT_NAME]


def test_dry_run_shows_the_desktop_entry_for_the_system_service(user, capsys):
    systemd.install(user.pw_name, None, None, dry_run=True)
    out = capsys.readouterr().out
    assert f"# would write {systemd.SYSTEM_APPS_DIR / systemd.DESKTOP_NAME}" in out
    assert "Name=Show pairing PIN" in out
    systemd.uninstall(None, dry_run=True)
    assert f"would remove {systemd.SYSTEM_APPS_DIR / systemd.DESKTOP_NAME}" in capsys.readouterr().out
