"""Measurements the fastest split is planned from: how fast each device computes a layer of
*this* model, how far and how wide each link is, and how much memory each device has free.

Methods (issue #7), chosen to be honest rather than clever:

* **Compute** — a short real decode through llama-server with *every* layer slot on the one
  device being measured (``--rpc ENDPOINT --fit off -ngl n_layer+1``), timed by llama-server's
  own ``timings.predicted_ms`` over ``predicted_n - 1`` steps (the first token comes with the
  prompt); the best of a
  few runs counts, since other programs on the machine only ever add time. One decode step
  is then the device's compute for all slots, plus the link's per-token cost (one round trip:
  the GET_TENSOR that hands the activation back — see ``llama-cpp.md``, "Per-token traffic" —
  and the hidden state in and the logits out over the link's throughput), plus the host's fixed
  work (embedding lookup, sampling). The link cost is subtracted (:func:`link_cost_s`) and the
  rest is spread over the slots in proportion to their bytes: a CPU decode
  step is a chain of matrix-vector products, whose time follows the bytes of weights read. The
  host's fixed work stays in the per-device number (the cost model's calibration accounts for
  it; :func:`calibration_error` reports how well that works).
* **Links** — round trips timed with the worker's own RPC protocol on the very endpoint
  llama-server will use (so a relay or a slow hop in between is counted): one HELLO, then
  ``DEVICE_COUNT`` requests, each a full request/reply; median of several. The same connection
  asks ``GET_DEVICE_MEMORY`` for every device (free and total bytes). Throughput comes from the
  agent's bandwidth probe (``AgentClient.bandwidth``), median of several, when an agent is there.
* **Cache** — one JSON file per node and model under ``user_cache_dir("llama-herd")/measure``,
  written atomically; the model is identified by a cheap fingerprint (size, mtime, first and
  last MiB), so a changed file invalidates its entries and a second plan is instant.

Everything here is Qt-free; ``herd bench`` and the app's split editor both drive it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import socket
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import httpx

from agent import rpc_protocol
from agent.client import ReadyWorker, WorkerUnavailable
from agent.engine_lookup import Engine
from agent.i18n import translate
from agent.ports import free_port
from agent.protocol import WorkerState

log = logging.getLogger(__name__)

#: Bump when the meaning of a cached field changes; older files are then ignored.
#: 2: prompt speed measured too (#16).
CACHE_FORMAT = 2

_FINGERPRINT_SPAN = 1 << 20
#: Smallest share of a calibration step counted as compute (see :func:`measure_compute`).
MIN_COMPUTE_SHARE = 0.02


class MeasureError(RuntimeError):
    """A measurement could not be taken. The message says what and why."""


# --------------------------------------------------------------------------------------------
# results


@dataclass(frozen=True)
class LinkMeasurement:
    """The link from the master to one RPC worker.

    Attributes:
        endpoint: ``host:port`` that was probed (the one llama-server connects to).
        rtt_s: median request/reply round trip in seconds.
        rtt_samples: every round trip measured, in seconds.
        throughput_bps: median bytes per second from the agent's bandwidth probe, or None when
            it was not measured.
        throughput_samples: every throughput sample, bytes per second.
        devices: ``(free_bytes, total_bytes)`` of each of the worker's devices, by index.
    """

    endpoint: str
    rtt_s: float
    rtt_samples: tuple[float, ...]
    throughput_bps: float | None = None
    throughput_samples: tuple[float, ...] = ()
    devices: tuple[tuple[int, int], ...] = ()

    @property
    def rtt_min_s(self) -> float:
        """The fastest round trip: the link's own latency, without the load of the moment."""
        return min(self.rtt_samples) if self.rtt_samples else self.rtt_s

    def to_json(self) -> dict:
        d = asdict(self)
        d["rtt_samples"] = list(self.rtt_samples)
        d["throughput_samples"] = list(self.throughput_samples)
        d["devices"] = [list(x) for x in self.devices]
        return d

    @classmethod
    def from_json(cls, d: dict) -> LinkMeasurement:
        return cls(endpoint=str(d["endpoint"]), rtt_s=float(d["rtt_s"]),
                   rtt_samples=tuple(float(x) for x in d.get("rtt_samples", ())),
                   throughput_bps=None if d.get("throughput_bps") is None else float(d["throughput_bps"]),
                   throughput_samples=tuple(float(x) for x in d.get("throughput_samples", ())),
                   devices=tuple((int(a), int(b)) for a, b in d.get("devices", ())))


