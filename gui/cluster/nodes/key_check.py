"""Asking the agent at an address who it is, and believing only the key pinned at pairing (#25).

The half of discovery that checks a hint (an mDNS record, a typed address) against the agent
that answers there: an unpaired node by its public ``/info``, a paired one by its authenticated
``/status`` over mutual TLS with the key pinned for it, and an address by which of the pinned
keys answers there. Each check returns what it found or, in words that name the address, why it
found nothing; it changes no list (that is :class:`~gui.cluster.nodes.discovery.Discovery`'s).
"""

from __future__ import annotations

from agent.client import AgentClient, AgentError, KeyMismatch
from gui.cluster.nodes.records import PairingStore, bracket_host


def agent_url(host: str, api_port: int) -> str:
    """The agent's API address (an IPv6 host in brackets)."""
    return f"https://{bracket_host(host)}:{api_port}"


async def public_info(node_id: str, host: str, api_port: int, *, timeout: float) -> tuple[dict, str | None]:
    """``(info, None)`` when the agent at ``host:api_port`` says in its public ``/info`` that
    it is ``node_id``, else ``({}, the reason)``."""
    url = agent_url(host, api_port)
    try:
        async with AgentClient(url, timeout=timeout) as c:
            info = await c.info()
    except AgentError as exc:
        return {}, f"no herd agent answers at {url} ({exc})"
    if info.get("id") != node_id:
        return {}, f"the agent at {url} is {info.get('id')!r}, not {node_id}"
    return info, None


async def authenticated_status(node_id: str, host: str, api_port: int, *, identity, pinned: str,
                               timeout: float) -> tuple[dict, str | None]:
    """``(status, None)`` when the agent at ``host:api_port`` answers ``/status`` with the key
    ``pinned`` for ``node_id`` (mutual TLS with this master's ``identity``), else ``({}, why
    not)`` — the message names the address."""
    url = agent_url(host, api_port)
    try:
        async with AgentClient(url, timeout=timeout, identity=identity, pinned=pinned,
                               node_id=node_id) as c:
            status = await c.status_json()
    except KeyMismatch:
        return {}, (f"wrong key: the agent at {url} claims to be node {node_id} but its key is not "
                    "the one pinned at pairing; this master does not use it")
    except AgentError as exc:
        return {}, (f"key not checked: the agent at {url} claims to be node {node_id} but did not "
                    f"answer ({exc}); this master does not use it")
    if status.get("id") != node_id:
        return {}, f"the agent at {url} has the pinned key but says it is {status.get('id')!r}"
    return status, None


async def which_paired(host: str, api_port: int, *, tokens: PairingStore, identity,
                       timeout: float) -> str | None:
    """The id of the paired node whose pinned key answers at ``host:api_port`` (one TLS
    handshake that accepts any of the pinned keys, and only those: the master's certificate
    goes to nobody else), or None."""
    try:
        pinned = tokens.all()
    except ValueError:
        return None
    if not pinned:
        return None
    by_key = {}
    for nid in pinned:
        try:
            by_key[tokens.fingerprint(nid)] = nid
        except ValueError:
            continue
    try:
        async with AgentClient(agent_url(host, api_port), timeout=timeout, identity=identity,
                               pinned="".join(pinned.values())) as c:
            status, key = await c.status_and_key()
    except AgentError:
        return None
    nid = by_key.get(key or "")
    return nid if nid is not None and status.get("id") == nid else None
