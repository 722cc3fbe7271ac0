"""The master's client for one agent's control API, and the echo round-trip timer.

The API is HTTPS (TLS 1.3). A client made with the agent's pinned certificate (``pinned``)
accepts only that certificate from the server — no CA, no host name — and with the master's
identity (``identity``) presents the master's certificate, which the agent's protected endpoints
require (see :mod:`agent.identity`). Pairing (:meth:`AgentClient.pair`) is the PAKE of
:mod:`agent.pairing`: the PIN never leaves this machine.

Every call is a coroutine (``httpx.AsyncClient``); every failure — network, HTTP status, a reply
that is not what the API promises — raises :class:`AgentError` with a message a user can act on;
a server whose key is not the pinned one raises :class:`KeyMismatch`.

Example::

    async with AgentClient("https://10.0.0.5:50050", identity=me) as c:
        agent_cert = await c.pair("123456", "my-pc")   # c now pins agent_cert
        await c.rpc_start(threads=4)
        print((await c.status())["rpc"]["state"])
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import ssl
import struct
import time

import httpx

from agent import protocol as P
from agent.i18n import translate
from agent.identity import Identity, IdentityError, client_context, der_of_pem, fingerprint_of_pem
from agent.pairing import GATE_WAIT, BadExchange, MasterExchange, normalise_pin

log = logging.getLogger(__name__)


#: A pairing refused for a back-off this short (the first after a wrong PIN) is tried again.
PAIR_RETRY_MAX_S = 3.0
#: Seconds a pairing step may take: the agent may keep an attempt waiting for its turn while
#: others try (agent.pairing.AttemptGate), up to GATE_WAIT.
PAIR_TIMEOUT = GATE_WAIT + 5.0


class AgentError(RuntimeError):
    """A call to an agent failed. ``status`` is the HTTP status when there was one; a 429 also
    has ``retry_after`` (seconds) when the agent said how long to wait."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class KeyMismatch(AgentError):
    """The server's TLS key is not the one pinned at pairing: nothing was sent to it."""


def https_url(base_url: str) -> str:
    """An API base URL with the scheme the agent serves (older ``http://`` addresses upgraded)."""
    url = base_url.strip().rstrip("/")
    if url.startswith("http://"):
        url = "https://" + url[len("http://"):]
    elif not url.startswith("https://"):
        url = "https://" + url
    return url


