"""Entry point of ``herd-agent``.

``herd-agent`` (or ``herd-agent run``) runs the agent in the foreground; ``herd-agent pin`` shows
a pairing PIN (accepted for a few minutes; ``--window`` in a small window, see
:mod:`agent.pin_window`); ``herd-agent unpair [MASTER]`` forgets a master; ``herd-agent config`` shows (or writes) the effective settings. Other modules
add sub-commands through :data:`COMMAND_MODULES`: each has ``register(subparsers)`` and sets
``func`` on its parser, as ``herd``'s command modules do.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import sys
from pathlib import Path

from agent import __version__
from agent.closed_pipe import exit_code_on_closed_pipe

#: Modules that add sub-commands (``register(subparsers)``), e.g. service installers.
COMMAND_MODULES: list[str] = ["agent.systemd", "agent.firewall", "agent.service_windows"]


def _ip_list(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def add_settings_flags(p: argparse.ArgumentParser, *, sub: bool) -> None:
    """Flags that override the config file. On sub-parsers their default is SUPPRESS so a flag
    given before the sub-command is not overwritten by the sub-parser's default."""
    d = {"default": argparse.SUPPRESS} if sub else {"default": None}
    p.add_argument("--config", type=Path, help="config file (default: the platform config dir)", **d)
    p.add_argument("--state-dir", type=Path, help="folder of the state file (node id, pairings)", **d)
    p.add_argument("--name", help="friendly node name shown to masters (default: host name)", **d)
    p.add_argument("--bind", help="IPv4 address to listen on (default 0.0.0.0 = all)", **d)
    p.add_argument("--api-port", type=int, help="control API port", **d)
    p.add_argument("--rpc-port", type=int, help="RPC port masters connect to", **d)
    p.add_argument("--echo-port", type=int, help="UDP echo port", **d)
    p.add_argument("--exposure", choices=["relay", "open"],
                   help="relay: only paired masters reach the RPC worker (default); open: anyone on the LAN", **d)
    p.add_argument("--mdns-interfaces", type=_ip_list, metavar="IP[,IP…]",
                   help="advertise only on these addresses (default: every interface)", **d)
    p.add_argument("--no-mdns", action="store_true", help="do not advertise over mDNS",
                   **({"default": argparse.SUPPRESS} if sub else {"default": False}))
    p.add_argument("--engine-dir", help="folder with ggml-rpc-server (default: the usual lookup); it is run "
                                        "as the build it is (CPU, Vulkan, CUDA …), read from the build itself", **d)
    p.add_argument("--backend", choices=["auto", "cpu", "vulkan", "cuda"],
                   help="which installed llama.cpp build to run (default auto: a GPU build that finds a "
                        "GPU here, else the CPU build); with --engine-dir, only checked against it", **d)
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging",
                   **({"default": argparse.SUPPRESS} if sub else {"default": False}))


def add_window_flag(p: argparse.ArgumentParser) -> None:
    """``--window``: show the PIN in a small window (falls back to the terminal without a display)."""
    p.add_argument("--window", action="store_true",
                   help="show the PIN in a small window with its countdown (without a display: "
                        "in the terminal)")


def build_parser() -> argparse.ArgumentParser:
    """The full ``herd-agent`` parser (sub-commands: run, pin, config, plus COMMAND_MODULES)."""
    parser = argparse.ArgumentParser(prog="herd-agent",
                                     description="llama-herd worker agent: runs llama.cpp's RPC worker "
                                                 "for a paired master.")
    parser.add_argument("--version", action="version", version=f"herd-agent {__version__}")
    add_settings_flags(parser, sub=False)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    p = sub.add_parser("run", help="run the agent in the foreground (the default)")
    add_settings_flags(p, sub=True)
    p.set_defaults(func=cmd_run)
    p = sub.add_parser("pin", help="show a pairing PIN (accepted for 5 minutes, pairs one master)")
    add_settings_flags(p, sub=True)
    add_window_flag(p)
    p.set_defaults(func=cmd_pin)
    p = sub.add_parser("unpair", help="forget a paired master (its key is refused from then on)")
    add_settings_flags(p, sub=True)
    p.add_argument("master", nargs="?", help="its name or the start of its key fingerprint "
                                             "(may be left out when only one master is paired)")
    p.add_argument("--all", action="store_true", help="forget every paired master")
    p.set_defaults(func=cmd_unpair)
    p = sub.add_parser("config", help="print the effective settings as TOML")
    add_settings_flags(p, sub=True)
    p.add_argument("--write", action="store_true", help="save them to the config file")
    p.set_defaults(func=cmd_config)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    parser.set_defaults(func=cmd_run)
    return parser


