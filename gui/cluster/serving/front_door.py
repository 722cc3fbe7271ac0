"""herd's front door: the household's endpoint, in front of llama-server (#34).

llama-server has no lock of its own that herd can change while it runs, and it answers
``/slots``, ``/props`` and ``/metrics`` to anyone who reaches it. So when the cluster is shared
on the LAN, llama-server listens on loopback at a port herd picks, and :class:`FrontDoor` — an
aiohttp server — listens on the endpoint's address and port and passes requests on:

* **Routes.** Other hosts reach only the OpenAI-compatible routes (:data:`PUBLIC_PATHS`); every
  other path (``/slots…``, ``/props``, ``/metrics``, ``/lora-adapters``, unknown ones) answers
  403 to them. Callers on this computer (loopback: the app's dashboard, local scripts) reach
  every route.
* **Keys.** From another host every request but ``/health`` needs ``Authorization: Bearer KEY``
  with a key of :class:`~gui.cluster.serving.api_keys.ApiKeyStore`; on loopback none is needed
  unless :attr:`DoorSettings.require_key_on_loopback`. Keys are looked up per request, so an
  added or revoked key counts at once.
* **Streams.** Replies are passed on chunk by chunk as llama-server writes them (SSE token by
  token), never gathered first. A client that goes away cancels the request: the handler is
  cancelled (``handler_cancellation``) and the upstream connection closed, which makes
  llama-server stop generating.
* **Relaunches.** The front door keeps its port while llama-server is restarted (failover, a new
  model). A request then waits up to :attr:`DoorSettings.upstream_wait` seconds for llama-server
  to answer, then gets 503 with ``Retry-After`` — never "connection refused".
* **People at once.** llama-server answers :attr:`FrontDoor.people` requests at once (its
  ``-np`` slots); more would wait inside it with no say. So the front door lets that many
  generating requests through at a time and queues the others in order (counted as *waiting*),
  up to :attr:`DoorSettings.queue_limit`; past that a request gets 503 with ``Retry-After`` and
  words that say why. The app's own chat, which talks to llama-server on loopback, waits in the
  same queue (:meth:`FrontDoor.app_reply`).
* **Who uses it.** :attr:`FrontDoor.usage` (:class:`~gui.cluster.serving.usage.UsageTable`) counts
  per key name requests, tokens, tokens/s, in flight and waiting; each request from another host
  is logged as one line — key name, tokens in and out, time — never its text.
* **Cut replies.** A streamed chat reply that llama-server cuts (a lost worker) pauses and goes
  on once llama-server is back (:mod:`gui.cluster.serving.resume`), for up to
  :attr:`DoorSettings.resume_wait` seconds; otherwise, and for other routes, the stream ends
  with an SSE error event that says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import logging
import ssl
import time
from collections.abc import Sequence
from dataclasses import dataclass

import aiohttp
from aiohttp import web
from yarl import URL

from agent.i18n import translate
from gui.cluster.chat.client import ChatDone
from gui.cluster.llama.model import DEFAULT_SEQUENCES
from gui.cluster.serving.api_keys import ApiKeyError, ApiKeyStore
from gui.cluster.serving.resume import ReplySoFar, SseEvents, resume_stream
from gui.cluster.serving.usage import THIS_PC, UsageTable, reply_usage, usage_of

log = logging.getLogger(__name__)

#: The routes other hosts may use: the OpenAI-compatible API and the health check.
PUBLIC_PATHS = frozenset({"/v1/models", "/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/health"})
#: Routes that need no key from anyone (a phone app's "is the server there?").
OPEN_PATHS = frozenset({"/health"})
#: Routes that take one of llama-server's slots: they wait in the front door's queue (#34).
SLOT_PATHS = frozenset({"/v1/chat/completions", "/v1/completions", "/v1/embeddings"})
#: Headers that belong to one connection, never passed on (RFC 9110 §7.6.1), and ours to set.
_NOT_PASSED = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te",
                         "trailer", "transfer-encoding", "upgrade", "host", "content-length", "authorization"})
MiB = 1 << 20
#: How much of a reply's end is kept to read what it cost (:func:`~gui.cluster.serving.usage.reply_usage`).
_TAIL = 4096


class FrontDoorError(RuntimeError):
    """The front door cannot start (its address or port cannot be taken); the message says why."""


class _QueueFull(Exception):
    """More requests wait for a free place than :attr:`DoorSettings.queue_limit`."""


@dataclass(frozen=True)
class DoorSettings:
    """How the front door behaves.

    Attributes:
        require_key_on_loopback: ask callers on this computer for a key too (default: local
            scripts and the app's dashboard need none).
        upstream_wait: seconds a request waits for llama-server while it is (re)starting, before
            it gets 503.
        retry_after: the ``Retry-After`` seconds sent with that 503.
        max_body: the largest request body accepted, in bytes (long documents to embed fit).
        resume_wait: seconds a cut streamed chat reply waits for llama-server to come back and
            continue it before the stream ends with an error event. 60 s covers the failover's
            detection (a few seconds of missed polls) and relaunching a model that was already
            loaded once (its files are in the page cache), and is well inside the read
            timeouts of OpenAI clients (the openai SDK waits 600 s). (#34)
        queue_limit: requests that may wait for a free place (beyond :attr:`FrontDoor.people`)
            before the next one gets 503 with ``Retry-After``: a bounded queue, so a flood of
            requests cannot pile up without end (#34).
    """

    require_key_on_loopback: bool = False
    upstream_wait: float = 20.0
    retry_after: int = 5
    max_body: int = 64 * MiB
    resume_wait: float = 60.0
    queue_limit: int = 64


def is_loopback(remote: str | None) -> bool:
    """Whether a peer address (aiohttp's ``request.remote``) is this computer's loopback."""
    if not remote:
        return False
    try:
        ip = ipaddress.ip_address(remote.split("%", 1)[0])
    except ValueError:
        return False
    if ip.version == 6 and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def _error(status: int, message: str, kind: str, headers: dict | None = None) -> web.Response:
    """An error in the shape OpenAI clients read (``{"error": {"message", "type", "code"}}``)."""
    return web.json_response({"error": {"message": message, "type": kind, "code": status}}, status=status,
                             headers=headers)


def _sse_error(message: str) -> bytes:
    """An SSE event that OpenAI clients raise as an error (a stream cut by llama-server)."""
    event = {"error": {"message": message, "type": "server_error", "code": 503}}
    return b"data: " + json.dumps(event).encode("utf-8") + b"\n\n"


class FrontDoor:
    """The endpoint other apps use, passing requests on to llama-server (module docstring).

    Args:
        upstream: llama-server's base URL on loopback, e.g. ``http://127.0.0.1:41234``; may be
            changed later (:attr:`upstream`) when a relaunch moves it.
        keys: the keys that open it.
        hosts: addresses to listen on (``0.0.0.0`` for every IPv4 address of this computer).
        port: the endpoint's port.
        settings: :class:`DoorSettings`.
        people: how many requests llama-server answers at once (its ``-np`` slots).
        ssl_context: serve HTTPS with it (herd's own certificate,
            :mod:`gui.cluster.serving.door_certificate`), or None for plain HTTP.

    Attributes:
        upstream: where requests go now.
        usage: the :class:`~gui.cluster.serving.usage.UsageTable`: who uses the cluster.
        waiting: requests waiting now for llama-server to come (back).
        queued: requests waiting now for a free place among :attr:`people`.
    """

    def __init__(self, upstream: str, keys: ApiKeyStore, *, hosts: Sequence[str] = ("127.0.0.1",),
                 port: int = 8080, settings: DoorSettings = DoorSettings(), people: int = DEFAULT_SEQUENCES,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self.upstream = upstream.rstrip("/")
        self.keys = keys
        self.hosts = tuple(hosts)
        self.port = int(port)
        self.settings = settings
        self.usage = UsageTable()
        self.ssl_context = ssl_context
        self.waiting = 0
        self.queued = 0
        self.people = people
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    @property
    def people(self) -> int:
        """How many generating requests go to llama-server at once; the rest wait in order."""
        return self._people

    @people.setter
    def people(self, count: int) -> None:
        # A new gate for what comes next; requests let through by the old one release the old one.
        self._people = max(1, int(count))
        self._gate = asyncio.Semaphore(self._people)

    @property
    def served(self) -> dict[str, int]:
        """Requests answered so far, by key name ("" for callers on loopback without key)."""
        return self.usage.requests()

    @property
    def scheme(self) -> str:
        """``https`` when it serves TLS, else ``http``."""
        return "https" if self.ssl_context is not None else "http"

    @property
    def urls(self) -> list[str]:
        """The base URLs it listens on (as given: ``0.0.0.0`` means every address)."""
        return [f"{self.scheme}://{f'[{h}]' if ':' in h else h}:{self.port}" for h in self.hosts]

    async def start(self) -> None:
        """Take the address(es) and port and start serving; :class:`FrontDoorError` when one
        cannot be taken (the port in use, an address this computer does not have)."""
        app = web.Application(client_max_size=self.settings.max_body)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        # A client that goes away cancels its handler, which closes the upstream request.
        self._runner = web.AppRunner(app, handler_cancellation=True, access_log=None)
        await self._runner.setup()
        self._session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=2.0, sock_read=None),
            connector=aiohttp.TCPConnector(limit=256), auto_decompress=False,
            skip_auto_headers=("Accept-Encoding", "User-Agent"))
        try:
            for host in self.hosts:
                await web.TCPSite(self._runner, host, self.port, ssl_context=self.ssl_context).start()
        except OSError as exc:
            await self.stop()
            raise FrontDoorError(translate(
                "FrontDoor", "cannot listen on {host}:{port} ({why}); another program may use the port: "
                             "choose another one with --port").format(
                host=host, port=self.port, why=exc.strerror or exc)) from None

    async def stop(self) -> None:
        """Stop listening and close the connections to llama-server."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._session is not None:
            await self._session.close()
            self._session = None

    # --- one request --------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        started = time.monotonic()
        local = is_loopback(request.remote)
        if not local and request.path not in PUBLIC_PATHS:
            return _error(403, translate("FrontDoor", "{path} is not served to other computers; the endpoint "
                                                      "serves the OpenAI API under /v1").format(path=request.path),
                          "forbidden")
        who = THIS_PC
        if (request.path not in OPEN_PATHS and request.method != "OPTIONS"  # a browser's CORS preflight
                and (not local or self.settings.require_key_on_loopback)):
            who = self._key_name(request)
            if isinstance(who, web.Response):
                return who
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return _error(413, translate("FrontDoor", "the request is larger than {mib} MiB").format(
                mib=self.settings.max_body // MiB), "invalid_request_error")
        cost: dict = {}  # what the reply says it cost (for the table and the log line)
        try:
            async with self._place(who) if request.path in SLOT_PATHS else contextlib.nullcontext():
                response = await self._forward(request, body, cost)
        except _QueueFull:
            response = _error(503, translate("FrontDoor", "the cluster answers {people} requests at once and "
                                                          "{waiting} more are waiting; try again in a few seconds").format(
                people=self.people, waiting=self.queued), "server_error",
                {"Retry-After": str(self.settings.retry_after)})
        reply = cost.get("reply")
        self.usage.answered(who, reply)
        if not local:  # who used the cluster from the LAN, never what they asked (#34)
            tokens = f", {reply.prompt_tokens} tokens in, {reply.generated_tokens} out" if reply else ""
            log.info("%s: %s %s → %s%s, %.2f s", who, request.method, request.path, response.status,
                     tokens, time.monotonic() - started)
        return response

    async def app_reply(self, events):
        """Pass the app's own chat stream (:func:`gui.cluster.chat.client.stream_chat` events)
        through, in the same queue as everyone's: the app is one of the people at once, counted
        as :data:`~gui.cluster.serving.usage.THIS_PC` (#34). Its request is sent once it has a place."""
        async with self._place(THIS_PC, bounded=False):  # the owner's own chat is never turned away
            async for ev in events:
                if isinstance(ev, ChatDone):
                    self.usage.answered(THIS_PC, usage_of({**ev.usage, **ev.timings}))
                yield ev

    @contextlib.asynccontextmanager
    async def _place(self, who: str, bounded: bool = True):
        """Wait in order for one of the :attr:`people` places (counted as waiting for ``who``),
        hold it while the body runs; :class:`_QueueFull` when the queue is full (``bounded``)."""
        gate = self._gate
        if bounded and gate.locked() and self.queued >= self.settings.queue_limit:
            raise _QueueFull
        self.queued += 1
        self.usage.waiting(who, 1)
        try:
            await gate.acquire()
        finally:
            self.queued -= 1
            self.usage.waiting(who, -1)
        self.usage.in_flight(who, 1)
        try:
            yield
        finally:
            self.usage.in_flight(who, -1)
            gate.release()

    def _key_name(self, request: web.Request) -> str | web.Response:
        """The name of the key the request carries, or the 401/500 answer."""
        scheme, _, key = request.headers.get("Authorization", "").partition(" ")
        key = key.strip()
        if scheme.lower() != "bearer" or not key:
            return _error(401, translate("FrontDoor", "this endpoint needs a key: make one on the cluster's "
                                                      "computer with `herd keys add NAME` and give it to the app "
                                                      "as its API key"), "invalid_api_key",
                          {"WWW-Authenticate": "Bearer"})
        try:
            name = self.keys.match(key)
        except ApiKeyError as exc:  # fail closed: an unreadable key file opens nothing
            log.error("%s", exc)
            return _error(500, str(exc), "server_error")
        if name is None:
            return _error(401, translate("FrontDoor", "this key is not known here (it may have been revoked); "
                                                      "`herd keys list` on the cluster's computer shows the "
                                                      "keys"), "invalid_api_key", {"WWW-Authenticate": "Bearer"})
        return name

    async def _forward(self, request: web.Request, body: bytes, cost: dict) -> web.StreamResponse:
        """Send the request on to llama-server (waiting for it while it restarts) and relay the
        answer; ``cost["reply"]`` is set to what the reply says it cost (a ``ReplyUsage``)."""
        assert self._session is not None, "start() first"
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _NOT_PASSED}
        # The path as checked (decoded, dot segments resolved), encoded again: llama-server sees
        # exactly the route the checks saw, whatever spelling the client used.
        target = URL(self.upstream).with_path(request.path).with_query(request.query)
        # Only the model's routes wait: /health and the dashboard's reads say at once how it is.
        waits = request.path in PUBLIC_PATHS and request.path not in OPEN_PATHS
        deadline = time.monotonic() + (self.settings.upstream_wait if waits else 0.0)
        counted = False
        tries = 0
        try:
            while True:
                upstream = None
                tries += 1
                try:
                    upstream = await self._session.request(request.method, target, headers=headers, data=body)
                except (aiohttp.ClientConnectionError, asyncio.TimeoutError):
                    # Not listening (yet): llama-server is being (re)started. Or a kept-alive
                    # connection that llama-server closed while idle: the second try opens a new one.
                    if tries == 1:
                        continue
                # 503 is llama-server's "Loading model": nothing was done, so it may go again.
                if upstream is not None and (upstream.status != 503 or not waits):
                    if counted:
                        self.waiting -= 1
                        counted = False
                    return await self._relay(request, upstream, cost, (target, headers, body))
                if upstream is not None:
                    upstream.release()
                left = deadline - time.monotonic()
                if left <= 0:
                    return _error(503, translate("FrontDoor", "the model is not being served at the moment (it "
                                                              "is starting or being relaunched); try again in a "
                                                              "few seconds"), "server_error",
                                  {"Retry-After": str(self.settings.retry_after)})
                if not counted:
                    self.waiting += 1
                    counted = True
                await asyncio.sleep(min(0.25, left))  # poll the upstream's port until the deadline
        finally:
            if counted:
                self.waiting -= 1

    async def _relay(self, request: web.Request, upstream: aiohttp.ClientResponse,
                     cost: dict, sent: tuple) -> web.StreamResponse:
        """Pass ``upstream``'s answer on as it arrives (chunked; never gathered first). ``sent``
        is what was sent (target, headers, body): a cut chat stream is continued with it."""
        done = False
        try:
            response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
            for k, v in upstream.headers.items():
                if k.lower() not in _NOT_PASSED:
                    response.headers.add(k, v)
            await response.prepare(request)
            streamed = upstream.content_type == "text/event-stream"
            # A stream is passed on in whole events, so a cut never leaves half an event (#34).
            events, reply = SseEvents(), ReplySoFar()
            chunks = upstream.content.iter_any()
            tail = b""  # the reply's last bytes, where it says what it cost
            while True:
                try:
                    chunk = await chunks.__anext__()
                except StopAsyncIteration:
                    if streamed and not reply.finished:  # closed before its end: a cut too
                        await self._after_cut(request, response, reply, sent)
                    break
                except (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError):
                    # llama-server went away mid-reply (a lost worker, a relaunch).
                    if not streamed:
                        if request.transport is not None:
                            request.transport.close()  # a cut JSON body must not look complete
                        return response
                    await self._after_cut(request, response, reply, sent)
                    break
                tail = (tail + chunk)[-_TAIL:]
                try:
                    for piece in (events.feed(chunk) if streamed else [chunk]):
                        if streamed:
                            reply.observe(piece)
                        await response.write(piece)
                except ConnectionResetError:
                    return response  # the client went away: the finally below closes the upstream
            await response.write_eof()
            cost["reply"] = reply_usage(tail)
            done = True
            return response
        finally:
            # A finished reply gives the connection back for the next request; anything else (the
            # client went away: this task is cancelled) closes it, so llama-server stops generating.
            if done:
                upstream.release()
            else:
                upstream.close()

    async def _after_cut(self, request: web.Request, response: web.StreamResponse, reply: ReplySoFar,
                         sent: tuple) -> None:
        """A stream was cut: continue a chat reply once llama-server is back (#34), else say so."""
        target, headers, body = sent
        try:
            if request.path == "/v1/chat/completions" and self._session is not None:
                log.info("a streamed reply was cut; waiting up to %.0f s to continue it", self.settings.resume_wait)
                if await resume_stream(self._session, target, headers, body, reply, response.write,
                                       self.settings.resume_wait):
                    return
            await response.write(_sse_error(translate(
                "FrontDoor", "the reply was cut: the cluster lost a computer and is relaunching; "
                             "send the request again in a few seconds")))
        except ConnectionResetError:
            pass  # the client went away while it waited: nothing more to say to it
