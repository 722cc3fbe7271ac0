"""The agent itself: one object that owns the API server, the echo, the RPC worker and its relay,
and the mDNS advertisement, and shuts them all down in order.

:func:`run_agent` is the foreground program (``herd-agent run``): it starts an :class:`Agent`,
prints ``herd-agent ready api=http://IP:PORT …`` once everything listens and the node is
advertised, and stops on SIGTERM/SIGINT — or when :meth:`Agent.request_stop` is called from
another thread (a Windows service's stop handler).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
import time
from pathlib import Path

from aiohttp import web

from agent import __version__
from agent import protocol as P
from agent.api import build_app
from agent.api_guard import KEEPALIVE_TIMEOUT, ConnectionGuard, GuardedSite, PeerErrorLog, raise_fd_limit
from agent.echo import EchoServer
from agent.engine_lookup import choose_engine
from agent.hardware import LoadMeter, hardware_summary, nics, wake_on_lan_address
from agent.identity import Identity, load_or_create, peer_fingerprint, server_context, trust
from agent.keep_awake import KeepAwake
from agent.lease import Leases
from agent.pairing import AgentPairing, PinFile
from agent.ports import free_port
from agent.process_memory import release_free_heap
from agent.ratelog import RateLimitedLog
from agent.relay import RpcRelay
from agent.rpc_server import RpcOptions, RpcSupervisor
from agent.settings import AgentState, Settings, default_state_dir
from agent.weight_cache import WeightCache
from agent.weight_cache import default_root as default_cache_root

log = logging.getLogger("herd.agent")

#: Seconds of calm after start-up or a worker state change before freed memory goes back to the OS.
HEAP_RELEASE_DELAY = 1.0


class StartRefused(RuntimeError):
    """The RPC worker can't be started as asked; the message says why (API answers 409)."""


class PortConflict(StartRefused):
    """A port the agent must listen on is taken; the message names it."""


#: RPC connections the relay keeps open at once, all from the lease's holder: its llama-server's
#: one, and one more for the moment it reconnects (llama.cpp opens the next connection as it
#: closes the last). The worker serves one connection at a time; more would only queue there.
RPC_CONNECTIONS = 2


