"""What a launch is: a :class:`LaunchRequest`, the nodes it uses, and its :func:`preflight`.

``herd up``, the app's Start and the failover relaunch all go through here::

    request = LaunchRequest(plan, model_info, ServerOptions(ctx=8192), threads=None)
    findings = await preflight(request, nodes, client_for, engine, host_free_bytes=free)
    if not has_errors(findings):
        supervisor = supervise(request, nodes, client_for, engine.llama_server)
        await supervisor.start()   # gui.cluster.failover.supervisor
        supervisor.check           # llama-server's placement, compared with the plan

The request is made once, when the user asks to start; everything after reads that same
request, so an edit made while the doctor runs cannot make the plan and the options disagree.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from agent.i18n import translate
from gui.cluster.launching import doctor as doc
from gui.cluster.llama.model import ModelError
from gui.cluster.llama.server_command import ServerOptions, ServerSpec
from gui.cluster.llama.server_process import LaunchError
from gui.cluster.planning.speculation import Speculation, speculation_problem

if TYPE_CHECKING:
    from gui.cluster.llama.model import ModelInfo
    from gui.cluster.planning.plan import Plan


@dataclass(frozen=True)
class LaunchRequest:
    """Everything a launch needs to know, fixed when the user asks to start.

    Attributes:
        plan: the :class:`~gui.cluster.planning.plan.Plan` (its RPC devices carry the nodes' endpoints).
        model: the model's :class:`~gui.cluster.llama.model.ModelInfo` (its path is what llama-server
            loads; its per-slot bytes are what the placement check compares with).
        options: llama-server's :class:`~gui.cluster.llama.server_command.ServerOptions`.
        threads: RPC worker threads (None: each agent's own setting).
        verify_layers: run llama-server at ``-lv 5`` and check every layer's device from its own
            lines (slower decoding; for debugging).
        speculation: the plan's :class:`~gui.cluster.planning.speculation.Speculation` (#35); a
            relaunch on the survivors keeps it (:meth:`with_plan`), and the draft's memory with it.
    """

    plan: "Plan"
    model: "ModelInfo"
    options: ServerOptions = ServerOptions()
    threads: int | None = None
    verify_layers: bool = False
    speculation: Speculation = Speculation()

    def spec(self) -> ServerSpec:
        """The llama-server command line of this request."""
        return ServerSpec.for_plan(self.plan, self.model.path, self.options, verify_layers=self.verify_layers,
                                   speculation=self.speculation)

    def draft_model(self) -> "ModelInfo | None":
        """The draft model's facts, for the memory fit (None without a draft model); a
        :class:`~gui.cluster.llama.model.ModelError` in words when its file cannot be read."""
        return self.speculation.draft_model()

    def argv(self, llama_server) -> list[str]:
        """The whole llama-server command line (program first)."""
        return self.spec().argv(llama_server)

    def with_plan(self, plan: "Plan") -> "LaunchRequest":
        """The same request for another plan (a relaunch on the survivors)."""
        return replace(self, plan=plan)

    def with_options(self, options: ServerOptions) -> "LaunchRequest":
        """The same request with other server options."""
        return replace(self, options=options)


def nodes_for_plan(plan: "Plan", nodes: Iterable, *, strict: bool = True) -> list:
    """The nodes whose workers ``plan`` uses, in ``--rpc`` order.

    ``nodes`` are :class:`~gui.cluster.nodes.records.Node` records (any order, more than the plan needs
    is fine). An endpoint that no node serves raises :class:`LaunchError` (code
    ``unknown-endpoint``) naming it, or with ``strict`` false is left out. This is the one place
    that answers "which nodes does this plan use".
    """
    by_endpoint = {}
    for n in nodes:
        # a paired, reachable record wins over a stale one at the same endpoint
        old = by_endpoint.get(n.rpc_endpoint)
        if old is None or (n.paired and n.reachable and not (old.paired and old.reachable)):
            by_endpoint[n.rpc_endpoint] = n
    out = []
    for ep in plan.rpc_endpoints():
        if ep not in by_endpoint and not strict:
            continue
        if ep not in by_endpoint:
            raise LaunchError(translate("Launcher", "the plan uses {endpoint}, which is not a known node's RPC "
                                        "endpoint").format(endpoint=ep), code="unknown-endpoint")
        out.append(by_endpoint[ep])
    return out


def _error(subject: str, message: str, code: str) -> doc.Finding:
    return doc.Finding(doc.ERROR, subject, message, code)


def check_request(request: LaunchRequest, nodes: Iterable, engine, *,
                  host_free_bytes: int | None = None) -> list[doc.Finding]:
    """The checks of :func:`preflight` that need no network, at once: the master's engine, the
    memory fit (:func:`gui.cluster.planning.plan.estimate`), and every endpoint of the plan served by a
    known node that is reachable and paired. Errors only (an empty list: go on)."""
    from gui.cluster.planning import plan as P
    findings: list[doc.Finding] = []
    if not getattr(engine, "complete", True):
        findings.append(_error("master", translate("Launcher", "the llama.cpp engine is missing; run herd engine "
                                                               "install"), "engine-missing"))
    try:
        shape = request.options.cache_shape()  # -np, -ub, --swa-full… change what llama-server allocates
    except ValueError as exc:
        findings.append(_error("server", str(exc), "bad-server-args"))
        shape = request.options.ctx
    # a profile's draft is data: gone, damaged or of another vocabulary, it is refused in words (#35)
    problem = speculation_problem(request.speculation, request.model.path)
    draft = None
    if problem:
        findings.append(_error("speculation", problem, "bad-speculation"))
    else:
        with contextlib.suppress(ModelError):  # (just read; said above if it could not be)
            draft = request.draft_model()
    for fit in P.estimate(request.plan, request.model, shape, host_free_bytes=host_free_bytes, draft=draft):
        if not fit.fits:
            findings.append(_error(fit.label, fit.describe(), "does-not-fit"))
    nodes = list(nodes)
    try:
        used = nodes_for_plan(request.plan, nodes)
    except LaunchError as exc:
        findings.append(_error("plan", str(exc), exc.code or "unknown-endpoint"))
        used = nodes_for_plan(request.plan, nodes, strict=False)
    for n in used:
        if not n.reachable:
            findings.append(_error(n.name, translate("Launcher", "not reachable"), "unreachable"))
        elif not n.paired:
            findings.append(_error(n.name, translate("Launcher", "not paired (pair it with the PIN its agent "
                                                                 "shows)"), "not-paired"))
    return findings


async def preflight(request: LaunchRequest, nodes: Iterable, client_for: Callable, engine, *,
                    host_free_bytes: int | None = None, doctor: bool = True) -> list[doc.Finding]:
    """What stands in the way of ``request``, as doctor :class:`~gui.cluster.launching.doctor.Finding` objects:
    :func:`check_request`, then (``doctor``) the doctor's checks of the plan's nodes that answer.
    The launch may go ahead when no finding is an error (:func:`gui.cluster.launching.doctor.has_errors`).
    """
    nodes = list(nodes)
    findings = check_request(request, nodes, engine, host_free_bytes=host_free_bytes)
    if doctor:
        ready = [n for n in nodes_for_plan(request.plan, nodes, strict=False) if n.usable]
        findings += await doc.check_cluster(ready, client_for, engine)
    return findings
