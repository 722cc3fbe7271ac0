"""Entry point of ``herd``: with a sub-command it runs headless, without one it opens the app."""

from __future__ import annotations

import argparse
import importlib
import sys

from agent.closed_pipe import exit_code_on_closed_pipe
from gui import __version__

# Each module registers its sub-commands with ``register(subparsers)``.
COMMAND_MODULES = [
    "gui.cli.engine",
    "gui.cli.cluster_commands",
    "gui.cli.demo",
    "gui.cli.bench",
    "gui.cli.model",
    "gui.cli.keys",
    "gui.cli.api_keys",
    "gui.cli.wake",
    "gui.cli.service",
]


def _interface_list(text: str) -> list[str]:
    """``"127.0.0.1,192.168.1.5"`` → a list of IP addresses; anything else is refused by name."""
    import ipaddress

    out = [a.strip() for a in text.split(",") if a.strip()]
    if not out:
        raise argparse.ArgumentTypeError("expected one or more interface addresses, e.g. 192.168.1.5")
    for a in out:
        try:
            ipaddress.ip_address(a.split("%", 1)[0])  # an IPv6 address may carry a %scope
        except ValueError:
            raise argparse.ArgumentTypeError(f"{a!r} is not an IP address of an interface") from None
    return out


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The full ``herd`` argument parser."""
    parser = argparse.ArgumentParser(
        prog="herd",
        description="Turn the PCs of your network into one llama.cpp cluster. "
                    "Without a command, opens the desktop app.",
    )
    parser.add_argument("--version", action="version", version=f"llama-herd {__version__}")
    parser.add_argument("--lang", choices=["en", "zh_CN"], help="force the app's language")
    parser.add_argument("--mdns-interfaces", metavar="ADDR[,ADDR…]", type=_interface_list,
                        help="look for nodes only on the interfaces with these addresses (e.g. "
                             "192.168.1.5 on a PC with several networks; default: all, or "
                             "$HERD_INTERFACES)")
    parser.add_argument("--quit-after", metavar="SECONDS", type=_positive_seconds,
                        help="open the window, then close it cleanly after SECONDS (a smoke test)")
    parser.add_argument("--dump-texts", metavar="FILE",
                        help="with --quit-after: write the text of every visible widget to FILE as "
                             "JSON before closing (a smoke test of the translations)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run ``herd``; returns the process exit code (141 when the output pipe closed early: see
    :mod:`agent.closed_pipe`)."""
    return exit_code_on_closed_pipe(lambda: _run(argv))


def _run(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.dump_texts and not args.quit_after:
        parser.error("--dump-texts writes the texts as the window closes: give --quit-after SECONDS too")
    if getattr(args, "func", None) is None:
        try:
            from gui.app import run_app
        except ImportError as exc:
            print(f"herd: the desktop app is not available ({exc}); use a command, see `herd --help`.",
                  file=sys.stderr)
            return 2
        return run_app(args)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
