"""Entry point of ``herd``: with a sub-command it runs headless, without one it opens the app."""

from __future__ import annotations

import argparse
import importlib
import sys

from gui import __version__

# Each module registers its sub-commands with ``register(subparsers)``.
COMMAND_MODULES = [
    "gui.cli.engine",
    "gui.cli.cluster",
    "gui.cli.demo",
    "gui.cli.bench",
]


def build_parser() -> argparse.ArgumentParser:
    """The full ``herd`` argument parser."""
    parser = argparse.ArgumentParser(
        prog="herd",
        description="Turn the PCs of your network into one llama.cpp cluster. "
                    "Without a command, opens the desktop app.",
    )
    parser.add_argument("--version", action="version", version=f"llama-herd {__version__}")
    parser.add_argument("--lang", choices=["en", "zh_CN"], help="force the app's language")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run ``herd``; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
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