def effective_settings(args: argparse.Namespace):
    """Config file, then flags on top. Raises SettingsError."""
    from agent.settings import SettingsError, load_settings  # noqa: PLC0415

    s = load_settings(args.config)
    overrides = {"name": args.name, "bind": args.bind, "api_port": args.api_port,
                 "rpc_port": args.rpc_port, "echo_port": args.echo_port, "exposure": args.exposure,
                 "mdns_interfaces": args.mdns_interfaces, "engine_dir": args.engine_dir,
                 "backend": args.backend}
    for key, value in overrides.items():
        if value is not None:
            setattr(s, key, value)
    if args.no_mdns:
        s.mdns = False
    try:
        s.validate()
    except SettingsError as exc:
        # the file was valid on its own (load_settings checked it), so a flag is at fault
        flag = "--" + (exc.key or "").replace("_", "-")
        raise SettingsError(f"{flag}: {str(exc).split(': ', 1)[-1]}", exc.key) from None
    return s


def cmd_run(args: argparse.Namespace) -> int:
    """Run the agent in the foreground."""
    from agent.process_memory import without_ca_store  # noqa: PLC0415

    with without_ca_store():  # the agent never makes TLS connections (see agent.process_memory)
        from agent.daemon import configure_logging, run_agent  # noqa: PLC0415
    from agent.settings import load_state  # noqa: PLC0415

    configure_logging(args.verbose)
    settings = effective_settings(args)
    state = load_state(args.state_dir)
    return asyncio.run(run_agent(settings, state))


def cmd_pin(args: argparse.Namespace) -> int:
    """Show a pairing PIN (a new one, or the current one renewed) and how long it is accepted;
    with ``--window`` in a small window (the desktop entry opens it), else in the terminal."""
    from agent.i18n import translate  # noqa: PLC0415
    from agent.pairing import PinFile  # noqa: PLC0415
    from agent.pin_window import show_error_window, show_pin  # noqa: PLC0415
    from agent.settings import SettingsError, load_state  # noqa: PLC0415

    try:
        state = load_state(args.state_dir)
    except (OSError, SettingsError) as exc:
        if not args.window:
            raise
        # opened from the menu: there is no terminal to show a traceback or message in
        text = f"{exc}. " + translate("PinWindow", "The PIN belongs to the account the agent runs "
                                                   "as: open Show pairing PIN from that account.")
        print(f"herd-agent pin: {text}", file=sys.stderr)
        show_error_window(text)
        return 1
    return show_pin(PinFile(state.folder), window=args.window, command="herd-agent")


def cmd_unpair(args: argparse.Namespace) -> int:
    """Forget one paired master (by name or key fingerprint), or every one with --all."""
    from agent.identity import display_fingerprint  # noqa: PLC0415
    from agent.settings import load_state  # noqa: PLC0415
    from agent.weight_cache import WeightCache, default_root as default_cache_root  # noqa: PLC0415

    state = load_state(args.state_dir)
    if not state.masters:
        print("herd-agent: no master is paired with this node")
        return 0
    if args.master is None and not args.all:
        if len(state.masters) > 1:
            print("herd-agent: several masters are paired; name one (or use --all):", file=sys.stderr)
            for m in state.masters:
                print(f"  {m.name or '(no name)'}  {display_fingerprint(m.fingerprint)}", file=sys.stderr)
            return 2
    gone = state.remove_masters(None if args.all or args.master is None else args.master)
    if not gone:
        print(f"herd-agent: no paired master is called {args.master!r} or has that key", file=sys.stderr)
        return 2
    cache = WeightCache(default_cache_root(effective_settings(args).cache_dir), 0)
    for m in gone:
        freed = cache.forget(m.fingerprint)  # its weight cache goes with it
        print(f"unpaired {m.name or '(no name)'} ({display_fingerprint(m.fingerprint)}); "
              "a running agent refuses it from its next call"
              + (f"; removed {freed / (1 << 20):.0f} MiB of its cached weights" if freed else ""))
    return 0


def cmd_config(args: argparse.Namespace) -> int:
    """Print, or with ``--write`` save, the effective settings."""
    from agent.settings import default_config_path, dump_settings, save_settings  # noqa: PLC0415

    s = effective_settings(args)
    if args.write:
        path = save_settings(s, args.config or default_config_path())
        print(f"wrote {path}")
    else:
        sys.stdout.write(dump_settings(s))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run ``herd-agent``; returns the process exit code (141 when the output pipe closed early:
    see :mod:`agent.closed_pipe`)."""
    return exit_code_on_closed_pipe(lambda: _run(argv))


def _run(argv: list[str] | None) -> int:
    from agent.settings import SettingsError  # noqa: PLC0415

    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except SettingsError as exc:
        print(f"herd-agent: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