@dataclass(frozen=True)
class ComputeMeasurement:
    """How fast one device (or the host CPU) decodes this model.

    Attributes:
        endpoint: the RPC worker measured, or None for the master's own CPU.
        step_s: seconds of one decode step with every slot on the device, as llama-server timed
            it (includes the link's per-token cost and the host's fixed work): the best of the
            runs, because other programs on the machine only ever add time.
        step_samples: the per-run values ``step_s`` is the best of.
        link_s: the link cost subtracted from ``step_s`` (round trip plus the token's bytes over
            the link's throughput; 0 for the host).
        seconds_per_byte: compute time per byte of weights in a slot.
        slot_s: compute seconds of each slot ``0 … n_layer`` on this device.
        tokens: tokens decoded per run.
        threads: worker threads, if known (``ggml-rpc-server -t`` or llama-server ``-t``).
        bytes_per_param: average bytes of one weight of the model measured (0: not recorded), so
            a model of another quant type can be predicted per weight rather than per byte (#14).
        prompt_n: tokens of the prompt timed for the prompt speed (one micro-batch; 0: none).
        prompt_step_s: seconds llama-server took for that prompt (best run).
        prompt_link_s: the link's share subtracted from it (one round trip plus the
            micro-batch's hidden states both ways over the link's throughput).
        prompt_seconds_per_byte: prompt compute seconds per token per byte of weights.
        prompt_slot_s: prompt compute seconds per token of each slot.
    """

    endpoint: str | None
    step_s: float
    step_samples: tuple[float, ...]
    link_s: float
    seconds_per_byte: float
    slot_s: tuple[float, ...]
    tokens: int
    threads: int | None = None
    bytes_per_param: float = 0.0
    prompt_n: int = 0
    prompt_step_s: float = 0.0
    prompt_link_s: float = 0.0
    prompt_seconds_per_byte: float = 0.0
    prompt_slot_s: tuple[float, ...] = ()

    @property
    def seconds_per_layer(self) -> float:
        """Mean compute seconds of one block (the output slot left out)."""
        blocks = self.slot_s[:-1] or self.slot_s
        return sum(blocks) / len(blocks)

    @property
    def output_s(self) -> float:
        """Compute seconds of the output slot."""
        return self.slot_s[-1]

    def to_json(self) -> dict:
        d = asdict(self)
        d["step_samples"] = list(self.step_samples)
        d["slot_s"] = list(self.slot_s)
        d["prompt_slot_s"] = list(self.prompt_slot_s)
        d["seconds_per_layer"] = self.seconds_per_layer
        return d

    @classmethod
    def from_json(cls, d: dict) -> ComputeMeasurement:
        return cls(endpoint=d.get("endpoint"), step_s=float(d["step_s"]),
                   step_samples=tuple(float(x) for x in d.get("step_samples", ())),
                   link_s=float(d["link_s"]), seconds_per_byte=float(d["seconds_per_byte"]),
                   slot_s=tuple(float(x) for x in d["slot_s"]), tokens=int(d["tokens"]),
                   threads=None if d.get("threads") is None else int(d["threads"]),
                   bytes_per_param=float(d.get("bytes_per_param") or 0.0),
                   prompt_n=int(d.get("prompt_n") or 0), prompt_step_s=float(d.get("prompt_step_s") or 0.0),
                   prompt_link_s=float(d.get("prompt_link_s") or 0.0),
                   prompt_seconds_per_byte=float(d.get("prompt_seconds_per_byte") or 0.0),
                   prompt_slot_s=tuple(float(x) for x in d.get("prompt_slot_s") or ()))


