"""``herd unpair NODE`` and ``herd key``: the master's side of pinned keys.

``herd key`` prints this master's key fingerprint (what ``herd-agent`` logs when a master pairs),
``herd unpair NODE`` forgets a node's pinned key here and tells the node to forget this master.
"""

from __future__ import annotations

import argparse
import asyncio

from agent.client import AgentError
from agent.identity import display_fingerprint
from gui.cli.common import CommandError, command_runner
from gui.cluster.nodes.discovery import Discovery
from gui.cluster.nodes.records import KnownAddresses, PairingStore, master_identity


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``unpair`` and ``key`` to ``herd``'s parser."""
    p = sub.add_parser("unpair", help="forget a paired node (and tell it to forget this master)")
    p.add_argument("node", help="the node's name, id or HOST[:PORT]")
    p.set_defaults(func=command_runner(cmd_unpair))
    p = sub.add_parser("key", help="show the fingerprint of the key this master pairs its workers with")
    p.set_defaults(func=lambda args: print(display_fingerprint(master_identity().fingerprint, 16)) or 0)


async def cmd_unpair(args: argparse.Namespace) -> int:
    store = PairingStore()
    disc = Discovery(browse=False, tokens=store)
    try:
        # the nodes this master was told about by address (unanswered ones are simply absent)
        await asyncio.gather(*(disc.add_address(a, timeout=3.0) for a in KnownAddresses().load()),
                             return_exceptions=True)
        node = disc.find(args.node)
        if node is None:
            try:
                node = await disc.add_address(args.node, timeout=3.0)
            except (ValueError, AgentError):
                node = None
        if node is not None and node.paired:
            note = await disc.unpair(node)
            if note:
                print(f"note: {note}")
            print(f"unpaired {node.name} ({display_fingerprint(node.key) if node.key else node.id})")
            return 0
        # Not reachable now: forget it here by id or by the name it had at pairing.
        names = store.names()
        for nid, name in names.items():
            if args.node in (nid, name):
                store.forget(nid)
                print(f"unpaired {name or nid} here; it did not answer, so run `herd-agent unpair` on it "
                      "too")
                return 0
    finally:
        await disc.stop()
    raise CommandError(f"no paired node is called {args.node!r}", 2)
