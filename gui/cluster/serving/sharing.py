"""Sharing the endpoint on the LAN (``herd up --lan``, #34): where the front door listens, where
llama-server moves to, and the addresses to tell the user.

With sharing on, llama-server listens on loopback at a port picked here and is never reached from
another host; :class:`~gui.cluster.serving.front_door.FrontDoor` takes the endpoint's address and
port. The printed endpoint is always an address the front door really listens on.

With HTTPS on (``herd up --lan --https``, the Share… dialog's *Use HTTPS*), the front door serves
TLS with herd's own certificate (:mod:`gui.cluster.serving.door_certificate`), made for the
addresses it is shared on, and the user is shown its fingerprint to check in the client.
"""

from __future__ import annotations

import logging
import socket
import sys
from dataclasses import dataclass, replace

from agent.ports import free_port
from gui.cluster.llama.model import DEFAULT_SEQUENCES
from gui.cluster.llama.server_command import DEFAULT_HOST, ServerOptions
from gui.cluster.serving.api_keys import ApiKeyStore
from gui.cluster.serving.door_certificate import DoorCertificate, DoorCertificateError, door_certificate
from gui.cluster.serving.front_door import DoorSettings, FrontDoor, FrontDoorError

#: Every IPv4 address of this computer: what ``--lan`` listens on unless ``--host`` names one.
ALL_ADDRESSES = "0.0.0.0"


def _slots(options: ServerOptions) -> int:
    """llama-server's parallel slots with ``options`` (its default when they cannot be read)."""
    try:
        return options.cache_shape().sequences
    except ValueError:  # a -np that is not a number: the launch says so in words
        return DEFAULT_SEQUENCES


def door_hosts(host: str | None) -> tuple[str, ...]:
    """The addresses the front door listens on for ``--host`` (None: every address). A single
    LAN address gets loopback too, so scripts and the app on this computer keep working."""
    if not host or host == ALL_ADDRESSES:
        return (ALL_ADDRESSES,)
    if host in (DEFAULT_HOST, "localhost", "::1"):
        return (host,)
    return (host, DEFAULT_HOST)


def share_on_lan(options: ServerOptions, host: str | None, keys: ApiKeyStore | None = None,
                 settings: DoorSettings = DoorSettings(),
                 certificate: DoorCertificate | None = None) -> tuple[ServerOptions, FrontDoor]:
    """(llama-server's options behind the front door, the front door — not started yet).

    ``options`` are what the user asked for the endpoint (its port); llama-server gets loopback
    and a free port instead, and the front door the endpoint's port on :func:`door_hosts`,
    serving HTTPS with ``certificate`` when one is given.
    """
    upstream = replace(options, host=DEFAULT_HOST, port=free_port(DEFAULT_HOST))
    # as many at once as llama-server has slots; the others wait in the door's queue (#34)
    door = FrontDoor(f"http://{DEFAULT_HOST}:{upstream.port}", keys or ApiKeyStore(),
                     hosts=door_hosts(host), port=options.port, settings=settings,
                     people=_slots(options),
                     ssl_context=certificate.server_context() if certificate is not None else None)
    return upstream, door


def certificate_for(host: str | None) -> DoorCertificate:
    """herd's certificate for a door shared on ``host`` (None: every address): valid for the
    addresses it listens on, ``hostname.local`` and localhost; made again when they changed
    (#34). :class:`~gui.cluster.serving.door_certificate.DoorCertificateError` in words."""
    from agent.advertise import lan_addresses

    hosts = door_hosts(host)
    addresses = lan_addresses() if ALL_ADDRESSES in hosts else [h for h in hosts if h != "localhost"]
    return door_certificate(addresses, local_hostname())


