"""``herd wake NODE``: wake a sleeping paired node by Wake-on-LAN (#36).

It needs nothing from the node itself — the node sleeps — only what the node last reported and
this master kept with its pairing: its MAC address and its subnet's broadcast address
(:mod:`gui.cluster.nodes.wake`). The magic packet goes to that broadcast address on UDP ports 9
and 7.
"""

from __future__ import annotations

import argparse
import ipaddress

from gui.cli.common import CommandError, command_runner
from gui.cluster.nodes.records import PairingStore
from gui.cluster.nodes.wake import WAKE_PORTS, WakeTarget, send_wake


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``wake`` to ``herd``'s parser."""
    p = sub.add_parser("wake", help="wake a sleeping paired node (Wake-on-LAN)",
                       description="Send a Wake-on-LAN magic packet to a paired node, to the MAC address "
                                   "and broadcast address it reported when this master last read it. "
                                   "Its BIOS/UEFI and OS must allow waking by the network (see the README).")
    p.add_argument("node", help="the node's name (as it was when paired) or id")
    p.add_argument("--broadcast", metavar="IP",
                   help="send to this broadcast address instead of the one the node reported")
    p.set_defaults(func=command_runner(cmd_wake))


def find_paired(store: PairingStore, which: str) -> tuple[str, str]:
    """``(node id, name)`` of the paired node called ``which`` (its id, or its name at pairing);
    :class:`CommandError` naming it when there is none, or more than one of that name."""
    try:
        names = store.names()
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    if which in names:
        return which, names[which] or which
    matches = [nid for nid, name in names.items() if name == which]
    if len(matches) > 1:
        raise CommandError(f"{len(matches)} paired nodes are called {which!r}: give the id of the one to "
                           f"wake ({', '.join(matches)})", 2)
    if not matches:
        known = ", ".join(sorted(n or i for i, n in names.items())) or "none yet"
        raise CommandError(f"no paired node is called {which!r} (paired: {known})", 2)
    return matches[0], which


async def cmd_wake(args: argparse.Namespace) -> int:
    store = PairingStore()
    node_id, name = find_paired(store, args.node)
    target = store.wake_target(node_id)
    if target is None:
        raise CommandError(f"the MAC address of {name} is not known yet: herd learns it when it reads the "
                           "node while it is awake (open the app or run `herd nodes` once it is on)")
    if args.broadcast:
        try:
            ipaddress.IPv4Address(args.broadcast)
        except ValueError:
            raise CommandError(f"--broadcast: {args.broadcast!r} is not an IPv4 address", 2) from None
        target = WakeTarget(mac=target.mac, broadcast=args.broadcast)
    try:
        send_wake(target)
    except OSError as exc:
        raise CommandError(f"could not send the wake packet to {target.broadcast}: "
                           f"{exc.strerror or exc}; check that this computer is on the node's network") from None
    print(f"sent a Wake-on-LAN packet for {name} ({target.mac}) to {target.broadcast}, UDP ports "
          f"{' and '.join(str(p) for p in WAKE_PORTS)}")
    return 0
