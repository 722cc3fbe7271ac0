"""Entry point of ``herd-agent``."""

from __future__ import annotations

import argparse
import sys

from agent import __version__


def main(argv: list[str] | None = None) -> int:
    """Run ``herd-agent``; returns the process exit code."""
    parser = argparse.ArgumentParser(prog="herd-agent", description="llama-herd worker agent")
    parser.add_argument("--version", action="version", version=f"herd-agent {__version__}")
    parser.parse_args(argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
