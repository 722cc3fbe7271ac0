"""``herd wake NODE``: wake a sleeping paired node by Wake-on-LAN (#36).

It needs nothing from the node itself — the node sleeps — only what the node last reported and
this master kept with its pairing: its MAC address and its subnet's broadcast address
(:mod:`gui.cluster.nodes.wake`). The magic packet goes to that broadcast address on UDP ports 9
and 7. With ``--wait S`` it then waits, bounded, until the node answers at the address where
this master last reached it (with its pinned key), sending the packet again now and then.
"""

from __future__ import annotations

import argparse
import ipaddress
import sys

from agent.client import AgentClient, AgentError
from gui.cli.common import CommandError, command_runner
from gui.cluster.nodes.records import PairingStore, master_identity
from gui.cluster.nodes.wake import WAKE_PORTS, WakeTarget, send_wake, wake_and_wait, wake_paired, waking_message


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``wake`` to ``herd``'s parser."""
    p = sub.add_parser("wake", help="wake a sleeping paired node (Wake-on-LAN)",
                       description="Send a Wake-on-LAN magic packet to a paired node, to the MAC address "
                                   "and broadcast address it reported when this master last read it. "
                                   "Its BIOS/UEFI and OS must allow waking by the network (see the README).")
    p.add_argument("node", help="the node's name (as it was when paired) or id")
    p.add_argument("--broadcast", metavar="IP",
                   help="send to this broadcast address instead of the one the node reported")
    p.add_argument("--wait", type=float, default=0.0, metavar="S",
                   help="then wait up to S seconds for the node to answer (default: do not wait)")
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
        target = WakeTarget(mac=target.mac, broadcast=args.broadcast, api=target.api)
    if not 0 <= args.wait <= 3600:
        raise CommandError(f"--wait: {args.wait:g} is out of range (0-3600 seconds)", 2)
    if args.wait and not target.api:
        print(f"note: where {name} answers is not known yet, so herd cannot wait for it", flush=True)
    try:
        if args.wait and target.api:
            return await _wake_and_wait(store, node_id, name, target, args.wait)
        send_wake(target)
    except OSError as exc:
        raise CommandError(f"could not send the wake packet to {target.broadcast}: "
                           f"{exc.strerror or exc}; check that this computer is on the node's network") from None
    print(f"sent a Wake-on-LAN packet for {name} ({target.mac}) to {target.broadcast}, UDP ports "
          f"{' and '.join(str(p) for p in WAKE_PORTS)}")
    return 0


async def _wake_and_wait(store: PairingStore, node_id: str, name: str, target: WakeTarget, wait: float) -> int:
    """Wake the node and wait until it answers at its last address with its pinned key."""
    identity = master_identity(store.path.parent)
    client = AgentClient(f"https://{target.api}", timeout=2.0, identity=identity, pinned=store.get(node_id),
                         node_id=node_id)

    async def answers() -> bool:
        try:
            return (await client.ping()).get("id") in (None, node_id)
        except AgentError:
            return False

    print(f"sent a Wake-on-LAN packet for {name} ({target.mac}) to {target.broadcast}; waiting up to "
          f"{wait:g} s for it to answer at {target.api}", flush=True)
    shown = [0]

    def progress(waited: float) -> None:
        if waited - shown[0] >= 10:  # a line every 10 s, not a flood
            shown[0] = int(waited)
            print(f"  still asleep after {waited:.0f} s", flush=True)

    try:
        took = await wake_and_wait(target, answers, wait, progress=progress)
    finally:
        await client.aclose()
    if took is None:
        raise CommandError(f"{name} did not answer within {wait:g} s: check that Wake-on-LAN is allowed on it "
                           "(BIOS/UEFI and the network adapter's settings, see the README) and that it is on "
                           "a cable")
    print(f"{name} is awake (answered after {took:.1f} s)")
    return 0


def add_wake_option(p: argparse.ArgumentParser) -> None:
    """``--wake-wait S``: how long ``herd up`` waits for the sleeping nodes it wakes (#36)."""
    p.add_argument("--wake-wait", type=float, default=120.0, metavar="S",
                   help="wake the plan's paired nodes that sleep (Wake-on-LAN, when their MAC address is "
                        "known) and wait up to S seconds for them (default 120; 0 = do not wake)")


async def wake_for_up(args: argparse.Namespace) -> None:
    """Before ``herd up`` looks for its nodes: wake the paired nodes the plan needs that sleep and
    wait for them, bounded, printing progress (#36). A ``--split`` needs the nodes it gives slots
    to; any other plan may use every paired node. A node that stays asleep is left to what
    ``herd up`` does today (it says the node does not answer)."""
    if not 0 <= args.wake_wait <= 3600:
        raise CommandError(f"--wake-wait: {args.wake_wait:g} is out of range (0-3600 seconds)", 2)
    if not args.wake_wait:
        return
    store = PairingStore()
    try:
        names = store.names()
    except ValueError as exc:  # an unreadable pairing file: the launch reports it where it reads it
        print(f"note: {exc}; no node is woken", file=sys.stderr)
        return
    wanted = list(names)
    if args.split:
        from gui.cluster.planning.plan import PlanError, parse_split
        try:
            named = {k for k, count in parse_split(args.split).items() if count}
        except PlanError:
            return  # the plan reports the bad split
        wanted = [nid for nid, name in names.items() if nid in named or name in named]
    shown: set[tuple[str, int]] = set()

    def progress(name: str, waited: float) -> None:
        step = int(waited) // 5  # a line every 5 s, not a flood
        if (name, step) not in shown:
            shown.add((name, step))
            print(waking_message(name, waited), flush=True)

    try:
        took = await wake_paired(store, wanted, args.wake_wait, identity=master_identity(store.path.parent),
                                progress=progress)
    except OSError as exc:
        print(f"warning: could not send a Wake-on-LAN packet: {exc.strerror or exc}", file=sys.stderr)
        return
    for node_id, seconds in took.items():
        name = names.get(node_id) or node_id
        if seconds is None:
            print(f"warning: {name} did not wake within {args.wake_wait:g} s (is Wake-on-LAN allowed on it? "
                  "see the README)", file=sys.stderr)
        else:
            print(f"{name} is awake (answered after {seconds:.1f} s)", flush=True)
