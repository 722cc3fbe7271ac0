"""``herd service install|remove|status`` (#36 item 2): the real ``herd`` program with ``HOME``,
``XDG_CONFIG_HOME`` and ``HERD_CONFIG_DIR`` in a temporary folder, checked with systemd's and the
desktop's own validators. This machine has no systemd user session (a container), which is the
case the XDG autostart fallback is for; the unit itself is written with ``--mechanism systemd``.
Windows' ``schtasks`` and macOS' ``launchctl`` cannot be had here: a stand-in script on ``PATH``
records how it was called (said where used)."""

from __future__ import annotations

import configparser
import os
import plistlib
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from e2e.herd_cli import herd

from gui.cluster.launching import login_service as ls
from gui.cluster.launching.profile import load_profile, make_profile, save_profile
from gui.cluster.llama.model import inspect_model
from gui.cluster.planning.plan import Plan

ROOT = Path(__file__).resolve().parents[2]
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _env(tmp_path: Path, **more) -> dict:
    env = {**os.environ, "HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "home" / ".config"),
           "HERD_CONFIG_DIR": str(tmp_path / "config"), "PYTHONPATH": str(ROOT)}
    # No user bus to reach: the login service must not touch the real user's session.
    env.pop("DBUS_SESSION_BUS_ADDRESS", None)
    env["XDG_RUNTIME_DIR"] = str(tmp_path / "no-runtime")
    env.update(more)
    return env


def _places(tmp_path: Path) -> ls.Places:
    home = tmp_path / "home"
    return ls.Places(home=home, config=tmp_path / "config", xdg_config=home / ".config")


@pytest.fixture
def profile(tmp_path, demo_model) -> Path:
    """A profile serving the demo model on this computer alone, in a folder the user may clear."""
    info = inspect_model(demo_model)
    made = make_profile(Plan(info.n_layer, info.n_slots, ()), info, [], ctx=1024, port=8199)
    return save_profile(tmp_path / "downloads" / "family.json", made)


def _parse(text: str) -> configparser.ConfigParser:
    cp = configparser.ConfigParser(strict=False, interpolation=None, delimiters=("=",))
    cp.optionxform = str
    cp.read_string(text)
    return cp


def _need(tool: str, package: str) -> None:
    if shutil.which(tool) is None:
        if IN_CI:
            pytest.fail(f"{tool} not installed (apt-get install {package})")
        pytest.skip(f"{tool} not installed (apt-get install {package})")


