"""Cluster profiles in the window: export the split shown, import one and show it on the nodes.

:class:`ProfileActions` runs *File → Export cluster profile…* and *Import cluster profile…*:
the profile holds the workspace's plan, model, nodes and server options
(:mod:`gui.cluster.launching.profile`); an imported one is checked against the live cluster, shown with
its differences, and applied to the workspace and the split editor.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QFileDialog, QMessageBox


def load_with_model(path: str):
    """``(profile, its model's ModelInfo)`` from the profile file at ``path``; the info is None
    when the model cannot be read (the differences with the live cluster say so).

    Raises:
        ProfileError, OSError: the profile itself cannot be read.
    """
    from gui.cluster.launching.profile import load_profile
    from gui.cluster.llama.model import ModelError, inspect_model

    profile = load_profile(path)
    try:
        info = inspect_model(profile.model.path)
    except (ModelError, OSError):
        info = None
    return profile, info


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
        """File → Import cluster profile…: read it off the GUI thread, then show the differences
        and apply on request."""
        path, _ = QFileDialog.getOpenFileName(self.win, self.tr("Import cluster profile"), "",
                                              self.tr("Cluster profiles (*.json);;All files (*)"))
        if path:
            self.read_in_background(path).finished.connect(lambda result: self._offer(path, *result))

    def _offer(self, path: str, profile, info) -> None:
        from gui.widgets.profile_dialog import ProfileDiffDialog

        dlg = ProfileDiffDialog(path, profile, self._differences(profile, info), self.win)
        if dlg.exec() and dlg.apply_button.isEnabled():
            self.apply(profile, info)

    def read(self, path: str):
        """``(profile, differences from the live cluster)`` read on the calling thread, or None
        after telling the user why not (the window reads with :meth:`read_in_background`)."""
        from gui.cluster.launching.profile import ProfileError

        try:
            profile, info = load_with_model(path)
        except (ProfileError, OSError) as exc:
            self._unreadable(exc)
            return None
        return profile, self._differences(profile, info)

    def read_in_background(self, path: str):
        """Read the profile and inspect its model off the GUI thread (seconds for a large
        vocabulary), the status bar naming the file meanwhile; returns the bridge call, whose
        result is ``(profile, model info or None)``. A failure is told to the user."""
        import asyncio

        async def go():
            return await asyncio.to_thread(load_with_model, path)

        reading = self.tr("Reading %1…").replace("%1", Path(path).name)
        bar = self.win.statusBar()
        bar.showMessage(reading)
        call = self.win.bridge.submit(go(), "import profile")
        call.failed.connect(self._unreadable)
        call.done.connect(lambda: bar.currentMessage() == reading and bar.clearMessage())
        return call

    def _differences(self, profile, info) -> list:
        from gui.cluster.launching.profile import diff_profile

        return diff_profile(profile, list(self.workspace.nodes.values()), self.engine.build, info)

    def _unreadable(self, exc) -> None:
        QMessageBox.warning(self.win, self.tr("Import cluster profile"), str(exc))

    def apply(self, profile, info=None) -> bool:
        """Open the profile's model and show its plan on the nodes as they are now (matched by
        node id: their current addresses and free memory). A profile whose nodes are not all
        here is refused: its plan would name endpoints nobody listens on (#17). ``info`` is the
        model as :func:`load_with_model` read it, so it is not read again; without it the model
        is read here."""
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
        if info is not None and str(info.path) == str(profile.model.path):
            self.win.use_model(info)
        elif not self.win.open_model(profile.model.path):
            return False
        self.workspace.set_options(ctx=profile.server.ctx, host=profile.server.host, port=profile.server.port,
                                   alias=profile.server.alias, extra_args=profile.server.extra_args)
        self.editor.apply_plan(bind_to_devices(rebind_plan(profile, list(self.workspace.nodes.values())),
                                               self.workspace.planned_devices()))
        self.win.tabs.setCurrentWidget(self.editor)
        return True