class Agent:
    """A running herd-agent.

    Attributes:
        settings: effective settings (file + flags).
        state: identity, PIN and pairings (saved on change).
        engine: the llama.cpp programs this node runs; engine_identity: what they are (backend,
            GPUs, RPC), read from the engine itself; backend_note: a sentence when the engine is
            not what the settings asked for.
        supervisor: the RPC worker's supervisor.
        relay: the RPC relay while the worker runs in ``relay`` exposure.
        api_port, echo_port, rpc_port: the ports actually bound/advertised.
    """

    Refused = StartRefused

    def __init__(self, settings: Settings, state: AgentState, *, env: dict | None = None) -> None:
        self.settings = settings
        self.state = state
        self._choose_engine()
        folder = state.folder or default_state_dir()
        self.identity: Identity = load_or_create(folder, "agent", f"herd-agent {state.node_id}")
        self.pins = PinFile(folder)
        self.pairing = AgentPairing(self.pins, self.identity.cert_der)
        self.pending_names: dict[str, str] = {}  # pairing session -> the master's name
        self._ratelog = RateLimitedLog(log)
        # TLS for the API and the RPC relay: every paired master's certificate is a trust anchor
        # (see agent.identity); the relay refuses a client without one in the handshake.
        self.api_tls = server_context(self.identity, [m.cert_pem for m in state.masters])
        self.rpc_tls = server_context(self.identity, [m.cert_pem for m in state.masters], require=True)
        # one master at a time holds the worker (agent.lease); in use while an RPC client is on
        self.leases = Leases(in_use=lambda: self.relay is not None and self.relay.client is not None,
                             idle=settings.lease_idle_s)
        # the PC stays awake while a master holds a running worker (#36)
        self.keep_awake = KeepAwake(settings.keep_awake, lambda: self._running_request is not None
                                    and self.leases.current() is not None)
        self.api_guard = ConnectionGuard(is_trusted=lambda ssl_object: self.state.master_for_fingerprint(
            peer_fingerprint(ssl_object)) is not None)
        self.load = LoadMeter()
        # the worker's -c cache: a folder per master that outlives restarts and upgrades, capped
        self.weight_cache = WeightCache(default_cache_root(settings.cache_dir, env),
                                        settings.cache_max_gib * (1 << 30))
        self._worker_env = env
        self.supervisor = RpcSupervisor(self._rpc_program, log_lines=settings.log_lines,
                                        on_change=self._changed, env=self.weight_cache.env(env),
                                        port_for_restart=self._restart_port)
        self.relay: RpcRelay | None = None
        self.echo = EchoServer(settings.bind, settings.echo_port)
        self.advertiser = None
        self.api_port = settings.api_port
        self.echo_port = settings.echo_port
        self.rpc_port = settings.rpc_port
        self._runner: web.AppRunner | None = None
        self._running_request: tuple | None = None
        self._started = time.monotonic()
        self._stop = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._heap_release: asyncio.TimerHandle | None = None
        self._hardware = hardware_summary()

    # --- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Listen (API, echo), then advertise. :class:`PortConflict` if a port is taken."""
        self._loop = asyncio.get_running_loop()
        bind = self.settings.bind
        try:
            await self.echo.start()
        except OSError as exc:
            raise PortConflict(f"echo port {bind}:{self.settings.echo_port}/udp is not available: "
                               f"{exc.strerror or exc}") from exc
        self.echo_port = self.echo.port
        raise_fd_limit()  # the connection caps, not the OS's 1024 files, decide who is refused
        # logger: what a peer breaks (a reset mid-body, a malformed request) is one rate-limited
        # line, not aiohttp's traceback (#25)
        self._runner = web.AppRunner(build_app(self), access_log=None, shutdown_timeout=0.5,
                                     keepalive_timeout=KEEPALIVE_TIMEOUT, logger=PeerErrorLog())
        await self._runner.setup()
        site = GuardedSite(self._runner, bind, self.settings.api_port, guard=self.api_guard,
                           ssl_context=self.api_tls)
        try:
            await site.start()
        except OSError as exc:
            await self.close()
            raise PortConflict(f"API port {bind}:{self.settings.api_port} is not available: "
                               f"{exc.strerror or exc}") from exc
        self.api_port = self._runner.addresses[0][1]
        if self.settings.mdns:
            from agent.advertise import Advertiser  # noqa: PLC0415 - zeroconf only when used
            interfaces = self.settings.mdns_interfaces or ([bind] if bind != "0.0.0.0" else [])
            self.advertiser = Advertiser(self.settings.name, self.api_port, self.txt(), interfaces)
            try:
                await self.advertiser.start()
            except Exception as exc:  # no multicast here, name clash, …: serve without mDNS
                log.error("mDNS advertisement failed (%s); masters can still add this node by "
                          "address", exc)
                advertiser, self.advertiser = self.advertiser, None
                await advertiser.close()
        self._release_heap_soon()

    async def close(self) -> None:
        """Stop the worker, say goodbye on mDNS, stop listening. Safe to call twice."""
        if self._heap_release is not None:
            self._heap_release.cancel()
        steps = [self.stop_rpc()]
        if self.advertiser is not None:
            steps.append(self.advertiser.close())
        await asyncio.gather(*steps, return_exceptions=True)
        await self.keep_awake.close()
        self.advertiser = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        self.echo.close()

    def request_stop(self) -> None:
        """Ask :meth:`serve` to return; callable from any thread (service stop handlers)."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)

    async def serve(self) -> None:
        """Run until :meth:`request_stop`."""
        await self._stop.wait()

    @property
    def api_url(self) -> str:
        """``https://IP:PORT`` of the API, as the ready line prints it."""
        return f"{P.API_SCHEME}://{self.display_address()}:{self.api_port}"

    def display_address(self) -> str:
        """An address a master could use for the API (for the ready line and the log)."""
        if self.settings.bind != "0.0.0.0":
            return self.settings.bind
        if self.settings.mdns_interfaces:
            return self.settings.mdns_interfaces[0]
        for nic in nics():
            if not nic["loopback"]:
                for ip in nic["addresses"]:
                    if "." in ip:
                        return ip
        return "127.0.0.1"

    # --- RPC worker ---------------------------------------------------------------------------

    def _rpc_program(self) -> Path:
        return self.engine.require_rpc_server()

    def _restart_port(self, opts: RpcOptions) -> int:
        # Behind the relay the worker's port is private: a fresh one per restart avoids
        # racing the dead worker's socket.
        return free_port() if self.settings.exposure == "relay" else opts.port

    def _worker_target(self) -> tuple[str, int] | None:
        sup = self.supervisor
        if sup.state in (P.STATE_READY, P.STATE_BUSY) and sup.options is not None:
            return sup.options.host, sup.options.port
        return None

    def _is_paired_key(self, ip: str, fingerprint: str | None) -> bool:
        """The relay's admission rule: a paired master's key, from whatever address, and only
        the one that holds the worker's lease (or takes it now)."""
        self.state.refresh()
        master = self.state.master_for_fingerprint(fingerprint)
        if master is None:
            return False
        serving = self._worker_master()
        if serving is not None and serving != master.fingerprint:
            # The worker process is another master's: its memory (and its cache, if on) holds
            # that master's tensors. herd's masters call rpc/start first, which restarts it.
            self.log_limited("lease", logging.WARNING, "RPC relay: refused master %r: the worker was "
                             "started for another master (call rpc/start first)", master.name)
            return False
        other = self.leases.take(master.fingerprint, master.name)
        if other is not None:
            self.log_limited("lease", logging.WARNING, "RPC relay: refused master %r: the worker is "
                             "leased to %r", master.name, other.name)
        return other is None

    async def start_rpc(self, *, port: int | None = None, threads: int | None = None,
                        devices: list[str] | None = None, cache: bool | None = None,
                        master: str | None = None) -> None:
        """(Re)start the worker for ``master`` (its key fingerprint: the worker's weight cache
        is that master's folder); :class:`PortConflict` when the RPC port is taken,
        :class:`StartRefused` when there is no worker program."""
        s = self.settings
        if self.engine.rpc_server is None:
            # installed since the agent started? look again before refusing
            await asyncio.to_thread(self._choose_engine)
            if self.engine.rpc_server is None:
                raise StartRefused("no ggml-rpc-server on this node: run `herd engine install` here, "
                                   "or set engine_dir in the agent's config")
        rpc_port = port or s.rpc_port
        opts = RpcOptions(threads=threads if threads is not None else s.threads,
                          devices=list(devices) if devices is not None else list(s.devices),
                          cache=s.cache if cache is None else cache)
        cache_master = master if opts.cache else None
        # The master is part of the request whatever the cache setting: a worker process that ran
        # for one master is never handed to another, whose fresh buffers could hold the first
        # one's freed weights and activations (#25).
        wanted = (rpc_port, opts.threads, opts.devices, opts.cache, master)
        if self._running_request == wanted and self.supervisor.state in (
                P.STATE_STARTING, P.STATE_READY, P.STATE_BUSY):
            self.keep_awake.check()  # the lease may have been taken again
            return  # already running as asked: a restart would cut off a connected master
        await self.stop_rpc()
        if s.exposure == "relay":
            relay = RpcRelay(s.bind, rpc_port, is_allowed=self._is_paired_key,
                             target=self._worker_target, on_client=self._rpc_client,
                             ssl=self.rpc_tls, max_clients=RPC_CONNECTIONS)
            try:
                await relay.start()
            except OSError as exc:
                msg = f"port conflict: RPC port {s.bind}:{rpc_port} is already in use ({exc.strerror or exc})"
                self.supervisor.options = opts
                self.supervisor.fail(msg, conflict=True)
                raise PortConflict(msg) from exc
            self.relay = relay
            self.rpc_port = relay.port
            opts.host, opts.port = "127.0.0.1", free_port()
        else:
            opts.host, opts.port = s.bind, rpc_port
            self.rpc_port = rpc_port
        self.weight_cache.use_for(cache_master)
        self.supervisor.env = self.weight_cache.env(self._worker_env, cache_master)
        if opts.cache:
            await asyncio.to_thread(self.weight_cache.prune)  # room for what this load adds
        await self.supervisor.start(opts)
        self._running_request = wanted
        self._changed()

    def _worker_master(self) -> str | None:
        """The key fingerprint of the master the running worker was started for (its weight
        cache, if any, is that master's)."""
        return self._running_request[4] if self._running_request else None

    def _rpc_client(self, address: str | None) -> None:
        """The relay's client came or went; once a load is over, keep the cache within its cap."""
        self.supervisor.set_client(address)
        self.keep_awake.check()  # a connection renews the lease
        if address is None:
            self.weight_cache.changed()
        if address is None and self._loop is not None:
            self._loop.run_in_executor(None, self.weight_cache.prune)

    async def stop_rpc(self) -> None:
        """Stop the worker and close the relay."""
        self._running_request = None
        await self.supervisor.stop()
        self.weight_cache.changed()
        if self.relay is not None:
            await self.relay.close()
            self.relay = None
        self.supervisor.set_client(None)

    # --- pairing ------------------------------------------------------------------------------

    def show_pin(self) -> str:
        """Show (or renew) the pairing PIN, as ``herd-agent pin`` does; returns it."""
        return self.pins.show()

    def paired_master(self, name: str, cert_pem: str, fingerprint: str, address: str) -> None:
        """A PAKE exchange succeeded: pin the master's certificate (API and relay admit it)."""
        self.state.add_master(name, cert_pem, fingerprint)
        trust(self.api_tls, cert_pem)
        trust(self.rpc_tls, cert_pem)
        log.info("paired with master %r (key %s) at %s", name, fingerprint[:16], address)

    def unpair(self, fingerprint: str) -> None:
        """Forget the master with this certificate fingerprint."""
        for m in self.state.remove_masters(fingerprint):
            log.info("unpaired master %r (key %s)", m.name, m.fingerprint[:16])
            if self._worker_master() != m.fingerprint:  # (a running worker keeps its files open)
                self.weight_cache.forget(m.fingerprint)

    def log_limited(self, key: str, level: int, msg: str, *args) -> None:
        """Log a message a remote peer can trigger, at most a few per minute per ``key``."""
        self._ratelog.log(key, level, msg, *args)

    # --- reports ------------------------------------------------------------------------------

    def txt(self) -> dict[str, str]:
        """The TXT properties to advertise now: where to find this node and what it runs, not
        what it is doing (no worker state: whether it is busy is for its masters, #25)."""
        return P.build_txt(node_id=self.state.node_id, version=__version__, api_port=self.api_port,
                           rpc_port=self.rpc_port, echo_port=self.echo_port,
                           proto=self.supervisor.proto or self.engine.rpc_proto or "",
                           engine=str(self.engine.build or ""), fingerprint=self.identity.fingerprint[:16])

    def _changed(self) -> None:
        if self.advertiser is not None:
            self.advertiser.update(self.txt())
        if self._loop is not None:
            self.keep_awake.check()
        self._release_heap_soon()

    def _release_heap_soon(self) -> None:
        """Hand the memory a burst of work (start-up, a worker start or stop) freed back to the
        OS once the burst has settled, so the idle agent stays small."""
        if self._loop is None:
            return
        if self._heap_release is not None:
            self._heap_release.cancel()
        self._heap_release = self._loop.call_later(HEAP_RELEASE_DELAY, release_free_heap)

    def rpc_status(self) -> dict:
        """The RPC worker's part of ``/status``."""
        snap = self.supervisor.snapshot()
        opts = self.supervisor.options
        snap.update({
            "port": self.rpc_port,
            "exposure": self.settings.exposure,
            "worker_port": opts.port if opts and self.supervisor.state != P.STATE_STOPPED else None,
            "refused": self.relay.refused if self.relay else 0,
            # start-up progress by the byte (#16): what the relay saw of the current load
            "transfer": self.relay.load.snapshot() if self.relay else None,
            # the -c cache's folder, size and cap (#16)
            "weight_cache": self.weight_cache.status(),
        })
        return snap

    def _choose_engine(self) -> None:
        """Find the engine to run and ask it what it is (its backend and the GPUs it finds are
        the engine's own, not the settings': a GPU build given as engine_dir offers its GPUs)."""
        s = self.settings
        self.engine, self.engine_identity, self.backend_note = choose_engine(s.engine_dir or None, s.backend)
        for note in self.engine_identity.notes:
            log.warning("%s", note)

    @property
    def backend(self) -> str:
        """What this node's engine computes on (``cpu``, ``vulkan``, ``cuda`` …)."""
        return self.engine_identity.backend

    @property
    def engine_gpus(self) -> list:
        """The GPUs this node's engine can use (none for a CPU build), listed when it was found."""
        return self.engine_identity.gpus

    def engine_devices(self, ram_free: int) -> list[dict]:
        """Every device the RPC worker can expose here, in ``-d`` names: the engine's GPUs, then
        the CPU (with the RAM free now) — what a master plans with before the worker runs."""
        out = [{"name": d.name, "kind": "gpu", "description": d.description, "total_bytes": d.total_bytes,
                "free_bytes": d.free_bytes} for d in self.engine_gpus]
        out.append({"name": "CPU", "kind": "cpu", "description": self._hardware.get("cpu_model", ""),
                    "total_bytes": int(self._hardware.get("ram_total_bytes") or 0), "free_bytes": ram_free})
        return out

    def info(self) -> dict:
        """``/info``: what a stranger needs to list this node and pair with it — its id, name,
        versions and ports — and no more (#25): no hardware or OS, no pairings, no worker state,
        no key fingerprint. A paired master reads everything else from ``/status``."""
        return {
            "id": self.state.node_id,
            "name": self.settings.name,
            "version": __version__,
            "engine": {"build": self.engine.build, "proto": self.supervisor.proto or self.engine.rpc_proto,
                       "rpc_server": self.engine.rpc_server is not None, "backend": self.backend},
            "ports": {"api": self.api_port, "rpc": self.rpc_port, "echo": self.echo_port},
        }

    async def status(self, local_address: str | None = None) -> dict:
        """``/status``: everything (see ``/openapi.json``); ``local_address`` is this side's
        address of the caller's connection, whose interface's MAC it reports for Wake-on-LAN."""
        await self.supervisor.refresh_devices()
        load = self.load.sample()
        hardware = dict(self._hardware)
        hardware["ram_free_bytes"] = load["ram_free_bytes"]
        hardware["nics"] = nics()
        hardware["devices"] = self.rpc_status()["devices"]
        return {
            "id": self.state.node_id,
            "name": self.settings.name,
            "version": __version__,
            "uptime_s": round(time.monotonic() - self._started, 3),
            "ports": {"api": self.api_port, "rpc": self.rpc_port, "echo": self.echo_port},
            "engine": {"build": self.engine.build, "proto": self.supervisor.proto or self.engine.rpc_proto,
                       "rpc_server": str(self.engine.rpc_server) if self.engine.rpc_server else None,
                       "backend": self.backend, "note": self.backend_note,
                       "folder": str(self.engine.folder) if self.engine.folder else None,
                       "identity": self.engine_identity.to_json(),
                       "devices": self.engine_devices(load["ram_free_bytes"])},
            "hardware": hardware,
            "load": load,
            "rpc": self.rpc_status(),
            "masters": [{"name": m.name, "fingerprint": m.fingerprint, "paired_at": m.paired_at}
                        for m in self.state.masters],
            "keep_awake": self.keep_awake.status(),
            "wake": wake_on_lan_address(local_address) if local_address else None,
        }