class AgentClient:
    """Async client for one agent's ``/api/v1``.

    Args:
        base_url: ``https://host:port`` of the agent's API (``http://`` is upgraded).
        timeout: seconds per request.
        identity: this master's :class:`~agent.identity.Identity`; needed to pair and for every
            protected call.
        pinned: the agent's certificate (PEM) from pairing. When given, a server with any
            other key fails the handshake (:class:`KeyMismatch`) before a request is sent.
        node_id: the node id expected (for messages).
    """

    def __init__(self, base_url: str, timeout: float = 5.0, *, identity: Identity | None = None,
                 pinned: str | bytes | None = None, node_id: str | None = None) -> None:
        self.base_url = https_url(base_url)
        self.timeout = timeout
        self.identity = identity
        self.pinned = pinned.decode("ascii") if isinstance(pinned, bytes) else pinned
        self.node_id = node_id
        self._http = self._new_http()

    def _new_http(self) -> httpx.AsyncClient:
        # The client certificate only goes to a pinned server: an unpaired node's handshake
        # would refuse it anyway, and a stranger has no use for learning it.
        ctx = client_context(self.identity if self.pinned else None, self.pinned)
        return httpx.AsyncClient(base_url=self.base_url, timeout=self.timeout, verify=ctx)

    @property
    def fingerprint(self) -> str | None:
        """The fingerprint of the pinned agent certificate, if any."""
        return fingerprint_of_pem(self.pinned) if self.pinned else None

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
        """Pair by PAKE with the PIN the agent shows; returns the agent's certificate (PEM).

        This client pins that certificate from then on. A wrong PIN raises :class:`AgentError`
        (status 403), an address in back-off 429 with the wait in the message; an answer that
        does not prove knowledge of the PIN (a tampered exchange) raises :class:`KeyMismatch`.
        """
        if self.identity is None:
            raise AgentError(f"{self.base_url}: pairing needs this master's identity")
        ex = MasterExchange(normalise_pin(pin), self.identity.cert_der)
        body: dict = {"msg": ex.msg_a.hex()}
        if client_name:
            body["name"] = client_name[:100]
        try:
            r1 = await self._call("POST", P.PATH_PAIR_START, json=body, timeout=PAIR_TIMEOUT)
        except AgentError as exc:
            # The first back-off after a mistyped PIN is a second or two: waited out here, as a
            # person would before typing again. Longer ones (many wrong PINs) are the user's.
            wait = getattr(exc, "retry_after", None)
            if exc.status != 429 or wait is None or wait > PAIR_RETRY_MAX_S:
                raise
            await asyncio.sleep(wait)
            r1 = await self._call("POST", P.PATH_PAIR_START, json=body, timeout=PAIR_TIMEOUT)
        try:
            mac = ex.finish(bytes.fromhex(str(r1.get("msg", ""))))
        except (ValueError, BadExchange) as exc:
            raise AgentError(f"{self.base_url}: unusable pairing reply ({exc})") from None
        r2 = await self._call("POST", P.PATH_PAIR_FINISH, json={
            "session": r1.get("session"), "cert": self.identity.cert_pem.decode("ascii"), "mac": mac.hex()},
            timeout=PAIR_TIMEOUT)
        cert = r2.get("cert")
        try:
            ok = isinstance(cert, str) and ex.verify(der_of_pem(cert), bytes.fromhex(str(r2.get("mac", ""))))
        except (ValueError, IdentityError):
            ok = False
        if not ok:
            raise KeyMismatch(translate("AgentClient", "{url}: the pairing answer does not prove that it "
                                        "comes from the node that showed the PIN; not paired (someone may "
                                        "be tampering with the network)").format(url=self.base_url))
        await self._http.aclose()
        self.pinned = cert
        self._http = self._new_http()
        return cert

    # --- calls that need a pairing ------------------------------------------------------------

    async def status(self) -> P.AgentStatus:
        """``GET /status``: hardware, live load and the RPC worker, typed (:class:`AgentStatus`)."""
        return P.AgentStatus.from_json(await self.status_json())

    async def status_json(self) -> dict:
        """``GET /status`` as the agent sent it (see ``/openapi.json``)."""
        return await self._call("GET", P.PATH_STATUS, auth=True)

    async def status_and_key(self) -> tuple[dict, str | None]:
        """``GET /status`` as sent, and the fingerprint of the key that answered it — which of
        the pinned certificates, when this client pins several (:func:`identify`)."""
        self._check_paired(True)
        try:
            resp = await self._http.request("GET", P.PATH_STATUS)
            stream = resp.extensions.get("network_stream")
            ssl_object = stream.get_extra_info("ssl_object") if stream is not None else None
            der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
        except httpx.HTTPError as exc:
            raise self._network_error(exc) from exc
        from agent.identity import fingerprint_of_der  # noqa: PLC0415
        return self._reply(resp, P.PATH_STATUS), fingerprint_of_der(der) if der else None

    async def unpair(self) -> dict:
        """``POST /unpair``: the agent forgets this master."""
        return await self._call("POST", P.PATH_UNPAIR, json={}, auth=True)

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
        self._check_paired(True)
        try:
            start = time.perf_counter()
            got = 0
            async with self._http.stream("GET", P.PATH_BANDWIDTH, params={"bytes": nbytes}) as resp:
                if resp.status_code != 200:
                    await resp.aread()
                    raise self._http_error(resp)
                async for chunk in resp.aiter_raw():
                    got += len(chunk)
            elapsed = time.perf_counter() - start
        except httpx.HTTPError as exc:
            raise self._network_error(exc) from exc
        if got == 0 or elapsed <= 0:
            raise AgentError(f"{self.base_url}: bandwidth probe received nothing")
        return got / elapsed

    async def measure_echo_rtt(self, host: str, port: int, count: int = 5,
                               timeout: float = 1.0) -> list[float]:
        """Same as the module function :func:`measure_echo_rtt`."""
        return await measure_echo_rtt(host, port, count, timeout)

    # --- plumbing -----------------------------------------------------------------------------

    def _check_paired(self, auth: bool) -> None:
        if auth and (self.identity is None or self.pinned is None):
            raise AgentError(translate("AgentClient", "{url}: not paired (no pinned key for this node; "
                                                      "pair first)").format(url=self.base_url), status=401)

    def _network_error(self, exc: Exception) -> AgentError:
        text = str(exc)
        if self.pinned and ("CERTIFICATE_VERIFY_FAILED" in text or isinstance(exc.__context__, ssl.SSLCertVerificationError)):
            return KeyMismatch(translate("AgentClient", "{url}: the key of whoever answers there is not the "
                                         "key pinned when this node was paired; nothing was sent to it "
                                         "(another device may be posing as the node)").format(url=self.base_url))
        return AgentError(translate("AgentClient", "cannot reach agent at {url}: {why} ({kind})")
                          .format(url=self.base_url, why=exc, kind=type(exc).__name__))

    async def _call(self, method: str, path: str, *, json=None, params=None, auth=False,
                    timeout: float | None = None) -> dict:
        self._check_paired(auth)
        try:
            resp = await self._http.request(method, path, json=json, params=params,
                                            timeout=timeout if timeout is not None else httpx.USE_CLIENT_DEFAULT)
        except httpx.HTTPError as exc:
            raise self._network_error(exc) from exc
        return self._reply(resp, path)

    def _reply(self, resp: httpx.Response, path: str) -> dict:
        """The JSON object of a 200 answer; AgentError for anything else."""
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
        path = resp.request.url.path
        if code == 401:
            msg = translate("AgentClient", "{url}: not paired (the node does not know this master's key; "
                                           "pair again)").format(url=self.base_url)
        elif path == P.PATH_PAIR_START and code == 403:
            msg = translate("AgentClient", "{url}: no pairing PIN is shown on the node now; run herd-agent "
                                           "pin there and enter the PIN within 5 minutes").format(url=self.base_url)
        elif path == P.PATH_PAIR_FINISH and code == 403:
            # Said here rather than relayed: the agent's own words are English, and the user who
            # typed the PIN reads the app's language.
            # No address or status code: the person typed a PIN and needs only to know it was
            # wrong and where to read the right one.
            msg = translate("AgentClient", "wrong PIN; enter the PIN the node shows now (herd-agent pin "
                                           "on that computer), a new one after each pairing")
        elif path == P.PATH_PAIR_START and code == 429:
            msg = translate("AgentClient", "{url}: too many failed pairing attempts from this computer "
                                           "(HTTP 429); try again in {seconds} s").format(
                url=self.base_url, seconds=resp.headers.get("Retry-After", "?"))
        else:
            msg = f"{self.base_url}{path}: HTTP {code}"
            if detail:
                msg += f": {detail}"
        err = AgentError(msg, status=code)
        if code == 429:
            try:
                err.retry_after = float(resp.headers.get("Retry-After", ""))
            except ValueError:
                pass
        return err


