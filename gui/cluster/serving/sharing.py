"""Sharing the endpoint on the LAN (``herd up --lan``, #34): where the front door listens, where
llama-server moves to, and the addresses to tell the user.

With sharing on, llama-server listens on loopback at a port picked here and is never reached from
another host; :class:`~gui.cluster.serving.front_door.FrontDoor` takes the endpoint's address and
port. The printed endpoint is always an address the front door really listens on.
"""

from __future__ import annotations

import logging
import socket
import sys
from dataclasses import replace

from gui.cluster.llama.server_command import DEFAULT_HOST, ServerOptions
from gui.cluster.serving.api_keys import ApiKeyStore
from gui.cluster.serving.front_door import DoorSettings, FrontDoor

#: Every IPv4 address of this computer: what ``--lan`` listens on unless ``--host`` names one.
ALL_ADDRESSES = "0.0.0.0"


def free_loopback_port() -> int:
    """A TCP port free on 127.0.0.1 a moment ago: llama-server's, behind the front door."""
    with socket.socket() as s:
        s.bind((DEFAULT_HOST, 0))
        return s.getsockname()[1]


def door_hosts(host: str | None) -> tuple[str, ...]:
    """The addresses the front door listens on for ``--host`` (None: every address). A single
    LAN address gets loopback too, so scripts and the app on this computer keep working."""
    if not host or host == ALL_ADDRESSES:
        return (ALL_ADDRESSES,)
    if host in (DEFAULT_HOST, "localhost", "::1"):
        return (host,)
    return (host, DEFAULT_HOST)


def share_on_lan(options: ServerOptions, host: str | None, keys: ApiKeyStore | None = None,
                 settings: DoorSettings = DoorSettings()) -> tuple[ServerOptions, FrontDoor]:
    """(llama-server's options behind the front door, the front door — not started yet).

    ``options`` are what the user asked for the endpoint (its port); llama-server gets loopback
    and a free port instead, and the front door the endpoint's port on :func:`door_hosts`.
    """
    upstream = replace(options, host=DEFAULT_HOST, port=free_loopback_port())
    door = FrontDoor(f"http://{DEFAULT_HOST}:{upstream.port}", keys or ApiKeyStore(),
                     hosts=door_hosts(host), port=options.port, settings=settings)
    return upstream, door


def endpoint_options(served: ServerOptions, door: FrontDoor | None) -> ServerOptions:
    """The endpoint's options as a profile keeps them: with a front door, its port on loopback
    (sharing on the LAN is chosen again at each start), not llama-server's hidden one."""
    return served if door is None else replace(served, host=DEFAULT_HOST, port=door.port)


def endpoint_urls(door: FrontDoor) -> list[str]:
    """The base URLs other apps can use, first the LAN ones: for ``0.0.0.0`` each IPv4 address of
    this computer's interfaces (and loopback last)."""
    from agent.advertise import lan_addresses

    out: list[str] = []
    for host in door.hosts:
        if host == ALL_ADDRESSES:
            out += [f"http://{a}:{door.port}" for a in lan_addresses()] + [f"http://{DEFAULT_HOST}:{door.port}"]
        else:
            out.append(f"http://{f'[{host}]' if ':' in host else host}:{door.port}")
    return list(dict.fromkeys(out))


def print_requests(stream=None) -> None:
    """Print one line per request from another host (key name, route, status, tokens, time; never its
    text) as the front door logs it: what ``herd up --lan`` shows while it serves."""
    logger = logging.getLogger("gui.cluster.serving.front_door")
    if any(getattr(h, "herd_requests", False) for h in logger.handlers):
        return  # once per process
    handler = logging.StreamHandler(stream or sys.stdout)
    handler.setFormatter(logging.Formatter("request: %(message)s"))
    handler.herd_requests = True
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