@dataclass(frozen=True)
class NodeMeasurement:
    """Everything measured about one node for one model (what the cache holds).

    Attributes:
        node_id: the node's stable id (``"master"`` for the host CPU).
        model_fingerprint: :func:`model_fingerprint` of the model file.
        compute: its decode speed for the model.
        link: its link from the master (None for the host).
        measured_at: UNIX time of the measurement.
        settings: what the node ran with (threads …); a cached entry is used only when these match.
    """

    node_id: str
    model_fingerprint: str
    compute: ComputeMeasurement
    link: LinkMeasurement | None = None
    measured_at: float = 0.0
    settings: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"format": CACHE_FORMAT, "node_id": self.node_id,
                "model_fingerprint": self.model_fingerprint, "measured_at": self.measured_at,
                "settings": dict(self.settings), "compute": self.compute.to_json(),
                "link": None if self.link is None else self.link.to_json()}

    @classmethod
    def from_json(cls, d: dict) -> NodeMeasurement:
        if d.get("format") != CACHE_FORMAT:
            raise ValueError(f"cache format {d.get('format')!r}, expected {CACHE_FORMAT}")
        return cls(node_id=str(d["node_id"]), model_fingerprint=str(d["model_fingerprint"]),
                   compute=ComputeMeasurement.from_json(d["compute"]),
                   link=None if d.get("link") is None else LinkMeasurement.from_json(d["link"]),
                   measured_at=float(d.get("measured_at", 0.0)), settings=dict(d.get("settings") or {}))


# --------------------------------------------------------------------------------------------
# links: round trips and memory over the worker's own RPC protocol


def _split_endpoint(endpoint: str) -> tuple[str, int]:
    host, sep, port = endpoint.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise MeasureError(f"RPC endpoint must be 'host:port', got {endpoint!r}")
    return host, int(port)


def probe_rpc_link(endpoint: str, samples: int = 9, timeout: float = 5.0) -> LinkMeasurement:
    """Round trips and device memory of the RPC worker at ``endpoint``.

    Opens one connection, says HELLO, asks every device's free/total memory, then times
    ``samples`` ``DEVICE_COUNT`` request/reply pairs (the smallest command that gets an answer)
    with Nagle off, like llama.cpp's own client. Raises :class:`MeasureError` when the worker
    cannot be reached or is busy: it serves one client at a time, so probe before llama-server
    connects.
    """
    if samples < 1:
        raise MeasureError(f"samples must be at least 1, got {samples}")
    host, port = _split_endpoint(endpoint)
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            rpc_protocol.hello(sock)
            devices = rpc_protocol.device_memory(sock)
            rtts = []
            for _ in range(samples):
                t0 = time.perf_counter()
                rpc_protocol.request(sock, rpc_protocol.CMD_DEVICE_COUNT)
                rtts.append(time.perf_counter() - t0)
    except socket.timeout:
        raise MeasureError(f"{endpoint}: the RPC worker did not answer within {timeout:g} s "
                           "(busy with a llama-server? it serves one client at a time)") from None
    except (OSError, ConnectionError) as exc:
        raise MeasureError(f"{endpoint}: cannot probe the RPC worker ({exc})") from None
    except rpc_protocol.RpcProtocolError as exc:
        raise MeasureError(f"{endpoint}: unexpected reply from the RPC worker ({exc})") from None
    return LinkMeasurement(endpoint=endpoint, rtt_s=statistics.median(rtts), rtt_samples=tuple(rtts),
                           devices=tuple(devices))


async def measure_throughput(agent, samples: int = 3, nbytes: int = 4 << 20) -> list[float]:
    """Bytes per second from ``agent.bandwidth(nbytes)`` (an ``AgentClient``), ``samples`` times."""
    if samples < 1:
        raise MeasureError(f"samples must be at least 1, got {samples}")
    return [await agent.bandwidth(nbytes) for _ in range(samples)]


async def measure_link(endpoint: str, agent=None, rtt_samples: int = 9,
                       throughput_samples: int = 3, nbytes: int = 4 << 20) -> LinkMeasurement:
    """:func:`probe_rpc_link`, plus throughput from ``agent`` (an ``AgentClient``) when given."""
    link = await asyncio.to_thread(probe_rpc_link, endpoint, rtt_samples)
    if agent is None:
        return link
    tput = await measure_throughput(agent, throughput_samples, nbytes)
    return LinkMeasurement(endpoint=link.endpoint, rtt_s=link.rtt_s, rtt_samples=link.rtt_samples,
                           throughput_bps=statistics.median(tput), throughput_samples=tuple(tput),
                           devices=link.devices)


# --------------------------------------------------------------------------------------------
# compute: a short real decode with every slot on one device


