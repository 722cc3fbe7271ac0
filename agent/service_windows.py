"""``herd-agent`` as a Windows service.

The MSI registers ``herd-agent.exe service --config "C:\\ProgramData\\llama-herd\\agent.toml"``
with the Service Control Manager (SCM) as ``HerdAgent``, automatic start, LocalSystem. When the
SCM starts it, :func:`run_service` hands the process to pywin32's service framework, which calls
back into :class:`HerdAgentService` (built lazily: pywin32 exists only on Windows).

Points that matter on Windows:

- Report RUNNING at once, before the agent's slower start-up (engine lookup, mDNS): the SCM
  gives up after 30 s with error 1053 otherwise.
- A service has no console: logs go to ``%ProgramData%\\llama-herd\\logs\\herd-agent.log``
  (rotated), and stray writes to stdout/stderr land there too.
- Stop is cooperative: SvcStop sets an event that the agent's loop watches; the agent stops the
  RPC worker and unregisters mDNS before the process reports STOPPED.
- If the agent dies on its own, the process exits non-zero without reporting STOPPED, which the
  SCM treats as a crash and answers with the recovery actions :func:`recovery_commands` set up
  (the MSI runs ``herd-agent.exe service recovery`` after installing the service).

Everything that is not Windows-only (paths, command lines, argument handling) is plain Python
and is unit-tested on Linux.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import subprocess
import sys
import threading
from pathlib import Path, PureWindowsPath

from agent.i18n import translate

SERVICE_NAME = "HerdAgent"
DISPLAY_NAME = "llama-herd agent"
#: Restart delays after the 1st, 2nd and later failures, and the quiet time that resets the count.
RESTART_DELAYS_MS = (5_000, 10_000, 60_000)
FAILURE_RESET_S = 24 * 3600
LOG_MAX_BYTES = 5 * 1024 * 1024
LOG_BACKUPS = 3

log = logging.getLogger("herd-agent.service")


class ServiceError(RuntimeError):
    """A service operation cannot be done here, or failed; the message says why."""


def program_data(environ: dict | None = None) -> PureWindowsPath:
    """``%ProgramData%\\llama-herd``: machine-wide data of the service (config, state, logs)."""
    env = os.environ if environ is None else environ
    return PureWindowsPath(env.get("ProgramData") or r"C:\ProgramData") / "llama-herd"


def service_paths(environ: dict | None = None) -> dict[str, PureWindowsPath]:
    """Where the service keeps its config, state and log (the SCM's LocalSystem account has no
    useful per-user folders, so everything lives under ProgramData)."""
    root = program_data(environ)
    return {
        "config": root / "agent.toml",
        "state_dir": root / "state",
        "log": root / "logs" / "herd-agent.log",
    }


def recovery_commands(service: str = SERVICE_NAME, delays_ms: tuple[int, ...] = RESTART_DELAYS_MS,
                      reset_s: int = FAILURE_RESET_S) -> list[list[str]]:
    """``sc.exe`` command lines that make the SCM restart the service when it fails.

    ``sc failure`` sets the actions (restart after each delay; the last repeats), and
    ``sc failureflag 1`` applies them also when the service stops with an error code rather
    than by crashing. wixl has no ``ServiceConfig``, so the MSI runs these through
    ``herd-agent.exe service recovery``.
    """
    if not delays_ms:
        raise ServiceError("at least one restart delay is needed")
    if any(d < 0 for d in delays_ms) or reset_s < 0:
        raise ServiceError("restart delays and the reset period must not be negative")
    actions = "/".join(f"restart/{d}" for d in delays_ms)
    # sc.exe wants "option= value" as two arguments, the '=' glued to the option name.
    return [
        ["sc.exe", "failure", service, "reset=", str(reset_s), "actions=", actions],
        ["sc.exe", "failureflag", service, "1"],
    ]


#: Well-known SIDs (locale-independent, unlike the names "SYSTEM" and "Administrators").
SID_LOCAL_SYSTEM = "*S-1-5-18"
SID_ADMINISTRATORS = "*S-1-5-32-544"


def restrict_acl_command(folder: str | PureWindowsPath) -> list[str]:
    """``icacls`` command line that leaves ``folder`` (and what it holds) to SYSTEM and
    Administrators only.

    ProgramData is readable by every local user, but the state folder holds the pairing key and
    PIN, and the log shows the PIN: an ordinary user of the PC must not be able to pair a master.
    """
    return ["icacls", str(folder), "/inheritance:r",
            "/grant:r", f"{SID_LOCAL_SYSTEM}:(OI)(CI)F", f"{SID_ADMINISTRATORS}:(OI)(CI)F"]


def setup_file_logging(path: Path) -> logging.Handler:
    """Send the root logger, stdout and stderr to a rotating log file at ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.handlers.RotatingFileHandler(path, maxBytes=LOG_MAX_BYTES,
                                                   backupCount=LOG_BACKUPS, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    # As in the foreground agent: the libraries' info lines would drown the agent's own.
    for noisy in ("aiohttp", "zeroconf"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # Under the SCM there is no console: print() would fail or vanish. Keep it in the log.
    stream = open(path.with_suffix(".out.log"), "a", encoding="utf-8", buffering=1)
    sys.stdout = sys.stderr = stream
    return handler


def _require_windows() -> None:
    if sys.platform != "win32":
        raise ServiceError(
            "the Windows service mode runs on Windows only; on Linux use "
            "`herd-agent install-service` (systemd)")


def run_commands(cmds: list[list[str]]) -> None:
    """Run ``sc.exe`` commands (Windows only); raise :class:`ServiceError` on the first failure."""
    _require_windows()
    for cmd in cmds:
        proc = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if proc.returncode != 0:
            raise ServiceError(f"`{' '.join(cmd)}` failed ({proc.returncode}): "
                               f"{(proc.stdout + proc.stderr).strip()}")


def _service_class(run_agent, argv):
    """Build the pywin32 service class. Imports pywin32, so call it on Windows only."""
    import servicemanager  # noqa: PLC0415 - pywin32 exists only on Windows
    import win32service
    import win32serviceutil

    class HerdAgentService(win32serviceutil.ServiceFramework):
        """The SCM's handle on the agent: start runs it, stop asks it to finish."""

        _svc_name_ = SERVICE_NAME
        _svc_display_name_ = DISPLAY_NAME

        def __init__(self, args):
            super().__init__(args)
            self.stop_event = threading.Event()

        def SvcStop(self):  # noqa: N802 - pywin32's name
            # The agent needs up to a few seconds to stop the RPC worker and say mDNS goodbye.
            self.ReportServiceStatus(win32service.SERVICE_STOP_PENDING, waitHint=10_000)
            log.info("stop requested by the service manager")
            self.stop_event.set()

        def SvcDoRun(self):  # noqa: N802 - pywin32's name
            # RUNNING first (error 1053 otherwise), then the slower start-up.
            self.ReportServiceStatus(win32service.SERVICE_RUNNING)
            servicemanager.LogInfoMsg(f"{DISPLAY_NAME} starting")
            try:
                rc = run_agent(argv, self.stop_event)
            except Exception:  # noqa: BLE001 - a service must log why it died
                log.exception("the agent failed")
                rc = 1
            if rc != 0 and not self.stop_event.is_set():
                # Exit without reporting STOPPED: the SCM sees a failure and applies the
                # recovery actions (restart), which a clean STOPPED would not trigger.
                log.error("the agent exited with %s; leaving it to service recovery", rc)
                logging.shutdown()
                os._exit(rc or 1)
            log.info("stopped")

    return HerdAgentService


def run_service(run_agent, argv, log_file: Path) -> int:
    """Hand this process to the SCM; returns when the service has stopped.

    ``run_agent(argv, stop_event)`` runs the agent until ``stop_event`` (a
    :class:`threading.Event`) is set and returns its exit code; ``argv`` is passed through.
    """
    _require_windows()
    setup_file_logging(log_file)
    import servicemanager  # noqa: PLC0415

    cls = _service_class(run_agent, argv)
    servicemanager.Initialize()
    servicemanager.PrepareToHostSingle(cls)
    try:
        servicemanager.StartServiceCtrlDispatcher()
    except Exception as exc:  # pywintypes.error 1063: started from a console, not by the SCM
        raise ServiceError(
            f"not started by the Windows service manager ({exc}); the installed service is "
            f"started with `sc start {SERVICE_NAME}` or the Services app") from exc
    return 0


async def serve_until(settings, state, stop: threading.Event) -> int:
    """Run an agent until ``stop`` is set (from the SCM's thread); returns its exit code.

    The foreground runner (:func:`agent.daemon.run_agent`) stops on signals, which only the main
    thread may install; the SCM runs a service on a thread of its own, so the stop arrives as an
    event instead.
    """
    from agent.daemon import Agent, PortConflict  # noqa: PLC0415 - keeps `--help` fast

    agent = Agent(settings, state)
    try:
        await agent.start()
    except PortConflict as exc:
        log.error("%s", exc)
        return 1
    # Hand the SCM's stop over to the agent's loop.
    threading.Thread(target=lambda: (stop.wait(), agent.request_stop()), name="scm-stop",
                     daemon=True).start()
    # never the PIN itself: the service log is readable by more people than should pair
    log.info("running; %s", "paired" if state.paired else
             "not paired yet: `herd-agent service pin` (administrator) shows a pairing PIN")
    try:
        await agent.serve()
    finally:
        await agent.close()
    return 0


def lock_private_folders(folders, run=subprocess.run) -> None:
    """Leave each of ``folders`` to SYSTEM and Administrators (:func:`restrict_acl_command`).

    ``run`` runs a command line as :func:`subprocess.run` does (a stand-in in the tests, where
    there is no ``icacls``).

    Raises:
        ServiceError: naming the folder and what ``icacls`` said, when it could not: the state
            folder holds the pairing key and the PIN, so the service must not run on with them
            readable by every user of the PC (#32).
    """
    for folder in folders:
        proc = run(restrict_acl_command(folder), capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if proc.returncode != 0:
            said = ((proc.stdout or "") + (proc.stderr or "")).strip() or f"exit status {proc.returncode}"
            raise ServiceError(f"could not leave {folder} to SYSTEM and Administrators (icacls: {said}); "
                               "the service does not run while its pairing key could be read by other "
                               "users of this PC. Run the service as LocalSystem (as the installer sets "
                               "it up), or give that folder back to SYSTEM and Administrators.")


def _run_agent_for_service(args, stop: threading.Event, *, acl_run=None) -> int:
    """The agent as the service runs it, once its private folders are locked (on Windows, or
    with ``acl_run``: :func:`lock_private_folders`'s ``run``). Returns the exit code; 1 when a
    folder could not be locked (the agent does not start)."""
    import asyncio  # noqa: PLC0415

    from agent.main import effective_settings  # noqa: PLC0415
    from agent.settings import load_state  # noqa: PLC0415

    settings = effective_settings(args)
    folders = [Path(args.state_dir), Path(args.log_file).parent]
    for folder in folders:
        folder.mkdir(parents=True, exist_ok=True)
    if sys.platform == "win32" or acl_run is not None:
        try:
            lock_private_folders(folders, acl_run or subprocess.run)
        except ServiceError as exc:
            log.error("%s", exc)
            return 1
    state = load_state(Path(args.state_dir))
    return asyncio.run(serve_until(settings, state, stop))


def elevated_command(argv: list[str], executable: str, frozen: bool) -> tuple[str, str]:
    """The program and parameters that re-run this command with administrator rights, as
    ShellExecuteW's "runas" verb takes them: ``herd-agent.exe`` itself when frozen (the MSI's
    build), else Python with the script it ran (``argv[0]``)."""
    args = list(argv[1:]) if frozen else list(argv)
    return executable, subprocess.list2cmdline(args)


def _is_admin() -> bool:
    """Whether this process has administrator rights (Windows only)."""
    import ctypes  # noqa: PLC0415

    return bool(ctypes.windll.shell32.IsUserAnAdmin())


def _relaunch_elevated() -> bool:
    """Ask Windows (the UAC prompt) to run this same command as administrator; True when it
    started. A Start-menu shortcut cannot demand elevation itself, so the command asks."""
    import ctypes  # noqa: PLC0415

    program, params = elevated_command(sys.argv, sys.executable, getattr(sys, "frozen", False))
    # ShellExecuteW returns a value above 32 on success (5: the user declined the prompt).
    return int(ctypes.windll.shell32.ShellExecuteW(None, "runas", program, params, None, 1)) > 32


def _service_pin(args, paths) -> int:
    """``herd-agent service pin [--window]``: the installed service's PIN (administrators only)."""
    from agent.settings import STATE_NAME, SettingsError, load_state  # noqa: PLC0415

    def fail(text: str) -> int:
        print(f"herd-agent service pin: {text}", file=sys.stderr)
        if args.window:  # opened from the Start menu: there is no terminal to read it in
            from agent.pin_window import show_error_window  # noqa: PLC0415
            show_error_window(text)
        return 1

    if args.window and sys.platform == "win32" and not _is_admin():
        if _relaunch_elevated():
            return 0
        return fail(translate("PinWindow", "Windows did not give administrator rights; the "
                                           "service's PIN is readable by administrators only. "
                                           "Ask an administrator of this PC to open Show pairing PIN."))
    state_dir = Path(getattr(args, "state_dir", None) or paths["state_dir"])
    try:
        if not (state_dir / STATE_NAME).is_file():
            return fail(translate("PinWindow", "no state in {folder}: the service has not started "
                                               "yet (`sc start {service}`)").format(
                folder=state_dir, service=SERVICE_NAME))
        state = load_state(state_dir, create=False)
    except (PermissionError, SettingsError) as exc:
        return fail(f"{exc} (" + translate("PinWindow", "the service's state is readable by "
                                                        "administrators only: use an administrator "
                                                        "terminal") + ")")
    from agent.pairing import PinFile  # noqa: PLC0415
    from agent.pin_window import show_pin  # noqa: PLC0415

    return show_pin(PinFile(state.folder), window=args.window, command="herd-agent service pin")


def register(subparsers) -> None:
    """Add ``service`` (what the SCM starts) and ``service recovery`` to ``herd-agent``."""
    from agent.main import add_settings_flags, add_window_flag  # noqa: PLC0415

    p = subparsers.add_parser(
        "service", help="Windows: run as the HerdAgent service (started by the service manager)",
        description="run: serve as the Windows service the MSI installed (the service manager "
                    "starts this; config, state and logs live under %ProgramData%\\llama-herd). "
                    "recovery: make the service manager restart the agent when it fails. "
                    "pin: show the pairing PIN of the installed service (with --window in a "
                    "window, asking for administrator rights; the Start menu's Show pairing PIN).")
    p.add_argument("action", nargs="?", choices=("run", "recovery", "pin"), default="run",
                   help="run (default, for the service manager), recovery, or pin: print the "
                        "service's pairing PIN (from an administrator terminal)")
    add_settings_flags(p, sub=True)
    p.add_argument("--log-file", type=Path, help="log file (default: under %%ProgramData%%)")
    p.add_argument("--dry-run", action="store_true", help="recovery: print the sc.exe commands only")
    add_window_flag(p)
    p.set_defaults(func=cmd_service)


def cmd_service(args) -> int:
    """``herd-agent service [run|recovery|pin]``."""
    paths = service_paths()
    if args.action == "pin":
        return _service_pin(args, paths)
    if args.action == "recovery":
        cmds = recovery_commands()
        if args.dry_run:
            for c in cmds:
                print(subprocess.list2cmdline(c))
            return 0
        try:
            run_commands(cmds)
        except ServiceError as exc:
            print(f"herd-agent service recovery: {exc}", file=sys.stderr)
            return 1
        return 0
    # The service runs as LocalSystem, whose per-user folders are no place for the node's
    # identity: state and config default to ProgramData.
    if getattr(args, "config", None) is None:
        args.config = Path(paths["config"])
    if getattr(args, "state_dir", None) is None:
        args.state_dir = Path(paths["state_dir"])
    args.log_file = args.log_file or Path(paths["log"])
    try:
        return run_service(_run_agent_for_service, args, args.log_file)
    except ServiceError as exc:
        print(f"herd-agent service: {exc}", file=sys.stderr)
        return 1
