"""``herd-agent install-service`` / ``uninstall-service``: the agent as a systemd service.

``install-service`` writes ``/etc/systemd/system/herd-agent.service`` and enables it
(``systemctl enable --now``), and adds the menu item "Show pairing PIN"
(``/usr/share/applications/herd-agent-pin.desktop``), which opens ``herd-agent pin --window`` on
the service's state, so the person at the worker pairs it without a terminal. The unit runs the agent as an unprivileged user (by default the
one who ran ``sudo``), restarts it when it fails, sends its output to the journal
(``journalctl -u herd-agent``) and applies the hardening options that cost the agent nothing.
``uninstall-service`` stops, disables and removes it.

``--dry-run`` prints the unit and the commands instead of acting; ``--unit-dir DIR`` writes the
unit somewhere else (an image or package being built) and leaves systemctl alone.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from agent.files import write_atomic

UNIT_NAME = "herd-agent.service"
SYSTEM_UNIT_DIR = Path("/etc/systemd/system")
#: The desktop entry "Show pairing PIN" (the menu item that opens ``herd-agent pin --window``).
DESKTOP_NAME = "herd-agent-pin.desktop"
SYSTEM_APPS_DIR = Path("/usr/share/applications")
MAKE_USER = "`sudo useradd --system --create-home --home-dir /var/lib/herd herd`"


class ServiceInstallError(RuntimeError):
    """The service cannot be installed or removed as asked; the message says why and what to do."""


@dataclass(frozen=True)
class UnitSpec:
    """What goes into the unit.

    Attributes:
        user: the account the agent runs as (never root).
        group: that account's primary group.
        home: its home folder (the agent keeps its state and engine there).
        exec_start: the command line, first element the absolute path of the program.
        config: the config file the agent is pointed at.
        program: the command that starts ``herd-agent`` (the start of ``exec_start``).
        state_dir: where the service keeps its state (the PIN window reads it there).
    """

    user: str
    group: str
    home: str
    exec_start: tuple[str, ...]
    config: str
    program: tuple[str, ...] = ()
    state_dir: str = ""


def quote_arg(arg: str) -> str:
    """One ``ExecStart=`` argument in systemd's syntax.

    ``%`` starts a specifier and ``$`` a variable, so both are doubled; arguments with spaces,
    quotes or backslashes are double-quoted with C-style escapes.
    """
    arg = arg.replace("%", "%%").replace("$", "$$")
    if arg and not any(c in arg for c in ' \t"\'\\;'):
        return arg
    return '"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render_unit(spec: UnitSpec) -> str:
    """The text of ``herd-agent.service`` for ``spec``."""
    exec_start = " ".join(quote_arg(a) for a in spec.exec_start)
    return f"""\
