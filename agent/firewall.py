"""Windows Firewall rules that let the local network, and only it, reach the agent.

The MSI cannot open ports itself (wixl has no firewall extension), so it runs
``herd-agent.exe firewall add`` as a deferred custom action after installing the service, and
``herd-agent.exe firewall remove`` before removing the files. Both build ``netsh advfirewall``
command lines here; on other systems the commands can still be printed (``--dry-run``), which is
what the tests check, but not run.

Every rule is inbound, allows one protocol and port, and is limited to ``remoteip=localsubnet``:
hosts on the PC's own subnets, not the internet behind a forwarded port. Rules apply to every
network profile, because Windows files many home networks under "Public".
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass

from agent import protocol as P

#: Every rule this program creates starts with this, so ``remove`` finds exactly ours.
RULE_GROUP = "llama-herd agent"
#: mDNS (the master finds workers by multicast DNS on UDP 5353).
MDNS_PORT = 5353


class FirewallError(RuntimeError):
    """A firewall command failed or cannot run here; the message says which and why."""


@dataclass(frozen=True)
class Rule:
    """One inbound allow rule.

    Attributes:
        name: display name in Windows Defender Firewall. It names the purpose, not the port, so
            ``remove`` (``netsh … delete rule name=…``) finds the rule even after a port change.
        protocol: ``TCP`` or ``UDP``.
        port: local port.
    """

    name: str
    protocol: str
    port: int


def rules(api_port: int = P.DEFAULT_API_PORT, rpc_port: int = P.DEFAULT_RPC_PORT,
          echo_port: int = P.DEFAULT_ECHO_PORT) -> list[Rule]:
    """The rules the agent needs for the given ports."""
    for label, port in (("api_port", api_port), ("rpc_port", rpc_port), ("echo_port", echo_port)):
        if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535:
            raise FirewallError(f"{label}: {port!r} is not a port number (1-65535)")
    return [
        Rule(f"{RULE_GROUP} - control API", "TCP", api_port),
        Rule(f"{RULE_GROUP} - llama.cpp RPC", "TCP", rpc_port),
        Rule(f"{RULE_GROUP} - link echo", "UDP", echo_port),
        Rule(f"{RULE_GROUP} - discovery (mDNS)", "UDP", MDNS_PORT),
    ]


def add_commands(rule_list: list[Rule]) -> list[list[str]]:
    """``netsh`` command lines that (re)create ``rule_list``.

    Each rule is deleted first so that running ``add`` twice (a repair, an upgrade) leaves one
    rule, not two.
    """
    cmds = []
    for r in rule_list:
        cmds.append(["netsh", "advfirewall", "firewall", "delete", "rule", f"name={r.name}"])
        cmds.append([
            "netsh", "advfirewall", "firewall", "add", "rule",
            f"name={r.name}", "dir=in", "action=allow", f"protocol={r.protocol}",
            f"localport={r.port}", "remoteip=localsubnet", "profile=any", "enable=yes",
            f"description=Lets {RULE_GROUP} be reached from this PC's local network only.",
        ])
    return cmds


def remove_commands(rule_list: list[Rule]) -> list[list[str]]:
    """``netsh`` command lines that delete ``rule_list`` (matched by name, whatever the port)."""
    return [["netsh", "advfirewall", "firewall", "delete", "rule", f"name={r.name}"]
            for r in rule_list]


def run_commands(cmds: list[list[str]], *, check_each: bool) -> list[str]:
    """Run ``netsh`` commands (Windows only); returns one line of outcome per command.

    ``check_each=False`` tolerates failures (a ``delete`` of a rule that is not there fails, and
    that is fine). With ``check_each=True`` the first failing ``add`` raises.
    """
    if sys.platform != "win32":
        raise FirewallError(
            "firewall rules are managed on Windows only; on Linux open the ports with your "
            "distribution's firewall (ufw, firewalld) — `--dry-run` prints what Windows would run")
    outcome = []
    for cmd in cmds:
        proc = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        is_add = "add" in cmd[:5]
        line = f"{'ok ' if proc.returncode == 0 else 'failed'} {' '.join(cmd[:6])}"
        outcome.append(line)
        if proc.returncode != 0 and check_each and is_add:
            raise FirewallError(f"`{' '.join(cmd)}` failed ({proc.returncode}): "
                                f"{(proc.stdout + proc.stderr).strip()}")
    return outcome


def register(subparsers) -> None:
    """Add ``firewall add|remove`` to ``herd-agent``'s command line."""
    from agent.main import add_settings_flags  # noqa: PLC0415

    p = subparsers.add_parser(
        "firewall", help="open or close the agent's ports in Windows Firewall (local subnet only)",
        description="Create or delete the inbound Windows Firewall rules the agent needs: control "
                    "API, llama.cpp RPC, link echo and mDNS, each limited to the local subnet. "
                    "The MSI runs this; ports come from the config file unless given here.")
    p.add_argument("action", choices=("add", "remove"))
    add_settings_flags(p, sub=True)
    p.add_argument("--dry-run", action="store_true", help="print the netsh commands, run nothing")
    p.set_defaults(func=cmd_firewall)


def cmd_firewall(args) -> int:
    """``herd-agent firewall add|remove``: exit 0 on success, 1 on a failed rule, 2 on bad input."""
    from agent.main import effective_settings  # noqa: PLC0415

    s = effective_settings(args)  # a bad config or flag raises SettingsError: exit 2, named
    try:
        rule_list = rules(s.api_port, s.rpc_port, s.echo_port)
    except FirewallError as exc:
        print(f"herd-agent firewall: {exc}", file=sys.stderr)
        return 2
    cmds = add_commands(rule_list) if args.action == "add" else remove_commands(rule_list)
    if args.dry_run:
        for c in cmds:
            print(subprocess.list2cmdline(c))
        return 0
    try:
        for line in run_commands(cmds, check_each=args.action == "add"):
            print(line)
    except FirewallError as exc:
        print(f"herd-agent firewall: {exc}", file=sys.stderr)
        return 1
    return 0
