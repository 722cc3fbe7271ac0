"""Serving from login (#36): ``herd service install PROFILE`` starts ``herd up PROFILE`` whenever
the user logs in, with no window; ``herd service remove`` undoes it; ``herd service status`` says
what is installed and whether it serves.

The mechanism depends on the system:

* **Linux, systemd user session** — a user unit ``~/.config/systemd/user/herd-cluster.service``
  (``Restart=on-failure``, ``WantedBy=default.target``), enabled with ``systemctl --user enable
  --now``. systemd restarts a failed cluster and keeps its output in the journal.
* **Linux without a systemd user session** (a container, a desktop started without
  ``systemd --user``) — an XDG autostart entry ``~/.config/autostart/herd-cluster.desktop``,
  which every XDG desktop runs at login. Nothing restarts it when it fails.
* **Windows** — a per-user task run at logon (``schtasks /Create /SC ONLOGON``). Chosen over a
  shortcut in the Startup folder because a task can be queried and removed by name with the
  same tool and needs no COM shell link; it runs with the user's limited rights.
* **macOS** — a LaunchAgent ``~/Library/LaunchAgents/org.llama-herd.cluster.plist``
  (``RunAtLoad``, restarted when it exits with an error), loaded with ``launchctl bootstrap``.

The profile is copied into herd's config folder first (checked by the profile reader), so the
service does not depend on a file the user may move or edit later.

One owner of the endpoint: every ``herd up`` that serves writes :func:`serving_path` (its pid,
endpoint and profile; atomically; removed when it stops). The app and another ``herd up`` read
it with :func:`serving_record` and, when the port they would use is already served by herd,
attach to that endpoint instead of starting a second cluster.

The unit and desktop-entry quoting is the agent's (:mod:`agent.systemd`): one writer of each
syntax in the project.
"""

from __future__ import annotations

import json
import os
import plistlib
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from agent.files import write_atomic
from agent.systemd import desktop_exec_arg, quote_arg
from gui.cluster.launching.profile import Profile, ProfileError, load_profile, save_profile
from gui.cluster.nodes.records import CONFIG_ENV, config_dir

UNIT_NAME = "herd-cluster.service"
DESKTOP_NAME = "herd-cluster.desktop"
TASK_NAME = "llama-herd cluster"
AGENT_LABEL = "org.llama-herd.cluster"
PROFILE_NAME = "service-profile.json"
SERVING_NAME = "serving.json"

SYSTEMD, AUTOSTART, SCHTASKS, LAUNCHD = "systemd", "autostart", "schtasks", "launchd"
MECHANISMS = (SYSTEMD, AUTOSTART, SCHTASKS, LAUNCHD)

#: Runs a command and returns (exit status, its output); tests pass their own to see the calls.
Runner = Callable[[Sequence[str]], "tuple[int, str]"]


class LoginServiceError(RuntimeError):
    """The service cannot be installed, removed or read as asked; the message says why and what
    to do."""


def run_command(argv: Sequence[str]) -> tuple[int, str]:
    """Run ``argv`` (no shell, no input); ``(exit status, stdout+stderr)``; a missing program is
    status 127 with a sentence, as a shell would say it."""
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60)
    except FileNotFoundError:
        return 127, f"{argv[0]}: not found"
    except subprocess.TimeoutExpired:
        return 124, f"{argv[0]}: no answer within 60 s"
    return proc.returncode, (proc.stdout + proc.stderr).strip()


# --------------------------------------------------------------------------------------------
# where things go


@dataclass(frozen=True)
class Places:
    """Where the service's files go, from the home folder and herd's config folder.

    Attributes:
        home: the user's home folder.
        config: herd's config folder (the copied profile and the serving record live there).
        xdg_config: ``$XDG_CONFIG_HOME`` or ``~/.config`` (systemd user units, autostart).
    """

    home: Path
    config: Path
    xdg_config: Path

    @classmethod
    def here(cls) -> Places:
        """The current user's places (``$HOME``, ``$XDG_CONFIG_HOME``, ``$HERD_CONFIG_DIR``)."""
        home = Path.home()
        xdg = os.environ.get("XDG_CONFIG_HOME")
        return cls(home=home, config=config_dir(), xdg_config=Path(xdg) if xdg else home / ".config")

    @property
    def profile(self) -> Path:
        return self.config / PROFILE_NAME

    def file_of(self, mechanism: str) -> Path | None:
        """The file ``mechanism`` installs (None for a Windows task, which lives in the scheduler)."""
        return {SYSTEMD: self.xdg_config / "systemd" / "user" / UNIT_NAME,
                AUTOSTART: self.xdg_config / "autostart" / DESKTOP_NAME,
                LAUNCHD: self.home / "Library" / "LaunchAgents" / f"{AGENT_LABEL}.plist"}.get(mechanism)