def test_install_writes_a_user_unit_that_systemd_accepts_and_runs_herd_up_on_the_kept_profile(tmp_path, profile):
    _need("systemd-analyze", "systemd")
    r = herd(["service", "install", profile, "--mechanism", "systemd"], _env(tmp_path), timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    unit = tmp_path / "home" / ".config" / "systemd" / "user" / ls.UNIT_NAME
    kept = tmp_path / "config" / ls.PROFILE_NAME
    assert f"wrote {unit}" in r.stdout and "not enabled: there is no systemd user session here" in r.stdout
    # the service does not depend on the user's file: a copy, checked by the profile reader
    profile.unlink()
    assert load_profile(kept).server.port == 8199
    svc = _parse(unit.read_text())
    argv = shlex.split(svc["Service"]["ExecStart"])
    assert argv == [sys.executable, "-m", "gui.main", "up", str(kept)]
    assert Path(argv[0]).is_absolute()
    assert svc["Service"]["Restart"] == "on-failure" and svc["Install"]["WantedBy"] == "default.target"
    # the config folder it was installed with (pairings, nodes) is the one it runs with
    assert f"HERD_CONFIG_DIR={tmp_path / 'config'}" in svc["Service"]["Environment"]
    (tmp_path / "runtime").mkdir(mode=0o700)  # systemd-analyze --user keeps its scratch files there
    proc = subprocess.run(["systemd-analyze", "--user", "verify", str(unit)], capture_output=True, text=True,
                          timeout=60, env=_env(tmp_path, XDG_RUNTIME_DIR=str(tmp_path / "runtime")))
    assert proc.returncode == 0 and proc.stderr.strip() == "", proc.stderr
    assert [p.name for p in unit.parent.iterdir()] == [ls.UNIT_NAME]  # written atomically: no temp left

    r = herd(["service", "status"], _env(tmp_path), timeout=60)
    assert r.returncode == 0, r.stderr
    assert f"login service: installed (systemd, {unit})" in r.stdout and f"profile: {kept}" in r.stdout
    assert "running: no" in r.stdout

    r = herd(["service", "remove"], _env(tmp_path), timeout=60)
    assert r.returncode == 0 and f"removed {unit}" in r.stdout, r.stdout + r.stderr
    assert not unit.exists() and not kept.exists()
    r = herd(["service", "status"], _env(tmp_path), timeout=60)
    assert "login service: not installed" in r.stdout
    r = herd(["service", "remove"], _env(tmp_path), timeout=60)
    assert r.returncode == 1 and "no login service is installed" in r.stderr, r.stderr


def test_without_a_systemd_user_session_install_writes_an_xdg_autostart_entry_and_says_why(tmp_path, profile):
    _need("desktop-file-validate", "desktop-file-utils")
    r = herd(["service", "install", profile], _env(tmp_path), timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "mechanism: autostart — there is no systemd user session here" in r.stdout, r.stdout
    entry = tmp_path / "home" / ".config" / "autostart" / ls.DESKTOP_NAME
    desk = _parse(entry.read_text())["Desktop Entry"]
    assert desk["Name[zh_CN]"] == "llama-herd 集群"
    exec_argv = shlex.split(desk["Exec"].replace("\\\\", "\\"))
    kept = tmp_path / "config" / ls.PROFILE_NAME
    assert exec_argv == ["env", f"HERD_CONFIG_DIR={tmp_path / 'config'}", sys.executable, "-m", "gui.main",
                         "up", str(kept)]
    proc = subprocess.run(["desktop-file-validate", str(entry)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "", proc.stdout + proc.stderr
    r = herd(["service", "status"], _env(tmp_path), timeout=60)
    assert f"login service: installed (autostart, {entry})" in r.stdout, r.stdout
    assert herd(["service", "remove"], _env(tmp_path), timeout=60).returncode == 0
    assert not entry.exists()


def test_a_refused_profile_is_refused_in_words_naming_the_argument(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "llama-herd-profile", "version": 1}')
    r = herd(["service", "install", bad], _env(tmp_path), timeout=60)
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stderr == f"herd service install: PROFILE: {bad}: profile.engine: missing\n", r.stderr
    assert not (tmp_path / "home" / ".config" / "autostart").exists()
    assert not (tmp_path / "config" / ls.PROFILE_NAME).exists()


def _stand_in(folder: Path, name: str, status: int = 0) -> Path:
    """A stand-in for a program this machine cannot have (Windows' schtasks, macOS' launchctl):
    it appends its arguments, one per line, to ``<name>.calls`` and exits with ``status``."""
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / f"{name}.calls"
    script = folder / name
    script.write_text(f"#!{sys.executable}\nimport sys\n"
                      f"open({str(log)!r}, 'a').write('\\n'.join(sys.argv[1:]) + '\\n--\\n')\n"
                      f"sys.exit({status})\n")
    script.chmod(0o755)
    return log


def _calls(log: Path) -> list[list[str]]:
    return [c.strip("\n").split("\n") for c in log.read_text().split("--\n") if c.strip()]


def test_windows_creates_a_logon_task_running_herd_up(tmp_path, profile, monkeypatch):
    """Windows cannot be had here: ``schtasks`` is a stand-in that records its arguments."""
    log = _stand_in(tmp_path / "bin", "schtasks")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("HERD_CONFIG_DIR", raising=False)
    places = _places(tmp_path)
    said = ls.install(profile, places=places, platform="win32", program=[r"C:\Program Files\herd\herd.exe"])
    assert "mechanism: schtasks — Windows: a task the Task Scheduler runs when you log on" in said
    create = _calls(log)[0]
    assert create[:6] == ["/Create", "/SC", "ONLOGON", "/TN", ls.TASK_NAME, "/TR"]
    assert create[6] == f'"C:\\Program Files\\herd\\herd.exe" up {places.profile}'
    assert create[7:] == ["/RL", "LIMITED", "/F"]
    assert ls.installed(places, "win32") == ls.SCHTASKS  # /Query answered 0
    ls.remove(places, "win32")
    assert _calls(log)[-1] == ["/Delete", "/TN", ls.TASK_NAME, "/F"]
    assert not places.profile.exists()
    # a task the scheduler refuses is said, with its words
    _stand_in(tmp_path / "bin", "schtasks", status=1)
    with pytest.raises(ls.LoginServiceError, match="schtasks /Create failed"):
        ls.install(profile, places=places, platform="win32")


def test_macos_writes_a_launch_agent_and_loads_it(tmp_path, profile, monkeypatch):
    """macOS cannot be had here: ``launchctl`` is a stand-in that records its arguments."""
    log = _stand_in(tmp_path / "bin", "launchctl")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    places = _places(tmp_path)
    ls.install(profile, places=places, platform="darwin")
    plist = tmp_path / "home" / "Library" / "LaunchAgents" / f"{ls.AGENT_LABEL}.plist"
    doc = plistlib.loads(plist.read_bytes())
    assert doc["Label"] == ls.AGENT_LABEL and doc["RunAtLoad"] is True
    assert doc["ProgramArguments"] == [sys.executable, "-m", "gui.main", "up", str(places.profile)]
    assert doc["KeepAlive"] == {"SuccessfulExit": False}
    assert _calls(log) == [["bootstrap", f"gui/{os.getuid()}", str(plist)]]
    assert ls.status(places, "darwin")[0] == f"login service: installed (launchd, {plist})"
    ls.remove(places, "darwin")
    assert not plist.exists() and _calls(log)[-1] == ["bootout", f"gui/{os.getuid()}/{ls.AGENT_LABEL}"]


def test_the_serving_record_names_a_live_owner_only(tmp_path):
    config = tmp_path / "config"
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        ls.write_serving(ls.Serving(pid=child.pid, host="127.0.0.1", port=8199, url="http://127.0.0.1:8199",
                                    profile="/p.json"), config)
        assert ls.owner_of_port(8199, config).pid == child.pid
        assert ls.owner_of_port(8080, config) is None  # another port is free for another cluster
        ls.clear_serving(config, pid=child.pid + 1)  # not its record: kept
        assert ls.serving_record(config) is not None
    finally:
        child.kill()
        child.wait()
    assert ls.owner_of_port(8199, config) is None  # killed with its record left behind: no owner
    ls.clear_serving(config, pid=child.pid)
    assert not ls.serving_path(config).exists()


@pytest.mark.engine
@pytest.mark.slow
def test_a_second_herd_up_on_the_served_port_attaches_instead_of_starting(tmp_path, engine, smollm2, procs):
    """One owner of the endpoint: a real ``herd up`` serves SmolLM2 on this computer; a second one
    on the same port (as the login service and the user would both start) says who serves and
    where, and starts nothing; the record goes when the first stops."""
    import httpx
    from conftest import free_port
    from e2e.herd_cli import HERD, HerdUp

    info = inspect_model(smollm2)
    port = free_port()
    served = save_profile(tmp_path / "home.json", make_profile(Plan(info.n_layer, info.n_slots, ()), info, [],
                                                               ctx=512, port=port))
    # HOME is a temporary folder here: the engine is named where it is
    env = _env(tmp_path, LLAMA_CACHE=str(tmp_path / "cache"), HERD_ENGINE_DIR=str(Path(engine.llama_server).parent))
    up = HerdUp(procs.popen(HERD + ["up", served, "--no-mdns", "--timeout", "0", "--threads", "1"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    up.wait_for("Serving", 180)
    record = ls.serving_record(tmp_path / "config")
    assert (record.pid, record.port, record.profile) == (up.proc.pid, port, str(served))
    status = herd(["service", "status"], env, timeout=60)
    assert f"running: yes, herd up (pid {up.proc.pid}) serves http://127.0.0.1:{port}" in status.stdout, status.stdout

    second = herd(["up", served, "--no-mdns", "--timeout", "0", "--threads", "1"], env, timeout=120)
    assert second.returncode == 1, second.stdout + second.stderr
    assert (f"herd up: herd already serves on port {port} (herd up, pid {up.proc.pid}, profile {served}): "
            f"use http://127.0.0.1:{port}/v1") in second.stderr, second.stderr
    assert "Starting" not in second.stdout
    assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=10).status_code == 200  # the first still serves
    assert ls.serving_record(tmp_path / "config").pid == up.proc.pid  # and still owns the record

    up.proc.send_signal(signal.SIGINT)
    assert up.proc.wait(timeout=60) == 0, "\n".join(up.lines)
    assert not ls.serving_path(tmp_path / "config").exists()


def test_with_a_user_session_the_unit_is_enabled_and_started_and_status_asks_systemd(tmp_path, profile):
    """This container has no systemd user session to enable a unit in: a stand-in for
    ``systemctl --user`` answers here, recording what herd asks of it."""
    calls: list[list[str]] = []

    def user_systemctl(argv):
        calls.append(list(argv))
        return (0, "active") if argv[:3] == ["systemctl", "--user", "is-active"] else (0, "")

    places = _places(tmp_path)
    said = ls.install(profile, places=places, platform="linux", run=user_systemctl)
    assert said[1].startswith("mechanism: systemd — a systemd user session answers")
    assert ["systemctl", "--user", "enable", "--now", ls.UNIT_NAME] in calls
    assert calls.index(["systemctl", "--user", "daemon-reload"]) < calls.index(
        ["systemctl", "--user", "enable", "--now", ls.UNIT_NAME])
    assert "systemd: active" in ls.status(places, "linux", run=user_systemctl)
    ls.remove(places, "linux", run=user_systemctl)
    assert ["systemctl", "--user", "disable", "--now", ls.UNIT_NAME] in calls
    assert not places.file_of(ls.SYSTEMD).exists()