@dataclass(frozen=True)
class DecodeTiming:
    """llama-server's timing of one completion."""

    predicted_n: int
    predicted_ms: float
    prompt_n: int
    prompt_ms: float

    @property
    def step_s(self) -> float:
        """Seconds per decode step. The first token comes from the prompt's last batch, so
        ``predicted_ms`` spans ``predicted_n - 1`` steps (llama-server's ``n_gen_steps``)."""
        return self.predicted_ms / 1000.0 / max(1, self.predicted_n - 1)

    @property
    def tokens_per_s(self) -> float:
        return 1.0 / self.step_s if self.step_s > 0 else 0.0


async def timed_completion(client: httpx.AsyncClient, base_url: str, tokens: int,
                           prompt: str = "measure the decode speed of this cluster",
                           timeout: float = 300.0, cache_prompt: bool = True) -> DecodeTiming:
    """Ask llama-server for ``tokens`` tokens and return its own timings of the request
    (``cache_prompt=False``: the whole prompt is processed again, none is reused)."""
    body = {"messages": [{"role": "user", "content": prompt}], "max_tokens": tokens,
            "temperature": 0.0, "stream": False, "cache_prompt": cache_prompt}
    try:
        r = await client.post(base_url + "/v1/chat/completions", json=body, timeout=timeout)
    except httpx.HTTPError as exc:
        raise MeasureError(f"{base_url}: completion request failed ({exc})") from None
    if r.status_code != 200:
        raise MeasureError(f"{base_url}: completion answered HTTP {r.status_code}: {r.text[:200]}")
    t = r.json().get("timings")
    if not isinstance(t, dict) or not t.get("predicted_n"):
        raise MeasureError(f"{base_url}: the completion reply carries no timings")
    return DecodeTiming(int(t["predicted_n"]), float(t["predicted_ms"]),
                        int(t.get("prompt_n", 0)), float(t.get("prompt_ms", 0.0)))


async def decode_step_times(server_url: str, runs: int, tokens: int, warmup: int = 1) -> list[float]:
    """Seconds per decode step of ``runs`` completions of ``tokens`` tokens (after ``warmup``)."""
    async with httpx.AsyncClient() as client:
        for _ in range(warmup):
            await timed_completion(client, server_url, min(tokens, 8))
        return [(await timed_completion(client, server_url, tokens)).step_s for _ in range(runs)]


#: Words of the prompt the prompt speed is timed with: with the chat template, a few hundred
#: tokens — one micro-batch (≤ 512), so what is timed is one pass of a micro-batch.
PROMPT_WORDS = 160


def measurement_prompt(words: int = PROMPT_WORDS) -> str:
    """A prompt of ``words`` plain words (no cache can reuse it across runs: the runs turn
    prompt caching off)."""
    base = ("the quick brown fox jumps over a lazy dog while seven wise owls count the stars "
            "above an old stone bridge near the quiet river").split()
    return " ".join(base[i % len(base)] for i in range(words))


async def prompt_times(server_url: str, runs: int, words: int = PROMPT_WORDS) -> list[DecodeTiming]:
    """``runs`` completions of one token after a prompt of ``words`` words, prompt caching off:
    llama-server's timing of each prompt."""
    async with httpx.AsyncClient() as client:
        return [await timed_completion(client, server_url, 1, prompt=measurement_prompt(words),
                                       cache_prompt=False) for _ in range(runs)]


def prompt_link_cost_s(link: LinkMeasurement | None, model, tokens: int) -> float:
    """The link's share of a calibration prompt of ``tokens`` (one micro-batch, every slot on
    the worker): one round trip, the hidden states in and the logits out."""
    from gui.cluster.planning.cost_model import prompt_hop_bytes

    if link is None:
        return 0.0
    xfer = prompt_hop_bytes(model, tokens, True) / link.throughput_bps if link.throughput_bps else 0.0
    return link.rtt_min_s + xfer


def slot_seconds(slot_bytes: Sequence[int], compute_s: float) -> tuple[float, ...]:
    """``compute_s`` spread over the slots in proportion to their bytes."""
    total = sum(slot_bytes)
    if total <= 0:
        raise MeasureError("the model's slots hold no bytes")
    return tuple(compute_s * b / total for b in slot_bytes)


