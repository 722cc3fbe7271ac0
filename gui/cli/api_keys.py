"""``herd keys add|list|revoke``: the keys other devices use to reach the cluster's endpoint (#34).

One key per device or app (``phone``, ``open-webui``), made here and typed into the app as its
API key. Only a hash of each key is kept (:mod:`gui.cluster.serving.api_keys`), so ``add`` prints
the key once; a running ``herd up --lan`` takes an added or revoked key at once.

Not to be confused with ``herd key`` (:mod:`gui.cli.keys`), which shows the key this master
pairs with its workers.
"""

from __future__ import annotations

import argparse
import json
import time

from gui.cli.common import CommandError, command_runner
from gui.cluster.serving.api_keys import ApiKeyError, ApiKeyStore


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``keys`` (with ``add``, ``list``, ``revoke``) to ``herd``'s parser."""
    p = sub.add_parser("keys", help="keys that let apps on other devices use the endpoint (herd up --lan): "
                                    "add, list, revoke")
    actions = p.add_subparsers(dest="keys_action", metavar="ACTION", required=True)
    a = actions.add_parser("add", help="make a key for one device or app and print it (once)")
    a.add_argument("name", help="what to call it, e.g. phone or open-webui")
    a.add_argument("--json", action="store_true", help='print {"name": …, "key": …}')
    a.set_defaults(func=command_runner(cmd_add))
    a = actions.add_parser("list", help="list the keys by name (keys themselves are not kept)")
    a.add_argument("--json", action="store_true", help="print JSON")
    a.set_defaults(func=command_runner(cmd_list))
    a = actions.add_parser("revoke", help="revoke a key; apps using it are refused at once")
    a.add_argument("name", help="the key's name")
    a.set_defaults(func=command_runner(cmd_revoke))


async def cmd_add(args: argparse.Namespace) -> int:
    store = ApiKeyStore()
    try:
        key = store.add(args.name)
    except ApiKeyError as exc:
        raise CommandError(str(exc), 2) from None
    except OSError as exc:
        raise CommandError(f"cannot write {store.path}: {exc.strerror or exc}") from None
    if args.json:
        print(json.dumps({"name": args.name, "key": key}))
        return 0
    print(f"Key for {args.name} (shown only now; enter it in the app as its API key):")
    print(key)
    return 0


async def cmd_list(args: argparse.Namespace) -> int:
    try:
        keys = ApiKeyStore().list()
    except ApiKeyError as exc:
        raise CommandError(str(exc)) from None
    if args.json:
        print(json.dumps([{"name": k.name, "created": k.created} for k in keys], indent=2))
        return 0
    if not keys:
        print("No keys yet. Make one for each device with `herd keys add NAME`.")
        return 0
    print(f"{'NAME':<40} CREATED")
    for k in keys:
        print(f"{k.name:<40} {time.strftime('%Y-%m-%d %H:%M', time.localtime(k.created))}")
    return 0


async def cmd_revoke(args: argparse.Namespace) -> int:
    store = ApiKeyStore()
    try:
        gone = store.revoke(args.name)
    except ApiKeyError as exc:
        raise CommandError(str(exc)) from None
    except OSError as exc:
        raise CommandError(f"cannot write {store.path}: {exc.strerror or exc}") from None
    if not gone:
        raise CommandError(f"no key is called {args.name} (`herd keys list` shows them)", 2)
    print(f"revoked {args.name}")
    return 0
