"""The nodes in the window: what the session says about them, and what the user asks of them.

:class:`NodeActions` shows the session's node events and telemetry samples in the views (the
cards, the dashboard, the split editor's colours, the status bar) and turns the nodes panel's
intentions — add by address, pair with a PIN, start or stop a worker, wake a sleeping node —
and the failover banner's choices into session calls, saying under the cards how each went.
It is given the session, the workspace and the views it drives, not the whole window (#33).
"""

from __future__ import annotations

from collections.abc import Mapping

from PySide6.QtCore import QObject

from gui.cluster.nodes.network_errors import explain


class NodeActions(QObject):
    """The window's wiring between the nodes and the session (see the module docstring).

    Attributes:
        session, workspace, settings: the cluster session, the Qt-free state, the stored settings.
        nodes, launch, dashboard, editor, banner: the views that show the nodes.
        status_bar: the window's status bar.
        demo: the window's :class:`~gui.local_demo.LocalDemo` ("Try a local demo" is offered
            only without nodes and without a demo).
    """

    def __init__(self, parent: QObject, *, session, workspace, settings, nodes, launch, dashboard, editor, banner,
                 status_bar, demo) -> None:
        """The views: the nodes panel, the launch panel, the dashboard, the split editor, the
        failover banner; ``status_bar``: the window's."""
        super().__init__(parent)
        self.session, self.workspace, self.settings = session, workspace, settings
        self.nodes, self.launch, self.dashboard, self.editor, self.banner = nodes, launch, dashboard, editor, banner
        self.status_bar, self.demo = status_bar, demo
        # intentions → session
        self.nodes.addRequested.connect(self.add_node)
        self.nodes.pairRequested.connect(self.pair_node)
        self.nodes.workerRequested.connect(self.set_worker)
        self.nodes.wakeRequested.connect(self.wake_node)
        self.nodes.demoRequested.connect(demo.start)
        self.banner.cancelRequested.connect(session.cancel_failover)
        self.banner.optionChosen.connect(self.choose_failover)
        # session → views
        session.nodeEvent.connect(self.on_node_event)
        session.sample.connect(self.on_sample)

    def on_node_event(self, kind: str, node) -> None:
        """A node appeared, changed or left."""
        self.nodes.on_node_event(kind, node)
        if self.workspace.node_event(kind, node):
            self.status_bar.showMessage(self.tr("Lost contact with %1.").replace("%1", node.name), 10000)
            # (asked of the launch that runs, not of the split being edited)
            if self.workspace.running_uses(node):
                self.launch.set_status(self.tr("%1 stopped answering; the running model may fail.")
                                       .replace("%1", node.name), "#d62728")
        known = self.workspace.nodes
        self.status_bar.showMessage(self.tr("%1 node(s) found.").replace("%1", str(len(known))))
        # "Try a local demo" is for a first start with nobody around
        self.nodes.demo_button.setVisible(not known and self.demo.cluster is None)
        # the same nodes to every view, so each picks the same colour for a node
        names = {nid: nd.name for nid, nd in known.items()}
        self.dashboard.set_node_names(names)
        self.editor.set_node_names(names)

    def on_sample(self, sample) -> None:
        """A telemetry sample: cards, dashboard, and device memory for the planner."""
        self.nodes.on_sample(sample)
        self.dashboard.add_sample(sample)
        if sample.kind == "node" and isinstance(sample.values.get("status"), Mapping):
            self.workspace.set_status(sample.source, sample.values["status"])

    def add_node(self, address: str) -> None:
        """Add a node by address (remembered when it answers)."""
        from gui.cluster.nodes.discovery import parse_address

        try:
            parse_address(address)
        except ValueError as exc:
            self.nodes.show_message(str(exc))
            return
        # a sign of life at once: an address that does not answer takes seconds to time out (#37)
        self.nodes.show_message(self.tr("Connecting to %1…").replace("%1", address), error=False)
        call = self.session.add_address(address)
        call.finished.connect(lambda node: (self.settings.add_recent("nodes/addresses", address, 50),
                                            self.nodes.show_message(
                                                self.tr("Added %1.").replace("%1", node.name) if node else "",
                                                error=False)))
        call.failed.connect(lambda exc: self.nodes.show_message(
            self.tr("Could not add %1: %2").replace("%1", address).replace("%2", explain(exc))))

    def pair_node(self, node_id: str, pin: str) -> None:
        """Pair with a node using its PIN."""
        known = self.workspace.nodes
        name = known[node_id].name if node_id in known else node_id
        call = self.session.pair(node_id, pin)
        # a success replaces whatever error was shown before, and says so
        call.finished.connect(lambda _t: self.nodes.show_message(
            self.tr("Paired with %1.").replace("%1", name), error=False))
        call.failed.connect(lambda exc: self.nodes.show_message(
            self.tr("Pairing with %1 failed: %2").replace("%1", name).replace("%2", explain(exc))))

    def set_worker(self, node_id: str, running: bool) -> None:
        """Start or stop a node's RPC worker."""
        call = self.session.set_worker(node_id, running)
        call.finished.connect(lambda _r: self.nodes.show_message(""))
        call.failed.connect(lambda exc: self.nodes.show_message(explain(exc)))

    def wake_node(self, node_id: str) -> None:
        """Send a sleeping node its Wake-on-LAN packet and say so under the cards (#36)."""
        name = self.nodes.cards[node_id].name if node_id in self.nodes.cards else node_id
        call = self.session.wake(node_id)
        call.finished.connect(lambda target: self.nodes.show_message(
            self.tr("Sent %1 a Wake-on-LAN packet (%2); its card turns back on when it answers.")
            .replace("%1", name).replace("%2", target.mac), error=False))
        call.failed.connect(lambda exc: self.nodes.show_message(
            self.tr("Could not wake %1: %2").replace("%1", name).replace("%2", explain(exc))))

    def choose_failover(self, option: str) -> None:
        """A banner button: relaunch now, keep waiting, more layers here, or use a node again."""
        call = self.session.choose_failover(option)
        call.failed.connect(lambda exc: (self.banner.choice_failed(),
                                         self.status_bar.showMessage(str(exc), 15000)))