async def measure_compute(engine: Engine, model_path: str | os.PathLike, endpoint: str | None, *,
                          link_s: float = 0.0, tokens: int = 24, runs: int = 3, ctx: int = 512,
                          host_threads: int | None = None, threads: int | None = None,
                          ready_timeout: float = 300.0, device: int = 0, n_devices: int = 1,
                          server_args: Sequence[str] = (), link: LinkMeasurement | None = None,
                          prompt_runs: int = 2, who: str | None = None) -> ComputeMeasurement:
    """Decode speed of the model with every slot on the worker at ``endpoint`` (None: on the
    master's own CPU), from ``runs`` real completions of ``tokens`` tokens.

    On a worker with ``n_devices`` devices (a GPU and its CPU) every slot goes to its device
    ``device`` (``-ts 0,9`` for the second of two), so each device is measured on its own.
    ``server_args`` are passed to llama-server as they are.

    ``link_s`` is the per-token link cost to subtract (:func:`link_cost_s`); the remainder of
    the best run's step (at least :data:`MIN_COMPUTE_SHARE` of it) is spread over the slots by
    their bytes.
    ``host_threads`` is llama-server's ``-t``; ``threads`` is only recorded. ``who`` names the
    node for a failure's words (default: the endpoint, or this PC).

    The prompt speed comes from ``prompt_runs`` prompts of one micro-batch each
    (:func:`prompt_times`, prompt caching off), best run, minus the link's share
    (:func:`prompt_link_cost_s` with ``link``), per token and spread over the slots by bytes.
    """
    from gui.cluster.llama.model import inspect_model
    from gui.cluster.llama.server_command import ServerOptions, ServerSpec
    from gui.cluster.llama.server_process import LaunchError
    from gui.cluster.llama.server_start import ServerStart

    if tokens < 2 or runs < 1:
        raise MeasureError(f"need at least 2 tokens and 1 run, got tokens={tokens}, runs={runs}")
    info = inspect_model(model_path)
    n_slots = info.n_layer + 1
    port = free_port()
    extra = (["-t", str(host_threads)] if host_threads else []) + list(server_args)
    split = [n_slots if k == device else 0 for k in range(n_devices)]
    spec = ServerSpec(model=Path(model_path), rpc=[endpoint] if endpoint else [], ngl=n_slots if endpoint else 0, tensor_split=split if endpoint else [], verbosity=3, options=ServerOptions(ctx=ctx, port=port, extra_args=extra))
    start = ServerStart(engine.require_llama_server(), spec)
    try:
        server = await start.run(ready_timeout)
        steps = await decode_step_times(server.url, runs, tokens)
        prompts = await prompt_times(server.url, prompt_runs) if prompt_runs > 0 else []
    except LaunchError as exc:
        raise MeasureError(calibration_failure(who or endpoint, start.server, exc)) from None
    finally:
        await start.stop()
    step = min(steps)
    # A small model behind a far link: its compute can be smaller than the link's jitter, and
    # the difference near zero or below. The device is then fast, not free: keep a floor.
    compute = max(step - link_s, MIN_COMPUTE_SHARE * step)
    # per byte a token reads: of a mixture-of-experts model, the routed share of its experts
    read = info.active_slot_bytes
    slots = slot_seconds(read, compute)
    prompt: dict = {}
    if prompts:
        best = min(prompts, key=lambda t: t.prompt_ms / max(1, t.prompt_n))
        p_step = best.prompt_ms / 1000.0
        p_link = prompt_link_cost_s(link, info, best.prompt_n)
        per_token = max(p_step - p_link, MIN_COMPUTE_SHARE * p_step) / max(1, best.prompt_n)
        prompt = {"prompt_n": best.prompt_n, "prompt_step_s": p_step, "prompt_link_s": p_link,
                  "prompt_seconds_per_byte": per_token / sum(read),
                  "prompt_slot_s": slot_seconds(read, per_token)}
    return ComputeMeasurement(endpoint=endpoint, step_s=step, step_samples=tuple(steps), link_s=link_s,
                              seconds_per_byte=compute / sum(read), slot_s=slots,
                              tokens=tokens, threads=threads if endpoint else host_threads,
                              bytes_per_param=info.bytes_per_param, **prompt)


def calibration_failure(who: str | None, server, error: Exception) -> str:
    """A failed calibration run in words (translated): which node, what llama-server did at
    which step, and what to do — never llama-server's raw log lines, which herd's log keeps."""
    who = who or translate("Measure", "this PC")
    if server is None or server.returncode is None:
        what = str(error)  # it did not come up in time: the start says so in words
    else:
        log.info("calibration run on %s failed; llama-server printed:\n%s", who, "\n".join(server.log))
        what = server.failure_words()
    return translate("Measure", "Measuring {who} on this model failed: {what}. Check the node with `herd doctor`; "
                                "`herd engine status` says what llama.cpp does on this CPU, and herd's log "
                                "holds llama-server's whole output.").format(who=who, what=what)


