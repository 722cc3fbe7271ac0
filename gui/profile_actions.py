"""Cluster profiles in the window: export the split shown, import one and show it on the nodes.

:class:`ProfileActions` runs *File → Export cluster profile…* and *Import cluster profile…*:
the profile holds the workspace's plan, model, nodes and server options
(:mod:`gui.cluster.launching.profile`); an imported one is checked against the live cluster, shown with
its differences, and applied to the workspace and the split editor.
"""

from __future__ import annotations

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QFileDialog, QMessageBox


class ProfileActions(QObject):
    """File ▸ Export/Import cluster profile (see the module docstring).

    Attributes:
        win: the :class:`~gui.app.MainWindow`.
        workspace, engine, editor: what a profile is made from and shown in.
    """

    def __init__(self, win) -> None:
        super().__init__(win)
        self.win = win
        self.workspace, self.engine, self.editor = win.workspace, win.engine, win.editor

    def export_dialog(self) -> None:
        """File → Export cluster profile…"""
        if self.workspace.model is None or self.editor.plan() is None:
            QMessageBox.information(self.win, self.tr("Export cluster profile"), self.tr("Open a model first."))
            return
        path, _ = QFileDialog.getSaveFileName(self.win, self.tr("Export cluster profile"), "cluster.json",
                                              self.tr("Cluster profiles (*.json)"))
        if path:
            self.export(path)

    def export(self, path: str):
        """Write the current cluster (plan, model, nodes, engine, server options) to ``path``.

        The model is hashed off the GUI thread; returns the bridge call."""
        from gui.cluster.launching.profile import export_profile

        plan, model, options = self.editor.plan(), self.workspace.model, self.workspace.options
        nodes = list(self.workspace.nodes.values())

        async def go():
            import asyncio
            return await asyncio.to_thread(export_profile, path, plan=plan, model=model, nodes=nodes,
                                           engine=self.engine, server=options)

        call = self.win.bridge.submit(go(), "export profile")
        call.finished.connect(lambda p: self.win.statusBar().showMessage(self.tr("Saved %1").replace("%1", str(p)), 10000))
        call.failed.connect(lambda exc: QMessageBox.warning(self.win, self.tr("Export cluster profile"), str(exc)))
        return call

    def import_dialog(self) -> None:
        """File → Import cluster profile…: load, show the differences, apply on request."""
        from gui.widgets.profile_dialog import ProfileDiffDialog

        path, _ = QFileDialog.getOpenFileName(self.win, self.tr("Import cluster profile"), "",
                                              self.tr("Cluster profiles (*.json);;All files (*)"))
        if not path:
            return
        result = self.read(path)
        if result is None:
            return
        profile, findings = result
        dlg = ProfileDiffDialog(path, profile, findings, self.win)
        if dlg.exec() and dlg.apply_button.isEnabled():
            self.apply(profile)

    def read(self, path: str):
        """``(profile, differences from the live cluster)``, or None after telling the user why not."""
        from gui.cluster.launching.profile import ProfileError, diff_profile, load_profile
        from gui.cluster.llama.model import ModelError, inspect_model

        try:
            profile = load_profile(path)
        except (ProfileError, OSError) as exc:
            QMessageBox.warning(self.win, self.tr("Import cluster profile"), str(exc))
            return None
        try:
            info = inspect_model(profile.model.path)
        except (ModelError, OSError):
            info = None
        return profile, diff_profile(profile, list(self.workspace.nodes.values()), self.engine.build, info)

    def apply(self, profile) -> bool:
        """Open the profile's model and show its plan on the nodes as they are now (matched by
        node id: their current addresses and free memory). A profile whose nodes are not all
        here is refused: its plan would name endpoints nobody listens on (#17)."""
        from gui.cluster.launching.profile import bind_to_devices, rebind_plan

        used = {d.node_id for d, c in profile.plan.assignments if c and d.kind == "rpc"}
        live = {d.node_id for d in self.workspace.planned_devices()}
        gone = sorted(profile.nodes[n].name if n in profile.nodes else n for n in used - live)
        if gone:
            QMessageBox.warning(self.win, self.tr("Import cluster profile"),
                                self.tr("The profile uses %1, which this computer cannot reach or is not paired "
                                        "with. Start their herd-agent and pair with them, then import again.")
                                .replace("%1", ", ".join(gone)))
            return False
        if not self.win.open_model(profile.model.path):
            return False
        self.workspace.set_options(ctx=profile.server.ctx, host=profile.server.host, port=profile.server.port,
                                   alias=profile.server.alias, extra_args=profile.server.extra_args)
        self.editor.apply_plan(bind_to_devices(rebind_plan(profile, list(self.workspace.nodes.values())),
                                               self.workspace.planned_devices()))
        self.win.tabs.setCurrentWidget(self.editor)
        return True