def herd_program() -> list[str]:
    """The absolute command that runs this very ``herd``: this Python with its ``gui.main`` (so a
    venv or pipx install runs its own copy), or the frozen executable."""
    if getattr(sys, "frozen", False):
        return [str(Path(sys.executable).resolve())]
    return [str(Path(sys.executable).absolute()), "-m", "gui.main"]


def up_command(profile: Path, program: Sequence[str] | None = None) -> list[str]:
    """The command the service runs: ``herd up PROFILE``."""
    return [*(program or herd_program()), "up", str(profile)]


def user_bus_answers(run: Runner = run_command) -> tuple[bool, str]:
    """Whether a systemd user manager answers here (``systemctl --user`` can reach it), and why not."""
    if shutil.which("systemctl") is None:
        return False, "systemctl is not installed"
    status, out = run(["systemctl", "--user", "show-environment"])
    if status != 0:
        return False, (out.splitlines() or ["systemctl --user does not answer"])[-1]
    return True, ""


def choose_mechanism(platform: str = sys.platform, run: Runner = run_command) -> tuple[str, str]:
    """``(mechanism, why)`` for this system (see the module docstring)."""
    if platform == "win32":
        return SCHTASKS, "Windows: a task the Task Scheduler runs when you log on"
    if platform == "darwin":
        return LAUNCHD, "macOS: a LaunchAgent that launchd starts when you log in"
    ok, why = user_bus_answers(run)
    if ok:
        return SYSTEMD, "a systemd user session answers, so systemd starts it at login and restarts it if it fails"
    return AUTOSTART, (f"there is no systemd user session here ({why}), so an XDG autostart entry starts it "
                       "when your desktop session begins (nothing restarts it if it fails)")


# --------------------------------------------------------------------------------------------
# what is written


def render_user_unit(command: Sequence[str], env: dict[str, str] | None = None) -> str:
    """The text of ``herd-cluster.service``: ``command`` (absolute program first) run at login."""
    exec_start = " ".join(quote_arg(a) for a in command)
    lines = "".join(f"Environment={quote_arg(f'{k}={v}')}\n" for k, v in (env or {}).items())
    return f"""\
# Written by `herd service install`; `herd service remove` removes it.
[Unit]
Description=llama-herd cluster (herd up on the profile kept by herd service install)
Documentation=https://pypi.org/project/llama-herd/
Wants=network-online.target
After=network-online.target

[Service]
Type=exec
Environment=PYTHONUNBUFFERED=1
{lines}ExecStart={exec_start}
Restart=on-failure
RestartSec=10
# herd up stops llama-server and the workers it started on SIGTERM; stragglers get SIGKILL after.
KillMode=mixed
TimeoutStopSec=30

[Install]
WantedBy=default.target
"""


def render_autostart_entry(command: Sequence[str], env: dict[str, str] | None = None) -> str:
    """The text of the XDG autostart entry that runs ``command`` at login (``env`` through
    ``env(1)``, which a desktop entry's ``Exec=`` needs for variables)."""
    prefix = ["env", *(f"{k}={v}" for k, v in env.items())] if env else []
    exec_line = " ".join(desktop_exec_arg(a) for a in (*prefix, *command))
    return f"""\
[Desktop Entry]
Type=Application
Version=1.4
Name=llama-herd cluster
Name[zh_CN]=llama-herd 集群
Comment=Serve the llama-herd cluster from login (herd service install)
Comment[zh_CN]=登录时启动 llama-herd 集群（herd service install）
Exec={exec_line}
Terminal=false
NoDisplay=true
X-GNOME-Autostart-enabled=true
"""


def render_launch_agent(command: Sequence[str], log: Path, env: dict[str, str] | None = None) -> bytes:
    """The LaunchAgent plist that runs ``command`` at login, output to ``log``."""
    doc = {"Label": AGENT_LABEL, "ProgramArguments": list(command), "RunAtLoad": True,
           "KeepAlive": {"SuccessfulExit": False}, "ProcessType": "Background",
           "StandardOutPath": str(log), "StandardErrorPath": str(log)}
    if env:
        doc["EnvironmentVariables"] = dict(env)
    return plistlib.dumps(doc)