def link_cost_s(link: LinkMeasurement, model_path: str | os.PathLike) -> float:
    """Per-token link cost of a calibration run (every slot on the worker): one round trip plus
    the hidden state in and the logits out over the link's throughput (when measured).

    The *fastest* round trip is used: the calibration step is the best of its runs, so both
    are taken without the load of the moment, and what is left is the device's compute.
    """
    from gui.cluster.llama.model import inspect_model
    from gui.cluster.planning.cost_model import hop_bytes

    if not link.throughput_bps:
        return link.rtt_min_s
    return link.rtt_min_s + hop_bytes(inspect_model(model_path), True) / link.throughput_bps


# --------------------------------------------------------------------------------------------
# the cache


def model_fingerprint(path: str | os.PathLike) -> str:
    """A cheap identity of a model file: size, mtime and the first and last MiB, hashed.

    Hashing a whole model takes minutes for big files; a rewritten or replaced file changes at
    least its mtime, and a different model changes its header.
    """
    path = Path(path)
    try:
        st = path.stat()
        h = hashlib.sha256(f"{st.st_size}:{st.st_mtime_ns}:".encode())
        with open(path, "rb") as f:
            h.update(f.read(_FINGERPRINT_SPAN))
            if st.st_size > _FINGERPRINT_SPAN:
                f.seek(max(_FINGERPRINT_SPAN, st.st_size - _FINGERPRINT_SPAN))
                h.update(f.read(_FINGERPRINT_SPAN))
    except OSError as exc:
        raise MeasureError(f"{path}: cannot read the model file ({exc.strerror or exc})") from None
    return h.hexdigest()[:32]


def default_cache_dir() -> Path:
    """``user_cache_dir("llama-herd")/measure``."""
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("llama-herd")) / "measure"


class MeasurementCache:
    """Measurements on disk, one JSON file per node and model.

    ``get`` returns None when there is no entry, the entry is for another version of the model
    file, was taken with other node settings, or is unreadable (a broken file is a cache miss,
    never an error). ``put`` writes atomically (temp file, then ``os.replace``).
    """

    def __init__(self, directory: str | os.PathLike | None = None) -> None:
        self.directory = Path(directory) if directory is not None else default_cache_dir()

    def path_for(self, node_id: str, fingerprint: str) -> Path:
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in node_id)[:80] or "node"
        return self.directory / f"{safe}-{fingerprint}.json"

    def get(self, node_id: str, fingerprint: str, settings: dict | None = None) -> NodeMeasurement | None:
        path = self.path_for(node_id, fingerprint)
        try:
            m = NodeMeasurement.from_json(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if m.node_id != node_id or m.model_fingerprint != fingerprint:
            return None
        if settings is not None and m.settings != settings:
            return None
        return m

    def latest(self, node_id: str, bytes_per_param: float | None = None) -> NodeMeasurement | None:
        """The entry of ``node_id`` to predict another model from, or None when it has none.

        Used for a model that is not on this PC yet (a hub download, #14): its speed is scaled
        from this entry (:func:`cost_inputs` with ``model``). With ``bytes_per_param`` (that
        model's) the entry of the model closest in bytes per weight wins — the same quant type
        predicts per byte, which is closest to what it then does; otherwise the newest.
        """
        import math

        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in node_id)[:80] or "node"
        found: list[NodeMeasurement] = []
        for path in self.directory.glob(f"{safe}-*.json"):
            try:
                m = NodeMeasurement.from_json(json.loads(path.read_text(encoding="utf-8")))
            except (OSError, ValueError, KeyError, TypeError):
                continue
            if m.node_id == node_id:
                found.append(m)
        if not found:
            return None

        def distance(m: NodeMeasurement) -> float:
            b = m.compute.bytes_per_param
            if not bytes_per_param or not b:
                return math.inf if bytes_per_param else 0.0
            return abs(math.log(b / bytes_per_param))

        return min(found, key=lambda m: (round(distance(m), 2), -m.measured_at))

    def put(self, m: NodeMeasurement) -> Path:
        path = self.path_for(m.node_id, m.model_fingerprint)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(m.to_json(), f, indent=1)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return path