# Written by `herd-agent install-service`; `herd-agent uninstall-service` removes it.
[Unit]
Description=llama-herd worker agent (runs llama.cpp's RPC worker for the cluster)
Documentation=https://pypi.org/project/llama-herd/
# The agent advertises itself over mDNS on the LAN interfaces: wait until they have addresses.
Wants=network-online.target
After=network-online.target

[Service]
Type=exec
User={spec.user}
Group={spec.group}
Environment=HOME={quote_arg(spec.home)}
Environment=PYTHONUNBUFFERED=1
ExecStart={exec_start}
Restart=on-failure
RestartSec=5
# The agent stops its RPC worker itself on SIGTERM; only stragglers get SIGKILL afterwards.
KillMode=mixed
TimeoutStopSec=15
# Many connections at once (a flood from the LAN) must meet the agent's own per-address and
# total caps, not the default limit of 1024 open files (see agent/api_guard.py).
LimitNOFILE=65536
StandardOutput=journal
StandardError=journal
SyslogIdentifier=herd-agent

# Hardening that the agent (network server + child process, files under its home) tolerates.
NoNewPrivileges=yes
PrivateTmp=yes
PrivateDevices=no
ProtectSystem=full
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectControlGroups=yes
RestrictSUIDSGID=yes
RestrictNamespaces=yes
LockPersonality=yes
RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX AF_NETLINK

[Install]
WantedBy=multi-user.target
"""


def service_state_dir(home: str) -> Path:
    """Where the service keeps its state (node id, pairings, PIN): the unit sets ``HOME`` and no
    ``XDG_STATE_HOME``, so the agent's default (platformdirs' user state dir) lands here."""
    return Path(home) / ".local" / "state" / "llama-herd"


# Characters that make an Exec= argument need quotes (Desktop Entry Specification, "The Exec key").
_EXEC_RESERVED = set(' \t\n"\'\\><~|&;$*?#()`')


def desktop_exec_arg(arg: str) -> str:
    """One ``Exec=`` argument of a desktop entry: ``%`` doubled (it starts a field code),
    arguments with reserved characters double-quoted with ``"`` `` ` `` ``$`` ``\\`` escaped,
    and every backslash doubled once more (the value itself is an escaped string)."""
    arg = arg.replace("%", "%%")
    if arg and not any(c in _EXEC_RESERVED for c in arg):
        return arg
    inner = "".join("\\" + c if c in '"`$\\' else c for c in arg)
    return ('"' + inner + '"').replace("\\", "\\\\")


def render_desktop_entry(spec: UnitSpec) -> str:
    """The text of ``herd-agent-pin.desktop``: a menu item "Show pairing PIN" that opens the PIN
    window on the service's own state (readable by the account the service runs as)."""
    exec_line = " ".join(desktop_exec_arg(a) for a in
                         (*spec.program, "pin", "--window", "--state-dir", spec.state_dir))
    return f"""\
[Desktop Entry]
Type=Application
Version=1.4
Name=Show pairing PIN
Name[zh_CN]=显示配对 PIN
Comment=Show the PIN that pairs this computer with the llama-herd master
Comment[zh_CN]=显示将这台电脑与 llama-herd 主控电脑配对的 PIN
Exec={exec_line}
Icon=dialog-password
Terminal=false
Categories=Network;
"""


def agent_program() -> list[str]:
    """The absolute command that starts this very ``herd-agent`` (frozen, pipx, venv or source)."""
    if getattr(sys, "frozen", False):
        return [str(Path(sys.executable).resolve())]
    found = shutil.which("herd-agent")
    if found:
        return [str(Path(found).absolute())]
    return [str(Path(sys.executable).absolute()), "-m", "agent.main"]


def default_user() -> str:
    """Who the agent should run as: the user behind ``sudo``, else the current user."""
    import pwd  # noqa: PLC0415 - Unix only; this module is also imported on Windows

    return os.environ.get("SUDO_USER") or pwd.getpwuid(os.getuid()).pw_name


def build_spec(user: str | None, config: str | None, program: list[str] | None = None) -> UnitSpec:
    """Resolve the user, config path and program into a :class:`UnitSpec`, or raise with why."""
    import grp  # noqa: PLC0415 - Unix only
    import pwd  # noqa: PLC0415

    user = user or default_user()
    try:
        pw = pwd.getpwnam(user)
    except KeyError:
        raise ServiceInstallError(f"--user: there is no user named {user!r} on this system") from None
    if pw.pw_uid == 0:
        raise ServiceInstallError(
            "the agent must not run as root: give --user USER (an ordinary account; "
            f"{MAKE_USER} makes one)")
    if pw.pw_name == "nobody" or pw.pw_uid == 65534:
        # systemd warns about it too: files of every nobody-service are shared.
        raise ServiceInstallError(
            f"the agent needs an account of its own, not {pw.pw_name!r}: {MAKE_USER} makes one")
    group = grp.getgrgid(pw.pw_gid).gr_name
    cfg = Path(config).expanduser() if config else Path(pw.pw_dir) / ".config" / "llama-herd" / "agent.toml"
    if not cfg.is_absolute():
        cfg = Path.cwd() / cfg
    prog = program or agent_program()
    return UnitSpec(user=user, group=group, home=pw.pw_dir,
                    exec_start=(*prog, "--config", str(cfg)), config=str(cfg),
                    program=tuple(prog), state_dir=str(service_state_dir(pw.pw_dir)))


