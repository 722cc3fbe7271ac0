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
import os
import struct
import time

import httpx

from agent import protocol as P
from agent.i18n import translate


class AgentError(RuntimeError):
    """A call to an agent failed. ``status`` is the HTTP status when there was one."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class AgentClient:
    """Async client for one agent's ``/api/v1``.

    Args:
        base_url: ``http://host:port`` of the agent's API.
        token: bearer token from an earlier :meth:`pair`, or None (only public calls work).
        timeout: seconds per request.
    """

    def __init__(self, base_url: str, token: str | None = None, timeout: float = 5.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout
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
        return token

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