async def measure_node(engine: Engine, model_path: str | os.PathLike, node_id: str,
                       endpoint: str | None, *, cache: MeasurementCache | None = None,
                       settings: dict | None = None, agent=None, refresh: bool = False,
                       tokens: int = 24, runs: int = 3, host_threads: int | None = None,
                       threads: int | None = None, device: int = 0, n_devices: int = 1,
                       server_args: Sequence[str] = (), who: str | None = None) -> NodeMeasurement:
    """Link and compute of one node for one model, from ``cache`` when it has them.

    ``endpoint`` None measures the master's own CPU (no link). ``settings`` (e.g. the worker's
    thread count) are stored with the entry; a cached entry taken with other settings is
    measured again. ``refresh`` ignores the cache. On a worker with several devices, ``node_id``
    is the device's key (``node/1``) and ``device`` its number (:func:`measure_compute`).
    """
    fp = model_fingerprint(model_path)
    settings = dict(settings or {})
    if cache is not None and not refresh:
        hit = cache.get(node_id, fp, settings)
        if hit is not None:
            return hit
    from gui.cluster.nodes import tunnel
    async with tunnel.forwarded(endpoint, agent) as local:  # the RPC link goes over TLS (#13)
        link = await measure_link(local, agent) if local else None
        if link is not None:
            link = replace(link, endpoint=endpoint)
        link_s = link_cost_s(link, model_path) if link else 0.0
        compute = await measure_compute(engine, model_path, local, link_s=link_s,
                                        tokens=tokens, runs=runs, host_threads=host_threads,
                                        threads=threads, device=device, n_devices=n_devices,
                                        server_args=server_args, link=link, who=who)
    m = NodeMeasurement(node_id=node_id, model_fingerprint=fp, compute=compute, link=link,
                        measured_at=time.time(), settings=settings)
    if cache is not None:
        cache.put(m)
    return m


async def measure_nodes(engine: Engine, model_path: str | os.PathLike, nodes: Sequence, client_for, *,
                        cache: MeasurementCache | None = None, threads: int | None = None,
                        refresh: bool = False, tokens: int = 24, runs: int = 3,
                        worker_timeout: float = 30.0, server_args: Sequence[str] = ()) -> list[NodeMeasurement]:
    """:func:`measure_node` for each paired node, starting its RPC worker through its agent.

    ``nodes`` are ``gui.cluster.nodes.records.Node`` (``id``, ``name``, ``rpc_endpoint``);
    ``client_for(node)`` gives a paired ``AgentClient``. A node answered from ``cache`` is not
    touched. Otherwise its worker is started if it is not running (and stopped again after the
    measurement); a worker held by another master is an error, since it cannot be measured.
    A node whose engine offers a GPU runs its worker with every device it offers (``-d
    Vulkan0,CPU``, as a launch does) and each device is measured on its own, keyed ``node/k``.
    """
    fp = model_fingerprint(model_path)
    settings = {"threads": threads}
    out = []
    for node in nodes:
        hit = None if refresh or cache is None else cache.get(node.id, fp, settings)
        if hit is not None:
            out.append(hit)
            continue
        async with client_for(node) as client:
            status = await client.status()
            if status.rpc.state == WorkerState.BUSY:
                raise MeasureError(f"{node.name}: its RPC worker is in use by a llama-server; "
                                   "stop that cluster to measure the node")
            names = [d.name for d in status.engine_devices] if status.offers_gpu else []
            keys = [f"{node.id}/{k}" for k in range(len(names))]
            if keys and cache is not None and not refresh:
                hits = [cache.get(k, fp, settings) for k in keys]
                if all(hits):
                    out.extend(hits)
                    continue
            try:
                async with ReadyWorker(client, threads=threads, devices=names or None, timeout=worker_timeout):
                    for k, key in enumerate(keys or [node.id]):
                        out.append(await measure_node(engine, model_path, key, node.rpc_endpoint, cache=cache,
                                                      settings=settings, agent=client, refresh=True,
                                                      tokens=tokens, runs=runs, threads=threads, device=k,
                                                      n_devices=max(1, len(keys)), server_args=server_args,
                                                      who=f"{node.name} ({names[k]})" if names else node.name))
            except WorkerUnavailable as exc:
                raise MeasureError(f"{node.name}: the RPC worker did not start ({exc})") from None
    return out


