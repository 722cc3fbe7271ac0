"""The app's state, Qt-free: what the window shows, held in one place the widgets render.

As napari's ``ViewerModel`` is for its layers and widgets, :class:`Workspace` is for herd's
window: it holds

* the nodes as discovery reports them, and each one's last agent status;
* the open model (:class:`~gui.cluster.llama.model.ModelInfo`) and llama-server's
  :class:`~gui.cluster.llama.server_command.ServerOptions` (the context size lives here, not in a
  spin box);
* the launch that is running (its :class:`~gui.cluster.launching.request.LaunchRequest`), so a question
  like "does the running model use this node?" is answered from what runs, not from the split
  being edited.

Widgets send intentions to the window, the window changes the workspace, and the workspace tells
every subscriber what changed (``subscribe(callback)``, ``callback(event)`` with one of the event
names below). The split being edited, with undo, lives in :class:`~gui.cluster.planning.split_model.SplitModel`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

from gui.cluster.launching.request import LaunchRequest, nodes_for_plan
from gui.cluster.llama.server_command import ServerOptions
from gui.cluster.nodes.records import usable_nodes
from gui.cluster.planning.devices import node_devices
from gui.cluster.planning.speculation import Speculation

log = logging.getLogger(__name__)

# Event names.
NODES = "nodes"          # a node appeared, changed or left
STATUS = "status"        # a node's agent status arrived
MODEL = "model"          # another model was opened
OPTIONS = "options"      # the server options changed
RUNNING = "running"      # a launch started serving, or stopped


class Workspace:
    """The state behind the window (see the module docstring).

    Attributes:
        nodes: {node id: :class:`~gui.cluster.nodes.records.Node`} as discovery reports them.
        statuses: {node id: the agent's last status}.
        model: the open :class:`~gui.cluster.llama.model.ModelInfo`, or None.
        options: llama-server's :class:`~gui.cluster.llama.server_command.ServerOptions`.
        running: the :class:`~gui.cluster.launching.request.LaunchRequest` of the launch that serves now
            (after a failover, the survivors' plan), or None.
        speculation: the :class:`~gui.cluster.planning.speculation.Speculation` the next launch
            uses (#35; none until chosen).
    """

    def __init__(self, options: ServerOptions = ServerOptions()) -> None:
        self.nodes: dict[str, object] = {}
        self.statuses: dict[str, object] = {}
        self.model = None
        self.options = options
        self.running: LaunchRequest | None = None
        self.speculation = Speculation()
        self._subs: list[Callable[[str], None]] = []

    # -- events ------------------------------------------------------------------------------

    def subscribe(self, callback: Callable[[str], None]) -> Callable[[], None]:
        """Call ``callback(event)`` after every change; returns the unsubscribe function."""
        self._subs.append(callback)
        return lambda: self._subs.remove(callback) if callback in self._subs else None

    def _emit(self, event: str) -> None:
        for cb in list(self._subs):
            try:
                cb(event)
            except Exception:  # one broken view must not stop the others
                log.exception("workspace subscriber failed on %s", event)

    # -- nodes -------------------------------------------------------------------------------

    def node_event(self, kind: str, node) -> bool:
        """Discovery said ``kind`` (``added``/``updated``/``removed``) about ``node``. Returns
        whether the node just stopped answering (it was reachable before)."""
        went_quiet = False
        if kind == "removed":
            self.nodes.pop(node.id, None)
            self.statuses.pop(node.id, None)
        else:
            old = self.nodes.get(node.id)
            went_quiet = old is not None and old.reachable and not node.reachable
            self.nodes[node.id] = node
        self._emit(NODES)
        return went_quiet

    def set_status(self, node_id: str, status) -> None:
        """A node's agent status arrived."""
        self.statuses[node_id] = status
        self._emit(STATUS)

    def usable_nodes(self) -> list:
        """The nodes a launch can use (:func:`~gui.cluster.nodes.records.usable_nodes`) whose
        status is known, by name."""
        return [n for n in usable_nodes(self.nodes.values()) if n.id in self.statuses]

    def planned_devices(self) -> list:
        """The plan :class:`~gui.cluster.planning.plan.Device` list of every usable node."""
        out = []
        for node in self.usable_nodes():
            out += node_devices(node, self.statuses[node.id])
        return out

    # -- model and options -------------------------------------------------------------------

    def open_model(self, info) -> None:
        """``info`` is now the open model; a context beyond what it was trained for is lowered
        to its own."""
        self.model = info
        if info is not None and info.context_length and self.options.ctx > info.context_length:
            self.options = replace(self.options, ctx=int(info.context_length))
            self._emit(OPTIONS)
        self._emit(MODEL)

    def set_options(self, **changes) -> None:
        """Change server options (``ctx``, ``host``, ``port``, ``alias``, ``extra_args``, ``people``);
        ValueError names a bad value and changes nothing."""
        new = replace(self.options, **changes)
        if new != self.options:
            self.options = new
            self._emit(OPTIONS)

    def set_speculation(self, speculation: Speculation) -> None:
        """The speculation the next launch uses (#35): a draft model, n-gram, MTP or none."""
        if speculation != self.speculation:
            self.speculation = speculation
            self._emit(OPTIONS)

    # -- launching ---------------------------------------------------------------------------

    def launch_request(self, plan, *, threads: int | None = None) -> LaunchRequest | None:
        """The request Start makes for ``plan`` with the open model and the options now (None
        without a model or a plan)."""
        if self.model is None or plan is None:
            return None
        return LaunchRequest(plan, self.model, self.options, threads=threads, speculation=self.speculation)

    def set_running(self, request: LaunchRequest | None) -> None:
        """The launch that serves now (None: none)."""
        self.running = request
        self._emit(RUNNING)

    def running_uses(self, node) -> bool:
        """Whether the launch serving now has layers on ``node``."""
        if self.running is None:
            return False
        # (the node's own record counts even while discovery reports it gone)
        known = {**self.nodes, node.id: node}.values()
        return any(n.id == node.id for n in nodes_for_plan(self.running.plan, known, strict=False))
