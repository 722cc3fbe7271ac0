"""The relaunch policy of :class:`~gui.cluster.failover.supervisor.ClusterSupervisor` (#33): how it
watches and recovers (:class:`FailoverPolicy`, the app's settings), what it relaunches with after
a loss or a return (:func:`replan`), and when it stops relaunching a server that keeps dying
(:class:`QuickFailures`). The supervisor's states and their moves are in the supervisor.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from gui.cluster.launching.request import LaunchRequest, nodes_for_plan
from gui.cluster.llama.model import ModelError
from gui.cluster.planning.devices import node_devices
from gui.cluster.planning.plan.assignment import Plan
from gui.cluster.planning.plan.by_memory import plan_by_memory
from gui.cluster.planning.plan.fit import DeviceFit, estimate, misfits

#: llama-server stopping this soon after a relaunch, with no node to blame, counts as a quick
#: failure; after this many in a row the supervisor stops relaunching and waits for the user.
QUICK_FAILURE_S = 30.0
MAX_QUICK_FAILURES = 3


@dataclass
class FailoverPolicy:
    """How the supervisor watches and recovers (the app shows these as settings).

    Attributes:
        auto_recover: relaunch on the survivors by itself (after ``countdown``); otherwise wait
            for :meth:`ClusterSupervisor.recover_now`.
        countdown: seconds announced before an automatic relaunch (0: at once).
        rejoin: ``"ask"`` — announce a returning node and offer to re-plan with it; ``"auto"`` —
            re-plan with it at once.
        poll_interval, poll_timeout, misses: a node is lost after ``misses`` status polls in a
            row failed; the defaults notice a silent node within about 3 s.
        server_grace: seconds llama-server gets to exit before it is killed (a server stuck on
            a dead link does not exit by itself).
        load_timeout: seconds a relaunched server may take to load.
        busy_wait: seconds to wait for a surviving worker to let go of the old server.
    """

    auto_recover: bool = True
    countdown: float = 5.0
    rejoin: str = "ask"
    poll_interval: float = 1.0
    poll_timeout: float = 1.0
    misses: int = 2
    server_grace: float = 2.0
    load_timeout: float = 300.0
    busy_wait: float = 10.0


class QuickFailures:
    """Counts llama-server's failures soon after each (re)launch with no node to blame.

    A server that keeps dying so (a bad option, a broken build) would be relaunched forever:
    after :data:`MAX_QUICK_FAILURES` in a row the supervisor stops and asks.

    Attributes:
        count: quick failures in a row so far.
    """

    def __init__(self) -> None:
        self.count = 0

    def note(self, *, blamed: bool, serving_since: float | None) -> bool:
        """Count a loss (``blamed``: a node was lost with it); True when it is time to stop."""
        quick = not blamed and serving_since is not None and time.monotonic() - serving_since < QUICK_FAILURE_S
        self.count = self.count + 1 if quick else 0
        return self.count >= MAX_QUICK_FAILURES


@dataclass(frozen=True)
class Replan:
    """What to relaunch with: the ``plan``, the devices it does not fit (``misfits``; none: it
    fits) and the names of the nodes it uses (``used``)."""

    plan: Plan
    misfits: list[DeviceFit]
    used: tuple[str, ...]


def _draft_model(request: LaunchRequest):
    """The request's draft model for the fit; None without one, or when its file can no longer
    be read (the relaunch then says so in llama-server's words)."""
    try:
        return request.draft_model()
    except ModelError:
        return None


def replan(request: LaunchRequest, survivors: list[tuple], cache_shape,
           host_free_bytes: Callable[[], int | None]) -> Replan:
    """The plan to relaunch ``request`` with over ``survivors`` (``(node, status)`` of the nodes
    that answer, their workers settled): the user's own split when every node of it is among
    them, else the layers by free memory; checked against each device's memory."""
    alive = {n.id for n, _ in survivors}
    first_ids = {d.node_id for d, c in request.plan.assignments if c and d.kind == "rpc"}
    if first_ids <= alive:
        plan = request.plan  # everyone is back: the user's own split
    else:
        devices = []
        for node, status in survivors:
            devices.extend(node_devices(node, status))
        plan = plan_by_memory(request.model, devices, cache_shape, host_free_bytes=host_free_bytes())
    # the relaunch keeps the speculation, so the host must still hold the draft too (#35)
    bad = misfits(estimate(plan, request.model, cache_shape, host_free_bytes=host_free_bytes(),
                           draft=_draft_model(request)))
    used = tuple(n.name for n in nodes_for_plan(plan, [n for n, _ in survivors], strict=False))
    return Replan(plan, bad, used)
