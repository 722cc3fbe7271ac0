"""``herd service install PROFILE | remove | status``: serve a cluster from login, without the
window (#36). The logic is in :mod:`gui.cluster.launching.login_service`."""

from __future__ import annotations

import argparse
import sys

from gui.cluster.launching import login_service as ls


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``service`` and its three commands to ``herd``'s parser."""
    p = sub.add_parser("service", help="start a cluster (a profile) whenever you log in, with no window",
                       description="Start `herd up PROFILE` at every login: a systemd user unit (or an XDG "
                                   "autostart entry where there is no systemd user session) on Linux, a logon "
                                   "task on Windows, a LaunchAgent on macOS.")
    verbs = p.add_subparsers(dest="service_command", metavar="install|remove|status", required=True)
    i = verbs.add_parser("install", help="keep a copy of PROFILE and serve it from login")
    i.add_argument("profile", help="the profile to serve (.json, from herd export or the app's Export)")
    i.add_argument("--mechanism", choices=ls.MECHANISMS, default=None,
                   help="how to start it (default: the one this system has; the output says which and why)")
    i.set_defaults(func=cmd_install)
    r = verbs.add_parser("remove", help="stop serving from login and remove the service")
    r.set_defaults(func=cmd_remove)
    s = verbs.add_parser("status", help="say whether the service is installed, how, and whether it serves")
    s.set_defaults(func=cmd_status)


def _report(action, args) -> int:
    try:
        lines = action()
    except (ls.LoginServiceError, OSError) as exc:
        print(f"herd service {args.service_command}: {exc}", file=sys.stderr)
        return 1
    for line in lines:
        print(line)
    return 0


def cmd_install(args) -> int:
    """``herd service install PROFILE``."""
    return _report(lambda: ls.install(args.profile, mechanism=args.mechanism), args)


def cmd_remove(args) -> int:
    """``herd service remove``."""
    return _report(ls.remove, args)


def cmd_status(args) -> int:
    """``herd service status``."""
    return _report(ls.status, args)