async def run_agent(settings: Settings, state: AgentState) -> int:
    """Run an agent in the foreground until SIGTERM/SIGINT; returns the exit code."""
    agent = Agent(settings, state)
    try:
        await agent.start()
    except PortConflict as exc:
        log.error("%s", exc)
        return 1
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, agent.request_stop)
        except (NotImplementedError, RuntimeError):  # Windows: no add_signal_handler
            signal.signal(sig, lambda *_: agent.request_stop())
    if state.dropped_legacy:
        log.warning("%d master(s) paired with an older llama-herd (bearer tokens) were dropped: pair "
                    "them again (`herd-agent pin` here, then Pair in the app or `herd pair`)",
                    state.dropped_legacy)
    # The PIN itself is never logged: whoever reads the log could pair.
    if state.paired:
        log.info("paired with %d master(s); `herd-agent pin` shows a PIN to pair another", len(state.masters))
    else:
        log.info("not paired yet: run `herd-agent pin` on this computer to show a pairing PIN "
                 "(accepted for 5 minutes)")
    log.info("this node's key fingerprint: %s", agent.identity.fingerprint)
    if settings.exposure == "open":
        log.warning("exposure 'open': the RPC worker will listen on %s:%d itself, with no "
                    "authentication and no encryption: anyone on this network can use it and read the "
                    "model's weights. Use it only for a cluster started by hand on a network you trust; "
                    "the default, 'relay', admits only paired masters' keys over TLS", settings.bind,
                    settings.rpc_port)
    if agent.backend_note:
        log.warning("%s", agent.backend_note)
    ident = agent.engine_identity
    log.info("llama.cpp engine: %s build %s (%s%s: %s); GPUs: %s", agent.backend, ident.build or "of unknown number",
             agent.engine.folder or "not found", ", set up by hand" if ident.by_hand else "", ident.backend_from,
             ", ".join(f"{d.name} ({d.description})" for d in ident.gpus) or "none")
    if agent.engine.rpc_server is None:
        log.warning("no ggml-rpc-server found; the master can't start a worker here until one is installed")
    print(f"herd-agent ready api={agent.api_url} rpc={agent.rpc_port} "
          f"echo={agent.echo_port} id={state.node_id} name={settings.name}", flush=True)
    try:
        await agent.serve()
    finally:
        log.info("stopping")
        await agent.close()
    log.info("stopped")
    return 0


def configure_logging(verbose: bool = False) -> None:
    """Readable timestamped logs on stderr."""
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s", datefmt="%H:%M:%S")
    if not verbose:
        logging.getLogger("aiohttp").setLevel(logging.WARNING)
        logging.getLogger("zeroconf").setLevel(logging.WARNING)

