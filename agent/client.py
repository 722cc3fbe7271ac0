"""The master's client for one agent's control API, and the echo round-trip timer.

Every call is a coroutine (``httpx.AsyncClient``); every failure — network, HTTP status, a reply
that is not what the API promises — raises :class:`AgentError` with a message a user can act on.

Example::

    async with AgentClient("http://10.0.0.5:50050") as c:
        token = await c.pair("123456")        # c now sends the token
        await c.rpc_start(threads=4)
        print((await c.status())["rpc"]["state"])
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import os
import secrets
import struct
import time
from urllib.parse import urlsplit

import httpx

from agent import protocol as P
from agent.i18n import translate
from agent.pairing import PROOF_NONCE_MIN, hash_token, proof_mac, token_id
from agent.relay import normalise_ip


class AgentError(RuntimeError):
    """A call to an agent failed. ``status`` is the HTTP status when there was one."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class IdentityNotProven(AgentError):
    """The address did not prove it is the paired agent; the token was not sent there."""


class AgentClient:
    """Async client for one agent's ``/api/v1``.

    Args:
        base_url: ``http://host:port`` of the agent's API.
        token: bearer token from an earlier :meth:`pair`, or None (only public calls work).
        timeout: seconds per request.
        node_id: the id of the agent ``token`` belongs to. When given, the address must prove
            (:meth:`prove_identity`) that it is that paired agent before the token is sent
            there; until it has, no authenticated request leaves this client.
        proven: a set shared between clients of proofs already passed
            (``(base_url, node_id, token_id)``), so an address is challenged once, not per call.
    """

    def __init__(self, base_url: str, token: str | None = None, timeout: float = 5.0, *,
                 node_id: str | None = None, proven: set | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.node_id = node_id
        self._proven = proven if proven is not None else set()
        self._http = httpx.AsyncClient(base_url=self.base_url, timeout=timeout)

    async def __aenter__(self) -> "AgentClient":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the underlying connections."""
        await self._http.aclose()

    # --- public calls -------------------------------------------------------------------------

    async def info(self) -> dict:
        """``GET /info``: id, name, versions, hardware summary, RPC state, ``paired``."""
        return await self._call("GET", P.PATH_INFO)

    async def ping(self) -> dict:
        """``GET /ping``: ``{"ok": true, "id": ..., "time": ...}``."""
        return await self._call("GET", P.PATH_PING)

    async def pair(self, pin: str, client_name: str | None = None) -> str:
        """``POST /pair``: trade the PIN the agent shows for a bearer token.

        The token is also kept on this client for later calls. Wrong PINs raise
        :class:`AgentError` (status 403), too many of them 429 with the wait in the message.
        """
        body: dict = {"pin": str(pin)}
        if client_name:
            body["name"] = client_name
        reply = await self._call("POST", P.PATH_PAIR, json=body)
        token = reply.get("token")
        if not isinstance(token, str) or not token:
            raise AgentError(f"{self.base_url}: pairing reply carried no token")
        self.token = token
        # The token came from this very address: it needs no further proof here.
        if self.node_id:
            self._proven.add(self._proof_key())
        return token

    async def prove(self, token_id: str, nonce: str) -> dict:
        """``POST /prove``: the agent's identity proof for pairing ``token_id`` over ``nonce`` (hex).

        Returns ``{"mac", "address", "id"}`` as the agent sent it (unchecked; see
        :meth:`prove_identity`).
        """
        return await self._call("POST", P.PATH_PROVE, json={"token_id": token_id, "nonce": nonce})

    async def prove_identity(self) -> None:
        """Check that the agent at this address holds this client's pairing and is ``node_id``.

        Sends a fresh random nonce and the token's public id — never the token — and checks the
        MAC in constant time. Raises :class:`IdentityNotProven` naming the address when the
        check fails (an impostor, a relay, or a node that forgot this pairing).
        """
        if not self.token or not self.node_id:
            raise AgentError(f"{self.base_url}: nothing to prove (no token or node id)")
        nonce = secrets.token_bytes(PROOF_NONCE_MIN * 2)
        try:
            reply = await self.prove(token_id(self.token), nonce.hex())
        except AgentError as exc:
            if exc.status in (400, 404, 405):
                raise IdentityNotProven(self._not_proven(f"it could not prove the pairing ({exc})")) from exc
            raise
        mac, address = reply.get("mac"), reply.get("address")
        if not isinstance(mac, str) or not isinstance(address, str):
            raise IdentityNotProven(self._not_proven("its proof reply is malformed"))
        if normalise_ip(address) not in await self._host_addresses():
            raise IdentityNotProven(self._not_proven(
                f"its proof is for {address}, not this address (relayed or forwarded)"))
        want = proof_mac(hash_token(self.token), nonce, self.node_id, address)
        if not hmac.compare_digest(want, mac):
            raise IdentityNotProven(self._not_proven("its proof does not match the pairing"))
        self._proven.add(self._proof_key())

    def _not_proven(self, why: str) -> str:
        return (f"identity not proven: the agent at {self.base_url} claims to be node {self.node_id} "
                f"but {why}; its token was not sent there")

    def _proof_key(self) -> tuple:
        return (self.base_url, self.node_id, token_id(self.token) if self.token else "")

    async def _host_addresses(self) -> set[str]:
        """The IPs this client's host stands for (itself if it is an IP, else what it resolves to)."""
        host = urlsplit(self.base_url).hostname or ""
        try:
            return {normalise_ip(str(ipaddress.ip_address(host.split("%", 1)[0])))}
        except ValueError:
            pass
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(host, None)
        except OSError as exc:
            raise AgentError(f"cannot resolve {host}: {exc}") from exc
        return {normalise_ip(str(i[4][0])) for i in infos}

    async def _ensure_proven(self, auth: bool) -> None:
        """Before the token leaves for an address, that address proves it is the paired agent."""
        if auth and self.token and self.node_id and self._proof_key() not in self._proven:
            await self.prove_identity()

    # --- calls that need the token ------------------------------------------------------------

    async def status(self) -> dict:
        """``GET /status``: hardware, live load and the RPC worker (see ``/openapi.json``)."""
        return await self._call("GET", P.PATH_STATUS, auth=True)

    async def rpc_start(self, port: int | None = None, threads: int | None = None,
                        devices: list[str] | None = None, cache: bool = True) -> dict:
        """``POST /rpc/start``: start (or restart with new options) the RPC worker.

        Returns the RPC part of the status right after the start was accepted; the worker
        becomes ``ready`` shortly after (poll :meth:`status`).
        """
        body: dict = {"cache": bool(cache)}
        if port is not None:
            body["port"] = port
        if threads is not None:
            body["threads"] = threads
        if devices is not None:
            body["devices"] = list(devices)
        return await self._call("POST", P.PATH_RPC_START, json=body, auth=True)

    async def rpc_stop(self) -> dict:
        """``POST /rpc/stop``: stop the RPC worker (and its relay). Returns the RPC status."""
        return await self._call("POST", P.PATH_RPC_STOP, json={}, auth=True)

    async def rpc_log(self, tail: int = 100) -> list[str]:
        """``GET /rpc/log?tail=N``: the last ``tail`` lines the RPC worker printed."""
        reply = await self._call("GET", P.PATH_RPC_LOG, params={"tail": tail}, auth=True)
        lines = reply.get("lines")
        if not isinstance(lines, list):
            raise AgentError(f"{self.base_url}: log reply carried no lines")
        return [str(x) for x in lines]

    async def bandwidth(self, nbytes: int = 8 * 1024 * 1024) -> float:
        """Download ``nbytes`` from ``/probe/bandwidth`` and return the rate in bytes/s."""
        await self._ensure_proven(True)
        headers = self._auth_headers(True)
        try:
            start = time.perf_counter()
            got = 0
            async with self._http.stream("GET", P.PATH_BANDWIDTH, params={"bytes": nbytes},
                                         headers=headers) as resp:
                if resp.status_code != 200:
                    await resp.aread()
                    raise self._http_error(resp)
                async for chunk in resp.aiter_raw():
                    got += len(chunk)
            elapsed = time.perf_counter() - start
        except httpx.HTTPError as exc:
            raise AgentError(f"cannot reach agent at {self.base_url}: {exc}") from exc
        if got == 0 or elapsed <= 0:
            raise AgentError(f"{self.base_url}: bandwidth probe received nothing")
        return got / elapsed

    async def measure_echo_rtt(self, host: str, port: int, count: int = 5,
                               timeout: float = 1.0) -> list[float]:
        """Same as the module function :func:`measure_echo_rtt`."""
        return await measure_echo_rtt(host, port, count, timeout)

    # --- plumbing -----------------------------------------------------------------------------

    def _auth_headers(self, auth: bool) -> dict:
        if not auth:
            return {}
        if not self.token:
            raise AgentError(translate("AgentClient", "{url}: not paired / wrong token (no token; pair "
                                                      "first)").format(url=self.base_url), status=401)
        return {"Authorization": f"Bearer {self.token}"}

    async def _call(self, method: str, path: str, *, json=None, params=None, auth=False) -> dict:
        await self._ensure_proven(auth)
        headers = self._auth_headers(auth)
        try:
            resp = await self._http.request(method, path, json=json, params=params, headers=headers)
        except httpx.HTTPError as exc:
            raise AgentError(translate("AgentClient", "cannot reach agent at {url}: {why} ({kind})")
                             .format(url=self.base_url, why=exc, kind=type(exc).__name__)) from exc
        if resp.status_code != 200:
            raise self._http_error(resp)
        try:
            data = resp.json()
        except ValueError as exc:
            raise AgentError(f"{self.base_url}{path}: reply is not JSON") from exc
        if not isinstance(data, dict):
            raise AgentError(f"{self.base_url}{path}: reply is not a JSON object")
        return data

    def _http_error(self, resp: httpx.Response) -> AgentError:
        detail = ""
        try:
            body = resp.json()
            if isinstance(body, dict):
                detail = str(body.get("error") or "")
        except ValueError:
            detail = resp.text[:200]
        code = resp.status_code
        pairing = resp.request.url.path == P.PATH_PAIR
        if code == 401:
            msg = translate("AgentClient", "{url}: not paired / wrong token").format(url=self.base_url)
        elif pairing and code == 403:
            # Said here rather than relayed: the agent's own words are English, and the user who
            # typed the PIN reads the app's language.
            msg = translate("AgentClient", "{url}: wrong PIN (HTTP 403); enter the PIN the node shows "
                                           "now, a new one after each pairing").format(url=self.base_url)
        elif pairing and code == 429:
            msg = translate("AgentClient", "{url}: too many wrong PINs (HTTP 429); pairing is locked for "
                                           "{seconds} s").format(url=self.base_url,
                                                       seconds=resp.headers.get("Retry-After", "?"))
        else:
            msg = f"{self.base_url}{resp.request.url.path}: HTTP {code}"
            if detail:
                msg += f": {detail}"
        return AgentError(msg, status=code)


class _EchoProtocol(asyncio.DatagramProtocol):
    def __init__(self) -> None:
        self.waiters: dict[bytes, asyncio.Future] = {}

    def datagram_received(self, data: bytes, addr) -> None:
        fut = self.waiters.get(data)
        if fut is not None and not fut.done():
            fut.set_result(time.perf_counter())

    def error_received(self, exc: Exception) -> None:  # ICMP unreachable etc.: counted as loss
        pass


async def measure_echo_rtt(host: str, port: int, count: int = 5, timeout: float = 1.0) -> list[float]:
    """Time ``count`` UDP round trips to an agent's echo port; returns the RTTs in seconds.

    Probes are sent one after another; a probe not answered within ``timeout`` counts as lost
    and is left out, so ``len(result) < count`` means loss. Raises :class:`AgentError` if
    none came back.
    """
    if count < 1:
        raise AgentError("measure_echo_rtt: count must be at least 1")
    loop = asyncio.get_running_loop()
    try:
        transport, proto = await loop.create_datagram_endpoint(_EchoProtocol, remote_addr=(host, port))
    except OSError as exc:
        raise AgentError(translate("AgentClient", "cannot reach echo at {address}: {why}")
                         .format(address=f"{host}:{port}", why=exc)) from exc
    rtts: list[float] = []
    nonce = os.urandom(8)
    try:
        for seq in range(count):
            payload = b"herd" + nonce + struct.pack("<I", seq)
            fut = loop.create_future()
            proto.waiters[payload] = fut
            sent = time.perf_counter()
            transport.sendto(payload)
            try:
                got = await asyncio.wait_for(fut, timeout)
                rtts.append(got - sent)
            except asyncio.TimeoutError:
                pass
            finally:
                proto.waiters.pop(payload, None)
    finally:
        transport.close()
    if not rtts:
        raise AgentError(translate("AgentClient", "no echo from {address} ({count} probes, {timeout} s "
                                   "each)").format(address=f"{host}:{port}", count=count, timeout=timeout))
    return rtts