class _EchoProtocol(asyncio.DatagramProtocol):
    def __init__(self) -> None:
        self.waiters: dict[bytes, asyncio.Future] = {}

    def datagram_received(self, data: bytes, addr) -> None:
        if not data.startswith(P.ECHO_REPLY):
            return  # only the agent's replies count (a request here is never answered)
        fut = self.waiters.get(P.ECHO_REQUEST + data[len(P.ECHO_REPLY):])
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
            payload = P.ECHO_REQUEST + nonce + struct.pack("<I", seq)
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


# --- using a node's RPC worker --------------------------------------------------------------


class WorkerUnavailable(AgentError):
    """A node's RPC worker cannot be used now.

    Attributes:
        code: ``worker-busy`` (another llama-server holds it), ``worker-crashed`` (it could not
            start) or ``worker-timeout`` (not ready in time).
        agent_status: the agent's last :class:`~agent.protocol.AgentStatus`.
    """

    def __init__(self, message: str, code: str, agent_status: P.AgentStatus) -> None:
        super().__init__(message)
        self.code = code
        self.agent_status = agent_status


class ReadyWorker:
    """A node's RPC worker, ready for a llama-server: the one way herd starts a worker and
    waits for it (launches and measurements alike).

    ``await start()`` starts the worker if it is not running — or runs with other devices than
    ``devices`` (a plan numbers a node's devices by their place in its ``-d`` list; ``devices``
    may also be a function of the agent's status that returns them, or None for the worker's
    default) — waits until it is ready (a worker ready for another master is restarted by its
    agent, so that this master gets its own weight cache), and raises :class:`WorkerUnavailable` if it is busy, crashed or not ready
    within ``timeout``. With ``fresh`` a worker that is already running is started again, a new
    process (one that served another llama-server before may not survive the next; see
    :class:`gui.cluster.launching.launcher.ClusterLauncher`). ``await stop()`` stops it again if,
    and only if, this started it. As an async context manager it does both::

        async with ReadyWorker(client, threads=2) as worker:
            ...  # worker.status.rpc.state is READY

    Attributes:
        client: the paired :class:`AgentClient`.
        started: whether this started the worker (and so stops it).
        status: the agent's :class:`~agent.protocol.AgentStatus` once the worker was ready.
    """

    def __init__(self, client: "AgentClient", *, threads: int | None = None,
                 devices=None, timeout: float = 30.0, poll_interval: float = 0.2, fresh: bool = False) -> None:
        self.client = client
        self.threads = threads
        self.devices = devices
        self.fresh = fresh
        self.timeout = timeout
        self.poll_interval = poll_interval
        self.started = False
        self.status: P.AgentStatus | None = None

    async def start(self) -> P.AgentStatus:
        """Have the worker ready (see the class docstring); returns the agent's status then."""
        status = await self.client.status()
        rpc = status.rpc
        if rpc.state == P.WorkerState.BUSY:
            raise WorkerUnavailable(translate("AgentClient", "its RPC worker is in use by another llama-server "
                                              "({client})").format(client=rpc.client or "?"), "worker-busy", status)
        devices = self.devices(status) if callable(self.devices) else self.devices
        devices = list(devices) if devices is not None else None
        other_devices = devices is not None and list(rpc.requested_devices) != devices
        if rpc.state != P.WorkerState.READY or other_devices:
            await self.client.rpc_start(threads=self.threads, devices=devices)
            self.started = True
        elif self.fresh:
            # a new process in place of the running one, which stays someone else's to stop
            await self.client.rpc_stop()
            await self.client.rpc_start(threads=rpc.threads, devices=list(rpc.requested_devices))
        else:
            # Ready as asked; the agent still restarts it if it was started for another master
            # (each master's weight cache is its own folder), and only then is it ours to stop.
            cache = (status.get("rpc") or {}).get("cache")
            again = await self.client.rpc_start(threads=rpc.threads, devices=list(rpc.requested_devices),
                                                cache=cache is not False)
            self.started = again.get("pid") != rpc.pid
        deadline = time.monotonic() + self.timeout
        while True:
            status = await self.client.status()
            state = status.rpc.state
            if state == P.WorkerState.READY:
                self.status = status
                return status
            if state == P.WorkerState.CRASHED:
                raise WorkerUnavailable(translate("AgentClient", "the RPC worker could not start: {why}").format(
                    why=status.rpc.error or translate("AgentClient", "no reason given")), "worker-crashed", status)
            if time.monotonic() > deadline:
                raise WorkerUnavailable(translate("AgentClient", "the RPC worker was not ready after {seconds} s "
                                                  "(state {state})").format(seconds=f"{self.timeout:.0f}", state=state),
                                        "worker-timeout", status)
            await asyncio.sleep(self.poll_interval)

    async def stop(self) -> None:
        """Stop the worker if this started it (once)."""
        if self.started:
            self.started = False
            await self.client.rpc_stop()

    async def __aenter__(self) -> "ReadyWorker":
        try:
            await self.start()
        except BaseException:
            with contextlib.suppress(Exception):  # a half-started worker is not left behind
                await self.stop()
            raise
        return self

    async def __aexit__(self, *exc) -> None:
        try:
            await self.stop()
        except AgentError as e:  # the node may be gone; what the block raised matters more
            log.warning("could not stop the RPC worker: %s", e)
