""""Try a local demo" in the window: two agents on loopback, paired, holding the demo model's layers.

:class:`LocalDemo` starts the :class:`~gui.cluster.demo_cluster.DemoCluster` off the GUI thread
(or takes the one ``herd demo`` started), adds and pairs its agents through the session, opens
the demo model, and once both agents report their devices gives them all the layers. It is given
the session, the nodes panel, the split editor and the model actions, not the whole window (#33).
"""

from __future__ import annotations

import logging

from PySide6.QtCore import QObject

log = logging.getLogger(__name__)


class LocalDemo(QObject):
    """The local demo of one window (see the module docstring).

    Attributes:
        cluster: the running :class:`~gui.cluster.demo_cluster.DemoCluster`, or None.
        addresses: the demo agents' addresses until they hold the demo's layers
            (:meth:`split_for_demo`); empty otherwise.
    """

    def __init__(self, parent: QObject, *, bridge, session, models, nodes, editor, show_editor) -> None:
        """``models`` are the window's :class:`~gui.model_actions.ModelActions`; ``show_editor()``
        brings the split editor's tab to the front."""
        super().__init__(parent)
        self.bridge, self.session, self.models = bridge, session, models
        self.nodes, self.editor, self._show_editor = nodes, editor, show_editor
        self.cluster = None
        self.addresses: set[str] = set()
        self._stop_on_close = True
        self._closing = False

    def start(self) -> None:
        """"Try a local demo": two agents on loopback, paired, and the demo model."""
        from gui.cluster.demo_cluster import DemoCluster, ensure_demo_model

        if self.cluster is not None:
            return
        self.nodes.show_message(self.tr("Starting two local workers…"))

        async def go():
            import asyncio
            cluster = DemoCluster(2)
            await asyncio.to_thread(cluster.start)
            path = await asyncio.to_thread(ensure_demo_model)
            return cluster, path

        call = self.bridge.submit(go(), "local demo")
        call.finished.connect(lambda r: self.attach(*r))
        call.failed.connect(lambda exc: self.nodes.show_message(
            self.tr("The local demo could not start: %1").replace("%1", str(exc))))

    def attach(self, cluster, model_path, *, stop_on_close: bool = True) -> None:
        """Add and pair the demo's agents, open the demo model (ready to press Start).
        ``stop_on_close=False``: the agents are someone else's to stop (``herd demo``, a test)."""
        self.cluster = cluster
        self._stop_on_close = stop_on_close
        self.addresses = {a.address for a in cluster.agents}
        self.nodes.show_message("")
        for a in cluster.agents:
            call = self.session.add_address(a.address)
            # (the window may have been closed meanwhile: then there is nobody to pair for)
            call.finished.connect(lambda node, pin=a.pin: node and not self._closing
                                  and self.session.pair(node.id, pin))
        self.models.read_model(str(model_path))
        self._show_editor()

    def split_for_demo(self, model, devices: list, nodes) -> None:
        """Once the demo's agents are paired and known, give them all the layers: the demo shows
        a cluster at work, and its workers run on this computer anyway (the host would only add
        a third share of the same RAM). ``nodes``: the nodes discovery knows."""
        wanted = self.addresses
        if not wanted or model is None:
            return
        ours = {n.id for n in nodes if f"{n.host}:{n.api_port}" in wanted}
        mine = [d for d in devices if d.node_id in ours]
        if len(ours) < len(wanted) or {d.node_id for d in mine} != ours:
            return
        from gui.cluster.planning.plan import PlanError, plan_from_split
        n = model.n_slots
        counts = [n // len(mine) + (1 if i < n % len(mine) else 0) for i in range(len(mine))]
        try:
            plan = plan_from_split(model, devices, {"host": 0, **{d.key: c for d, c in zip(mine, counts)}})
        except PlanError as exc:
            log.warning("demo split: %s", exc)
            return
        self.addresses = set()
        self.editor.apply_plan(plan)

    def close(self) -> None:
        """The window closes: pair nothing more, and stop the demo's agents when they are ours."""
        self._closing = True
        if self.cluster is not None and self._stop_on_close:
            self.cluster.stop()
        self.cluster = None
