"""What every headless ``herd`` command shares: its error, how it runs, and finding the nodes.

A command is an ``async`` function of the parsed arguments, wrapped by :func:`command_runner`;
it raises :class:`CommandError` to stop with one clear sentence and an exit status. Commands
that use nodes add :func:`add_finding_options` to their parser and call :func:`discover`; the
nodes a launch can use are :func:`~gui.cluster.nodes.records.usable_nodes`, and their plan
devices come from :func:`devices_of`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from agent.client import AgentError
from agent.files import CorruptFile
from gui.cluster.nodes.discovery import Discovery, parse_address
from gui.cluster.nodes.records import KnownAddresses, Node, TokenStore
from gui.cluster.planning.devices import node_devices


class CommandError(Exception):
    """Stops a command with a message and an exit status."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def command_runner(coro_fn):
    """Wrap an async command: run it, turn :class:`CommandError` into message + exit status."""
    def run(args: argparse.Namespace) -> int:
        try:
            return asyncio.run(coro_fn(args)) or 0
        except CommandError as exc:
            print(f"herd {args.command}: {exc}", file=sys.stderr)
            return exc.code
        except KeyboardInterrupt:
            return 130
    return run


def add_finding_options(p: argparse.ArgumentParser, default_timeout: float) -> None:
    """The "finding nodes" option group every command that uses nodes has (``--timeout``,
    ``--add``, ``--interface``, ``--no-mdns``), as :func:`discover` reads it."""
    g = p.add_argument_group("finding nodes")
    g.add_argument("--timeout", type=float, default=default_timeout, metavar="S",
                   help=f"seconds to browse mDNS (default {default_timeout:g})")
    g.add_argument("--add", action="append", default=[], metavar="ADDR",
                   help="also use the agent at HOST[:PORT] (remembered); repeatable")
    g.add_argument("--interface", action="append", default=None, metavar="IP",
                   help="browse mDNS only on the interface with this address; repeatable")
    g.add_argument("--no-mdns", action="store_true", help="do not browse; use added addresses only")


async def discover(args: argparse.Namespace, *, wait: bool = True, strict: bool = False,
                    unanswered: dict[str, str] | None = None) -> Discovery:
    """A started :class:`Discovery` holding the browsed and added nodes.

    A node given with ``--add`` must answer. A remembered node that does not answer is an error
    with ``strict`` (a plan over all of the user's nodes must not quietly launch without one of
    them); with ``unanswered`` its address and the reason go there, for the caller to judge
    against its plan; otherwise a note.
    """
    known = KnownAddresses()
    for a in args.add:
        try:
            parse_address(a)
        except ValueError as exc:
            raise CommandError(str(exc), 2) from None
    disc = Discovery(args.interface, browse=not args.no_mdns, tokens=TokenStore())
    await disc.start()
    try:
        remembered = known.load()
    except CorruptFile as exc:
        print(f"note: {exc}; no remembered addresses are used", file=sys.stderr)
        remembered = []
    addresses = list(dict.fromkeys(remembered + args.add))
    results = await asyncio.gather(*(disc.add_address(a, timeout=3.0) for a in addresses),
                                   return_exceptions=True)
    for a, r in zip(addresses, results):
        if isinstance(r, Exception):
            if a in args.add or strict:
                await disc.stop()
                raise CommandError(f"no herd agent answers at {a} (the node vanished or is off): {r}")
            if unanswered is not None:
                unanswered[a] = str(r)
            else:
                print(f"note: the remembered node at {a} does not answer", file=sys.stderr)
        elif a in args.add:
            known.add(a)
    if wait and not args.no_mdns and args.timeout > 0:
        await asyncio.sleep(args.timeout)  # an mDNS browse has no "done": listen this long
    return disc


async def devices_of(disc: Discovery, nodes: list[Node], failed: dict[str, str] | None = None) -> list:
    """Plan devices of each node, from its agent's status. A node whose status cannot be read
    is an error, or with ``failed`` (a dict) left out and noted there (node id → why)."""
    async def one(node: Node):
        async with disc.client(node) as c:
            try:
                return node_devices(node, await c.status())
            except AgentError as exc:
                if failed is None:
                    raise CommandError(f"{node.name}: {exc}") from None
                failed[node.id] = str(exc)
                return []
    out: list = []
    for devs in await asyncio.gather(*(one(n) for n in nodes)):
        out.extend(devs)
    return out


def read_model(path: Path):
    """The model file's :class:`~gui.cluster.llama.model.ModelInfo`; an unreadable file is a
    :class:`CommandError` with exit status 2 (bad input)."""
    from gui.cluster.llama.model import ModelError, inspect_model
    try:
        return inspect_model(path)
    except ModelError as exc:
        raise CommandError(str(exc), 2) from None