def _write_atomic(path: Path, text: str) -> None:
    write_atomic(path, text, 0o644)


def _systemctl(*args: str) -> list[str]:
    return ["systemctl", *args]


def install_commands() -> list[list[str]]:
    """What ``install-service`` runs after writing the unit."""
    return [_systemctl("daemon-reload"), _systemctl("enable", "--now", UNIT_NAME)]


def uninstall_commands() -> list[list[str]]:
    """What ``uninstall-service`` runs before removing the unit."""
    return [_systemctl("disable", "--now", UNIT_NAME)]


def _run(cmds: list[list[str]], *, tolerate: bool = False) -> None:
    if shutil.which("systemctl") is None:
        raise ServiceInstallError("systemctl not found: this system does not run systemd")
    for cmd in cmds:
        proc = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if proc.returncode != 0 and not tolerate:
            raise ServiceInstallError(f"`{' '.join(cmd)}` failed ({proc.returncode}): "
                                      f"{(proc.stdout + proc.stderr).strip()}")


def _check_can_write(unit_dir: Path) -> None:
    if unit_dir == SYSTEM_UNIT_DIR and os.geteuid() != 0:
        raise ServiceInstallError(
            f"writing {unit_dir} needs root: run `sudo {' '.join(agent_program())} "
            f"{' '.join(sys.argv[1:]) or 'install-service'}`")


def desktop_entry_path(unit_dir: Path | None, apps_dir: Path | None) -> Path | None:
    """Where the "Show pairing PIN" entry goes: ``apps_dir`` when given, the system's
    applications folder with the system unit, and nowhere for a unit written elsewhere (an image
    being built names its own folder with ``--applications-dir``)."""
    if apps_dir is not None:
        return apps_dir / DESKTOP_NAME
    return SYSTEM_APPS_DIR / DESKTOP_NAME if unit_dir is None else None


def install(user: str | None, config: str | None, unit_dir: Path | None, dry_run: bool,
            out=None, apps_dir: Path | None = None) -> Path:
    """Write (and, for the system unit folder, enable and start) the unit, and the desktop entry
    that shows the pairing PIN; returns the unit's path."""
    out = out or sys.stdout
    spec = build_spec(user, config)
    text = render_unit(spec)
    target_dir = unit_dir or SYSTEM_UNIT_DIR
    path = target_dir / UNIT_NAME
    entry = desktop_entry_path(unit_dir, apps_dir)
    cmds = install_commands()
    if dry_run:
        print(f"# would write {path}:", file=out)
        print(text, file=out)
        if entry is not None:
            print(f"# would write {entry}:", file=out)
            print(render_desktop_entry(spec), file=out)
        if unit_dir is None:
            for c in cmds:
                print("# would run: " + " ".join(c), file=out)
        return path
    _check_can_write(target_dir)
    if unit_dir is None and shutil.which("systemctl") is None:
        raise ServiceInstallError("systemctl not found: this system does not run systemd "
                                  "(--unit-dir DIR writes the unit without enabling it)")
    _write_atomic(path, text)
    print(f"wrote {path} (runs as {spec.user}, config {spec.config})", file=out)
    if entry is not None:
        _write_atomic(entry, render_desktop_entry(spec))
        print(f"wrote {entry} (the menu item \"Show pairing PIN\" for {spec.user})", file=out)
    if unit_dir is None:
        _run(cmds)
        print(f"enabled and started {UNIT_NAME}; logs: journalctl -u herd-agent -f", file=out)
    else:
        print(f"not enabled ({target_dir} is not systemd's folder); to use it: "
              f"systemctl link {path} && systemctl enable --now {UNIT_NAME}", file=out)
    return path