async def measured_fastest(engine: Engine, model_path: str | os.PathLike, model, nodes: Sequence,
                           devices: Sequence, client_for, ctx: int, *, host_free_bytes: int | None,
                           cache: MeasurementCache | None = None, threads: int | None = None,
                           refresh: bool = False, server_args: Sequence[str] = (), tokens: int = 24,
                           runs: int = 3, objective: str = "chat"):
    """The Fastest plan for ``nodes``: measure them (and the master's CPU, which may keep
    layers), then search (:func:`gui.cluster.planning.optimize.fastest`, for ``objective`` ``"chat"`` or
    ``"documents"``). Returns its ``FastestResult``.

    Raises :class:`MeasureError` when a node cannot be measured, ``PlanError`` when no plan fits.
    """
    from gui.cluster.planning.optimize import fastest

    measured = await measure_nodes(engine, model_path, nodes, client_for, cache=cache,
                                   threads=threads, refresh=refresh, server_args=server_args,
                                   tokens=tokens, runs=runs)
    host = await measure_node(engine, model_path, "master", None, cache=cache, refresh=refresh,
                              server_args=server_args, tokens=tokens, runs=runs)
    return fastest(model, devices, cost_inputs(measured, host), ctx, host_free_bytes=host_free_bytes,
                   objective=objective)


def cost_inputs(nodes: Sequence[NodeMeasurement], host: NodeMeasurement | None = None,
                host_fixed_s: float = 0.0, model=None):
    """The cost model's :class:`~gui.cluster.planning.cost_model.Measurements` from node measurements.

    Compute and links are keyed by node id (and by endpoint, so plans built from either find
    them). Without ``host`` the master's CPU is taken as too slow to hold layers. With
    ``model`` (a :class:`~gui.cluster.llama.model.ModelInfo` other than the one measured) each
    device's slot times are its measured time per weight times that model's weights per slot:
    seconds per byte scaled by the two models' bytes per weight. Per byte alone was 2.0–2.4×
    too fast for Q4_K_M and Q8_0 from an F16 measurement on a CPU worker (bench/hub_speed.py):
    a quantised weight costs more work per byte. Per weight came within −42 % … +43 % over three
    runs on a busy 2-core machine, where the measured model itself was off by −11 % … +66 %.
    Without the measured model's bytes per weight (older cache entries) the time is per byte.
    """
    from gui.cluster.planning.cost_model import DeviceSpeed, LinkSpeed, Measurements

    def speed_of(m: NodeMeasurement) -> DeviceSpeed:
        if model is None:
            return DeviceSpeed(m.compute.slot_s, m.compute.prompt_slot_s)
        scale = 1.0
        if m.compute.bytes_per_param and model.bytes_per_param:
            scale = m.compute.bytes_per_param / model.bytes_per_param
        pspb = m.compute.prompt_seconds_per_byte * scale if m.compute.prompt_slot_s else None
        return DeviceSpeed.from_bytes(model, m.compute.seconds_per_byte * scale, pspb)

    compute: dict = {}
    links: dict = {}
    for m in nodes:
        speed = speed_of(m)
        compute[m.node_id] = speed
        if m.link is not None:
            link = LinkSpeed(m.link.rtt_s, m.link.throughput_bps)
            links[m.node_id] = link
            links[m.link.endpoint] = link
            compute[m.link.endpoint] = speed
    return Measurements(compute=compute, links=links,
                        host=None if host is None else speed_of(host),
                        host_fixed_s=host_fixed_s)


# --------------------------------------------------------------------------------------------
# how well predictions match


def calibration_error(pairs: Sequence[tuple[float, float]]) -> dict:
    """Error of predicted against measured tokens/s over ``(predicted, measured)`` pairs.

    Returns ``{"n", "mean_abs_pct", "max_abs_pct", "errors_pct"}`` where each error is
    ``(predicted - measured) / measured`` in percent.
    """
    errs = []
    for pred, meas in pairs:
        if meas <= 0:
            raise ValueError(f"measured tokens/s must be positive, got {meas}")
        errs.append(100.0 * (pred - meas) / meas)
    if not errs:
        return {"n": 0, "mean_abs_pct": None, "max_abs_pct": None, "errors_pct": []}
    return {"n": len(errs), "mean_abs_pct": sum(abs(e) for e in errs) / len(errs),
            "max_abs_pct": max(abs(e) for e in errs), "errors_pct": errs}