def schtasks_create(command: Sequence[str]) -> list[str]:
    """The ``schtasks`` command line that makes the logon task running ``command``."""
    return ["schtasks", "/Create", "/SC", "ONLOGON", "/TN", TASK_NAME, "/TR",
            subprocess.list2cmdline(list(command)), "/RL", "LIMITED", "/F"]


# --------------------------------------------------------------------------------------------
# install, remove, status


def copy_profile(source: str | os.PathLike, places: Places) -> tuple[Path, Profile]:
    """Check ``source`` with the profile reader and keep a copy in herd's config folder; a refused
    profile is a :class:`LoginServiceError` naming the argument and why."""
    try:
        profile = load_profile(source)
    except ProfileError as exc:
        why = str(exc) if str(source) in str(exc) else f"{source}: {exc}"
        raise LoginServiceError(f"PROFILE: {why}") from None
    return save_profile(places.profile, profile), profile


def _environment() -> dict[str, str]:
    """What the service must see that login does not give it: a config folder chosen by
    ``$HERD_CONFIG_DIR`` (pairings, remembered nodes) stays the same one."""
    return {CONFIG_ENV: os.environ[CONFIG_ENV]} if os.environ.get(CONFIG_ENV) else {}


def install(source: str | os.PathLike, *, mechanism: str | None = None, places: Places | None = None,
            platform: str = sys.platform, run: Runner = run_command,
            program: Sequence[str] | None = None) -> list[str]:
    """Install the login service for the profile ``source``; returns what was done, line by line."""
    places = places or Places.here()
    why = "chosen with --mechanism"
    if mechanism is None:
        mechanism, why = choose_mechanism(platform, run)
    kept, profile = copy_profile(source, places)
    command, env = up_command(kept, program), _environment()
    said = [f"kept the profile as {kept} (model {profile.model.path}, port {profile.server.port})",
            f"mechanism: {mechanism} — {why}"]
    path = places.file_of(mechanism)
    if mechanism == SYSTEMD:
        write_atomic(path, render_user_unit(command, env), 0o644)
        said.append(f"wrote {path}")
        said += _enable_unit(run)
    elif mechanism == AUTOSTART:
        write_atomic(path, render_autostart_entry(command, env), 0o644)
        said.append(f"wrote {path}; it starts at your next login")
    elif mechanism == LAUNCHD:
        log = places.home / "Library" / "Logs" / "llama-herd-cluster.log"
        write_atomic(path, render_launch_agent(command, log, env), 0o644)
        said.append(f"wrote {path} (output in {log})")
        said += _checked(run, ["launchctl", "bootstrap", f"gui/{os.getuid()}", str(path)], "loaded it")
    else:
        if env:  # a task runs one command line: the variable cannot ride along
            said.append(f"note: {CONFIG_ENV} is not passed to the task; it uses the default config folder")
        said += _checked(run, schtasks_create(command), f"created the logon task {TASK_NAME!r}")
    return said


def _checked(run: Runner, argv: list[str], done: str) -> list[str]:
    status, out = run(argv)
    if status != 0:
        raise LoginServiceError(f"{' '.join(argv[:2])} failed ({out or f'exit status {status}'})")
    return [done]


def _enable_unit(run: Runner) -> list[str]:
    ok, why = user_bus_answers(run)
    if not ok:
        return [f"not enabled: there is no systemd user session here ({why}); in your desktop session run "
                f"`systemctl --user daemon-reload && systemctl --user enable --now {UNIT_NAME}`"]
    said = _checked(run, ["systemctl", "--user", "daemon-reload"], "reloaded the user units")
    return said + _checked(run, ["systemctl", "--user", "enable", "--now", UNIT_NAME],
                           f"enabled and started {UNIT_NAME}; logs: journalctl --user -u herd-cluster -f")


def installed(places: Places | None = None, platform: str = sys.platform, run: Runner = run_command) -> str | None:
    """The mechanism of the installed service, or None."""
    places = places or Places.here()
    if platform == "win32":
        return SCHTASKS if run(["schtasks", "/Query", "/TN", TASK_NAME])[0] == 0 else None
    order = (LAUNCHD,) if platform == "darwin" else (SYSTEMD, AUTOSTART)
    return next((m for m in order if places.file_of(m).exists()), None)