def uninstall(unit_dir: Path | None, dry_run: bool, out=None, apps_dir: Path | None = None) -> Path:
    """Stop, disable and remove the unit and its desktop entry; returns the unit's path."""
    out = out or sys.stdout
    target_dir = unit_dir or SYSTEM_UNIT_DIR
    path = target_dir / UNIT_NAME
    entry = desktop_entry_path(unit_dir, apps_dir)
    if dry_run:
        if entry is not None:
            print(f"# would remove {entry}", file=out)
        if unit_dir is None:
            for c in uninstall_commands():
                print("# would run: " + " ".join(c), file=out)
        print(f"# would remove {path}", file=out)
        if unit_dir is None:
            print("# would run: systemctl daemon-reload", file=out)
        return path
    if not path.exists():
        raise ServiceInstallError(f"{path} does not exist: the service is not installed there")
    _check_can_write(target_dir)
    if unit_dir is None:
        # Tolerated: a unit that failed to start may already be inactive or disabled.
        _run(uninstall_commands(), tolerate=True)
    path.unlink()
    if entry is not None and entry.exists():
        entry.unlink()
        print(f"removed {entry}", file=out)
    if unit_dir is None:
        _run([_systemctl("daemon-reload")])
    print(f"removed {path}", file=out)
    return path


def register(subparsers) -> None:
    """Add ``install-service`` and ``uninstall-service`` to ``herd-agent``'s command line."""
    p = subparsers.add_parser(
        "install-service", help="run the agent as a systemd service at boot (Linux)",
        description="Write and enable a systemd unit that runs this herd-agent at boot as an "
                    "unprivileged user, restarts it on failure and logs to the journal.")
    p.add_argument("--user", help="account to run as (default: the user who ran sudo)")
    p.add_argument("--config", help="config file the service uses "
                                    "(default: ~USER/.config/llama-herd/agent.toml)")
    p.add_argument("--unit-dir", type=Path, help="write the unit here instead of "
                                                 f"{SYSTEM_UNIT_DIR} and do not enable it")
    p.add_argument("--applications-dir", type=Path,
                   help=f"write the \"Show pairing PIN\" desktop entry here (default: "
                        f"{SYSTEM_APPS_DIR} with the system unit; none with --unit-dir)")
    p.add_argument("--dry-run", action="store_true", help="print the unit and commands only")
    p.set_defaults(func=cmd_install)

    p = subparsers.add_parser("uninstall-service", help="stop and remove the systemd service (Linux)")
    p.add_argument("--unit-dir", type=Path, help=f"remove the unit from here instead of {SYSTEM_UNIT_DIR}")
    p.add_argument("--applications-dir", type=Path,
                   help="remove the desktop entry from here (default: as install-service chose)")
    p.add_argument("--dry-run", action="store_true", help="print what would be done only")
    p.set_defaults(func=cmd_uninstall)


def _not_on_windows(cmd: str) -> int | None:
    if sys.platform == "win32":
        print(f"herd-agent {cmd}: on Windows the MSI installs and removes the service",
              file=sys.stderr)
        return 2
    return None


def cmd_install(args) -> int:
    """``herd-agent install-service``."""
    if (rc := _not_on_windows("install-service")) is not None:
        return rc
    try:
        install(args.user, args.config, args.unit_dir, args.dry_run, apps_dir=args.applications_dir)
    except (ServiceInstallError, OSError) as exc:
        print(f"herd-agent install-service: {exc}", file=sys.stderr)
        return 1
    return 0


def cmd_uninstall(args) -> int:
    """``herd-agent uninstall-service``."""
    if (rc := _not_on_windows("uninstall-service")) is not None:
        return rc
    try:
        uninstall(args.unit_dir, args.dry_run, apps_dir=args.applications_dir)
    except (ServiceInstallError, OSError) as exc:
        print(f"herd-agent uninstall-service: {exc}", file=sys.stderr)
        return 1
    return 0