async def open_front_door(options: ServerOptions, host: str | None, keys: ApiKeyStore | None = None,
                          settings: DoorSettings = DoorSettings(),
                          https: bool = False) -> tuple[ServerOptions, FrontDoor, DoorCertificate | None]:
    """:func:`share_on_lan`, with the front door started: the one way both ``herd up --lan`` and
    the app's Start share the endpoint (#34). With ``https``, it serves TLS with herd's own
    certificate (:func:`certificate_for`), which is returned too. The door takes its port before
    the model loads, so the endpoint never refuses a client;
    :class:`~gui.cluster.serving.front_door.FrontDoorError` (in words) when the address or port
    cannot be taken, or the certificate cannot be made."""
    try:
        certificate = certificate_for(host) if https else None
    except DoorCertificateError as exc:
        raise FrontDoorError(str(exc)) from None
    upstream, door = share_on_lan(options, host, keys, settings, certificate)
    await door.start()
    return upstream, door, certificate


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
            out += [f"{door.scheme}://{a}:{door.port}" for a in lan_addresses()] + [
                f"{door.scheme}://{DEFAULT_HOST}:{door.port}"]
        else:
            out.append(f"{door.scheme}://{f'[{host}]' if ':' in host else host}:{door.port}")
    return list(dict.fromkeys(out))


def local_hostname() -> str:
    """This computer's ``hostname.local`` (its mDNS name, which phones on the LAN resolve)."""
    name = socket.gethostname().split(".")[0] or "localhost"
    return f"{name}.local"


@dataclass(frozen=True)
class ShareInfo:
    """What a phone app needs to use the shared endpoint (#34), as the Share… dialog shows it.

    Attributes:
        urls: base URLs the front door really listens on, the LAN ones first (``…/v1`` is added
            by the apps that want it).
        mdns_url: the same by this computer's ``hostname.local`` name, or "" when the door listens
            on loopback only.
        port: the endpoint's port.
        model: the model id the endpoint serves (``--alias``).
        fingerprint: with HTTPS, the SHA-256 fingerprint of herd's certificate as clients show
            it (``AB:12:…``), for the user to check; "" over plain HTTP.
        cert_path: with HTTPS, the certificate's file (what a client pins), else None.
    """

    urls: tuple[str, ...]
    mdns_url: str
    port: int
    model: str
    fingerprint: str = ""
    cert_path: str | None = None


def share_info(door: FrontDoor, model: str, certificate: DoorCertificate | None = None) -> ShareInfo:
    """The :class:`ShareInfo` of a running front door serving ``model`` (with ``certificate``
    when it serves HTTPS)."""
    urls = tuple(endpoint_urls(door))
    loopback_only = all(h in (DEFAULT_HOST, "localhost", "::1") for h in door.hosts)
    mdns = "" if loopback_only else f"{door.scheme}://{local_hostname()}:{door.port}"
    if certificate is None:
        return ShareInfo(urls, mdns, door.port, model)
    return ShareInfo(urls, mdns, door.port, model, certificate.display_fingerprint, str(certificate.cert_path))


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


class LanShare:
    """The app's shared endpoint (#34): the front door opened at Start when *Share on the LAN* is
    on, closed at Stop. It outlives a failover relaunch (llama-server comes back at the same
    loopback port behind it).

    Attributes:
        keys: the :class:`ApiKeyStore` that opens the door (the user's key file by default).
        door: the running :class:`FrontDoor`, or None while not shared.
        certificate: herd's certificate while the door serves HTTPS, else None.
    """

    def __init__(self, keys: ApiKeyStore | None = None) -> None:
        self.keys = keys or ApiKeyStore()
        self.door: FrontDoor | None = None
        self.certificate: DoorCertificate | None = None

    async def open(self, options: ServerOptions, https: bool = False) -> ServerOptions:
        """Start the front door on the endpoint's port (serving HTTPS with herd's certificate
        when ``https``) and return llama-server's options behind it. An endpoint on loopback
        (the app's default) is shared on every address; one that names a LAN address, on that
        one (and loopback)."""
        host = None if options.host in (DEFAULT_HOST, "localhost", "::1") else options.host
        upstream, self.door, self.certificate = await open_front_door(options, host, self.keys, https=https)
        return upstream

    async def close(self) -> None:
        """Stop the front door, if open."""
        door, self.door, self.certificate = self.door, None, None
        if door is not None:
            await door.stop()

    @property
    def url(self) -> str | None:
        """The first base URL the door listens on (a LAN one when there is one), or None."""
        return endpoint_urls(self.door)[0] if self.door is not None else None

    def info(self, model: str) -> ShareInfo | None:
        """What a phone app needs while the endpoint is shared, or None."""
        return share_info(self.door, model, self.certificate) if self.door is not None else None