def remove(places: Places | None = None, platform: str = sys.platform, run: Runner = run_command) -> list[str]:
    """Stop and remove the installed service and its copy of the profile; what was done."""
    places = places or Places.here()
    mechanism = installed(places, platform, run)
    if mechanism is None:
        raise LoginServiceError("no login service is installed (herd service install PROFILE makes one)")
    said: list[str] = []
    path = places.file_of(mechanism)
    if mechanism == SYSTEMD:
        if user_bus_answers(run)[0]:
            run(["systemctl", "--user", "disable", "--now", UNIT_NAME])  # may be inactive already
            said.append(f"stopped and disabled {UNIT_NAME}")
        path.unlink()
        if user_bus_answers(run)[0]:
            run(["systemctl", "--user", "daemon-reload"])
    elif mechanism == LAUNCHD:
        run(["launchctl", "bootout", f"gui/{os.getuid()}/{AGENT_LABEL}"])  # may be unloaded already
        path.unlink()
    elif mechanism == SCHTASKS:
        said += _checked(run, ["schtasks", "/Delete", "/TN", TASK_NAME, "/F"], f"deleted the task {TASK_NAME!r}")
    else:
        path.unlink()
    if path is not None:
        said.append(f"removed {path}")
    places.profile.unlink(missing_ok=True)
    return said


def status(places: Places | None = None, platform: str = sys.platform, run: Runner = run_command) -> list[str]:
    """Installed or not, which mechanism, the profile, and whether it serves — line by line."""
    places = places or Places.here()
    mechanism = installed(places, platform, run)
    serving = serving_record(places.config)
    if mechanism is None:
        lines = ["login service: not installed"]
    else:
        where = places.file_of(mechanism)
        lines = [f"login service: installed ({mechanism}{f', {where}' if where else ''})",
                 f"profile: {places.profile}" + ("" if places.profile.exists() else " (missing: install again)")]
        if mechanism == SYSTEMD and user_bus_answers(run)[0]:
            lines.append(f"systemd: {run(['systemctl', '--user', 'is-active', UNIT_NAME])[1] or 'unknown'}")
    if serving is not None:
        lines.append(f"running: yes, herd up (pid {serving.pid}) serves {serving.url} with {serving.profile or 'a model'}")
    else:
        lines.append("running: no")
    return lines


# --------------------------------------------------------------------------------------------
# one owner of the endpoint


@dataclass(frozen=True)
class Serving:
    """What a serving ``herd up`` wrote about itself.

    Attributes:
        pid: its process id.
        host, port: where its endpoint listens.
        url: the endpoint's base URL (without ``/v1``).
        profile: the profile it serves ("" when started from a model or plan).
        model: the model file.
    """

    pid: int
    host: str
    port: int
    url: str
    profile: str = ""
    model: str = ""


def serving_path(config: Path | None = None) -> Path:
    """Where a serving ``herd up`` keeps its record."""
    return (config or config_dir()) / SERVING_NAME


def write_serving(record: Serving, config: Path | None = None) -> Path:
    """Write the record atomically (``herd up`` calls this once the model is loaded)."""
    return write_atomic(serving_path(config), json.dumps(record.__dict__, indent=2) + "\n", 0o600)


def clear_serving(config: Path | None = None, pid: int | None = None) -> None:
    """Remove the record (only if it is ``pid``'s, when given: a newer owner keeps its own)."""
    path = serving_path(config)
    current = serving_record(config, check_alive=False)
    if pid is None or current is None or current.pid == pid:
        path.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    import psutil  # noqa: PLC0415 - only here

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def serving_record(config: Path | None = None, *, check_alive: bool = True) -> Serving | None:
    """The record of the ``herd up`` serving now, or None (none, unreadable, or its process gone:
    a ``herd up`` killed with SIGKILL leaves its record behind)."""
    try:
        doc = json.loads(serving_path(config).read_text(encoding="utf-8"))
        record = Serving(pid=int(doc["pid"]), host=str(doc["host"]), port=int(doc["port"]), url=str(doc["url"]),
                         profile=str(doc.get("profile", "")), model=str(doc.get("model", "")))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if check_alive and not _alive(record.pid):
        return None
    return record


def owner_of_port(port: int, config: Path | None = None) -> Serving | None:
    """The serving ``herd up`` whose endpoint is on ``port`` (another process than this one)."""
    record = serving_record(config)
    if record is None or record.port != port or record.pid == os.getpid():
        return None
    return record
