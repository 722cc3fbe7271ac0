"""*Fastest*'s speculation trial on the planned cluster itself: ``herd plan|up --fastest --draft``
and the window's *Fastest* run this one function (#35).

:func:`~gui.cluster.planning.speculation_trial.measure_speculation` measures a speculation against
none through a ``serve(speculation)`` it is given; here that is the real cluster: the plan started
by a :class:`~gui.cluster.launching.launcher.ClusterLauncher` (the workers, then llama-server on a
free loopback port), once without and once with the speculation, and stopped after each side.
(The planning layer may not import the launcher, so the launch-backed half lives here.)
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from pathlib import Path

from agent.client import AgentError
from agent.i18n import translate
from agent.ports import free_port
from gui.cluster.launching.launcher import ClusterLauncher
from gui.cluster.launching.request import LaunchRequest, nodes_for_plan
from gui.cluster.llama.server_command import DEFAULT_CTX, ServerOptions
from gui.cluster.llama.server_process import LaunchError
from gui.cluster.planning.measure import MeasurementCache, model_fingerprint
from gui.cluster.planning.speculation import Speculation
from gui.cluster.planning.speculation_trial import TrialError, measure_speculation


def link_rtts_ms(plan, model_path: Path, cache: MeasurementCache | None = None) -> list[float]:
    """The round trip of each RPC device that holds layers, as *Fastest* just measured its link."""
    cache, fingerprint = cache or MeasurementCache(), model_fingerprint(model_path)
    out = []
    for device, count in plan.assignments:
        m = cache.get(device.node_id, fingerprint) if count and device.kind == "rpc" else None
        if m is not None and m.link is not None:
            out.append(m.link.rtt_min_s * 1000.0)
    return out


def trying_text(speculation: Speculation) -> str:
    """What is said while the trial runs (the CLI prints it, the window's status line shows it)."""
    return translate("Speculation", "Fastest: trying speculation by {kind} against none on the planned "
                                    "cluster…").format(kind=speculation.label())


def measuring_text(tried: Speculation) -> str:
    """What is said as one side of the trial starts: without speculation, or with it."""
    if not tried.active:
        return translate("Speculation", "Fastest: starting the cluster without speculation and measuring it…")
    return translate("Speculation", "Fastest: starting the cluster with speculation by {kind} and measuring "
                                    "it…").format(kind=tried.label())


def step_text(tried: Speculation, done: int, total: int) -> str:
    """What is said after each of the trial's timed requests: the side, and how far it is."""
    kind = translate("Speculation", "without speculation") if not tried.active else tried.label()
    return translate("Speculation", "Fastest: measuring {kind}: {done} of {total} measurements done…").format(
        kind=kind, done=done, total=total)


async def measure_on_cluster(llama_server: str | Path, plan, model, nodes: Iterable, client_for: Callable,
                             speculation: Speculation, *, ctx: int | None = None, threads: int | None = None,
                             load_timeout: float = 600.0, cache: MeasurementCache | None = None,
                             progress: Callable[[str], None] | None = None) -> Speculation:
    """Start ``plan`` of ``model`` on ``nodes`` (``client_for(node)``: the agent client, as the
    launcher takes it) without ``speculation`` and with it, measure both, and return what herd
    plans: the speculation with its measured gain and reason when it is faster, else none with
    the reason in words. A trial that cannot run (a worker refuses, llama-server fails to start,
    a request fails) keeps none, the reason said. Nothing is left running. ``progress(words)``,
    when given, is told each side as it starts and how far the measurements are (on the calling
    loop's thread)."""
    if not speculation.active:
        return speculation
    used = {n.id: n for n in nodes_for_plan(plan, list(nodes))}
    side = [Speculation()]  # the side being measured (what serve() started last)

    @contextlib.asynccontextmanager
    async def serve(tried: Speculation):
        # one slot: the trial's requests run one at a time, and a single slot needs the least memory
        options = ServerOptions(ctx=ctx or DEFAULT_CTX, port=free_port(), extra_args=("-np", "1"))
        request = LaunchRequest(plan, model, options, threads=threads, speculation=tried)
        launcher = ClusterLauncher(llama_server, request, used, client_for)
        side[0] = tried
        if progress is not None:
            progress(measuring_text(tried))
        try:
            await launcher.start(load_timeout)
            yield launcher.spec.url
        finally:
            await launcher.stop()

    draft = Path(speculation.draft_path) if speculation.draft_path else None
    try:
        share = draft.stat().st_size / max(1, model.file_bytes) if draft else 0.0
        slots = model.active_slot_bytes
        trial = await measure_speculation(serve, speculation, rtts_ms=link_rtts_ms(plan, Path(model.path), cache),
                                          draft_share=share, output_share=slots[-1] / max(1, sum(slots)),
                                          on_step=progress and (lambda done, total: progress(
                                              step_text(side[0], done, total))))
    except (TrialError, LaunchError, AgentError, OSError) as exc:
        return Speculation(reason=translate("Speculation", "the trial of speculation by {kind} failed: {why}")
                           .format(kind=speculation.label(), why=exc))
    return trial.decision()
