"""The master's end of the encrypted RPC link: a local forwarder per worker.

``llama-server --rpc`` speaks llama.cpp's RPC protocol in the clear and without any
authentication. So the master never points it at a worker directly: for each worker it opens a
:class:`Forwarder` that listens on ``127.0.0.1:<free port>`` and carries every connection over
mutual TLS 1.3 to that worker's relay (:mod:`agent.relay`) — presenting the master's certificate,
accepting only the worker's pinned one. The relay admits the master by that key, never by its
address. Both legs set ``TCP_NODELAY`` and chunks are written straight through (the relay's
splice: no extra copies, one TLS record per write of up to 16 KiB).

A worker whose agent runs with ``exposure = "open"`` has no relay: its endpoint is used as it is
(the agent warns that anyone on the LAN can use such a worker).

A forwarder's loopback port is open to every program on the master, whatever its account; each
connection is therefore traced to the process at its other end (:mod:`gui.cluster.nodes.local_peer`)
and admitted only if that is this master process or one it started — llama-server, a
calibration run — never another account's program (#25). Where the owner cannot be told
(neither Linux nor Windows), any local connection is admitted, as ``docs/security.md`` says.

The launcher owns the forwarders: :func:`open_forwarders` makes them once the workers are up,
:func:`route` gives the server spec whose ``--rpc`` list points at them, :func:`unmap` maps
llama-server's placement report back to the workers' endpoints, and :func:`close_forwarders`
closes them after llama-server stopped.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import replace

from agent.identity import client_context
from agent.relay import RpcRelay
from gui.cluster.nodes.local_peer import started_here

log = logging.getLogger(__name__)


class Forwarder:
    """``127.0.0.1:port`` → TLS to ``host:rpc_port`` with the master's and the worker's keys.

    Args:
        host, rpc_port: the worker's relay.
        identity: the master's :class:`~agent.identity.Identity`.
        pinned: the worker's certificate (PEM) from pairing.
    """

    def __init__(self, host: str, rpc_port: int, identity, pinned: str) -> None:
        self.remote = (host, rpc_port)
        self._relay = RpcRelay("127.0.0.1", 0, is_allowed=_local_only, target=lambda: self.remote,
                               target_ssl=client_context(identity, pinned), peer_check=started_here)

    @property
    def endpoint(self) -> str:
        """``127.0.0.1:port`` for ``llama-server --rpc``."""
        return f"127.0.0.1:{self._relay.port}"

    @property
    def bytes_sent(self) -> int:
        """Bytes carried to the worker by connections that have ended."""
        return self._relay.bytes_to_worker

    async def start(self) -> "Forwarder":
        await self._relay.start()
        return self

    async def close(self) -> None:
        await self._relay.close()


def _local_only(ip: str, _fingerprint) -> bool:
    # The forwarder listens on loopback only; this is a second lock on the same door.
    return ip.startswith("127.") or ip == "::1"


def _rpc_endpoint(node) -> tuple[str, int]:
    host, _, port = node.rpc_endpoint.rpartition(":")
    return host.strip("[]"), int(port)


async def open_forwarders(pairs) -> dict[str, Forwarder]:
    """``pairs``: ``(node, client)`` per worker, ``client`` its paired AgentClient. Returns
    {worker endpoint: started Forwarder}; workers in ``open`` exposure are left out."""
    out: dict[str, Forwarder] = {}
    try:
        for node, client in pairs:
            if node.rpc_endpoint in out:
                continue
            if (await client.status()).rpc.exposure == "open":
                log.warning("%s runs its RPC worker with exposure 'open': the link to it is neither "
                            "encrypted nor authenticated", node.name)
                continue
            host, port = _rpc_endpoint(node)
            out[node.rpc_endpoint] = await Forwarder(host, port, client.identity, client.pinned).start()
    except BaseException:
        for f in out.values():
            await f.close()
        raise
    return out


def route(spec, forwarders: dict[str, Forwarder]):
    """``spec`` (a :class:`~gui.cluster.llama.server_command.ServerSpec`) with each worker
    endpoint of its ``--rpc`` list replaced by its forwarder's (a new spec)."""
    return spec.with_rpc([forwarders[ep].endpoint if ep in forwarders else ep for ep in spec.rpc])


def unmap(placement, forwarders: dict[str, Forwarder]):
    """``placement`` (read from llama-server's log, which names the forwarders) with each
    forwarder's endpoint replaced by its worker's."""
    back = {f.endpoint: ep for ep, f in forwarders.items()}
    if not back:
        return placement

    def rename(d: dict) -> dict:  # buffer names such as RPC0[127.0.0.1:40123]
        out = {}
        for name, mib in d.items():
            for local, ep in back.items():
                name = name.replace(f"[{local}]", f"[{ep}]")
            out[name] = mib
        return out
    return replace(placement, devices=[(n, back.get(e, e)) for n, e in placement.devices],
                   buffers=rename(placement.buffers), kv=rename(placement.kv), compute=rename(placement.compute))


async def close_forwarders(forwarders: dict[str, Forwarder]) -> None:
    """Close ``forwarders`` (after llama-server stopped) and forget them."""
    for f in forwarders.values():
        with contextlib.suppress(Exception):
            await f.close()
    forwarders.clear()


@contextlib.asynccontextmanager
async def forwarded(endpoint: str | None, client):
    """``async with forwarded("10.0.0.5:50052", client) as local:`` — ``local`` is a forwarder's
    endpoint to that worker for the time of the block (a measurement, a probe). ``endpoint``
    itself when there is nothing to forward: no endpoint, no paired client, or a worker in
    ``open`` exposure."""
    if not endpoint or client is None or getattr(client, "pinned", None) is None:
        yield endpoint
        return
    if (await client.status()).rpc.exposure == "open":
        yield endpoint
        return
    host, _, port = endpoint.rpartition(":")
    f = await Forwarder(host.strip("[]"), int(port), client.identity, client.pinned).start()
    try:
        yield f.endpoint
    finally:
        await f.close()
