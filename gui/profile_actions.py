"""Cluster profiles in the window: export the split shown, import one and show it on the nodes.

:class:`ProfileActions` runs *File → Export cluster profile…* and *Import cluster profile…*:
the profile holds the workspace's plan, model, nodes and server options
(:mod:`gui.cluster.launching.profile`); an imported one is checked against the live cluster, shown with
its differences, and applied to the workspace and the split editor.

The review and *Use this profile* rest on one check (:meth:`ProfileActions.check`, i.e.
:func:`~gui.cluster.launching.profile.diff_profile` with what the window knows), so the preview
cannot promise what the apply then refuses. The review stays open while the user pairs the
nodes it names, and is checked again as they change: the imported profile is kept until it is
used or the review is dismissed.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QFileDialog, QMessageBox

from gui.widgets.outside_text import plain_message


def load_with_model_info(profile):
    """The ModelInfo of ``profile``'s model as it is on this computer, or None when it cannot be
    read (the differences with the live cluster say so)."""
    from gui.cluster.llama.model import ModelError, inspect_model

    try:
        return inspect_model(profile.model.path)
    except (ModelError, OSError):
        return None


def load_with_model(path: str):
    """``(profile, its model's ModelInfo)`` from the profile file at ``path``; the info is None
    when the model cannot be read (the differences with the live cluster say so).

    Raises:
        ProfileError, OSError: the profile itself cannot be read.
    """
    from gui.cluster.launching.profile import load_profile

    profile = load_profile(path)
    return profile, load_with_model_info(profile)


class ProfileActions(QObject):
    """File ▸ Export/Import cluster profile (see the module docstring).

    It is given the views it drives and what a profile is made from, not the whole window (#33).

    Attributes:
        dialog_parent: the window the dialogs sit on.
        workspace, engine, bridge: what a profile is made from, and the bridge it is read through.
        models: the window's :class:`~gui.model_actions.ModelActions`, which open a profile's model.
        editor, nodes, tabs, status_bar: the split editor a profile is shown in, the nodes panel
            (a node is paired from the review), the window's tabs and status bar.
    """

    def __init__(self, parent, *, workspace, engine, bridge, models, editor, nodes, tabs, status_bar) -> None:
        super().__init__(parent)
        self.dialog_parent = parent
        self.workspace, self.engine, self.bridge, self.models = workspace, engine, bridge, models
        self.editor, self.nodes, self.tabs, self.status_bar = editor, nodes, tabs, status_bar
        #: the window's :class:`~gui.speculation_actions.SpeculationActions`: a profile's
        #: speculation becomes the choice on import (#35); None: kept out of the window
        self.speculation = None

    def export_dialog(self) -> None:
        """File → Export cluster profile…"""
        if self.workspace.model is None or self.editor.plan() is None:
            QMessageBox.information(self.dialog_parent, self.tr("Export cluster profile"), self.tr("Open a model first."))
            return
        path, _ = QFileDialog.getSaveFileName(self.dialog_parent, self.tr("Export cluster profile"), "cluster.json",
                                              self.tr("Cluster profiles (*.json)"))
        if path:
            self.export(path)

    def export(self, path: str):
        """Write the current cluster (plan, model, nodes, engine, server options) to ``path``.

        The model is hashed off the GUI thread; returns the bridge call."""
        from gui.cluster.launching.profile import export_profile

        plan, model, options = self.editor.plan(), self.workspace.model, self.workspace.options
        nodes, speculation = list(self.workspace.nodes.values()), self.workspace.speculation

        async def go():
            import asyncio
            return await asyncio.to_thread(export_profile, path, plan=plan, model=model, nodes=nodes,
                                           engine=self.engine, server=options, speculation=speculation)

        call = self.bridge.submit(go(), "export profile")
        call.finished.connect(lambda p: self.status_bar.showMessage(self.tr("Saved %1").replace("%1", str(p)), 10000))
        call.failed.connect(lambda exc: plain_message(self.dialog_parent, QMessageBox.Icon.Warning, self.tr("Export cluster profile"), exc))
        return call

    def import_dialog(self) -> None:
        """File → Import cluster profile…: read it off the GUI thread, then show the differences
        (kept up to date while the dialog is open) and apply on request."""
        path, _ = QFileDialog.getOpenFileName(self.dialog_parent, self.tr("Import cluster profile"), "",
                                              self.tr("Cluster profiles (*.json);;All files (*)"))
        if path:
            self.read_in_background(path).finished.connect(lambda result: self.offer(path, *result))

    def review(self, path: str) -> bool:
        """:meth:`offer` the profile at ``path``, read on the calling thread. Returns whether it
        was applied."""
        try:
            profile, info = load_with_model(path)
        except Exception as exc:  # ProfileError, OSError: told to the user
            self._unreadable(exc)
            return False
        return self.offer(path, profile, info)

    def offer(self, path: str, profile, info) -> bool:
        """Show ``profile`` (``info``: its model as read here, None when missing) with its
        differences from the live cluster, kept up to date while the dialog is open (a node
        paired from it, a node that answers again); apply it when the user says so. Returns
        whether it was applied."""
        from gui.widgets.profile_dialog import ProfileDiffDialog

        dlg = ProfileDiffDialog(path, profile, self.check(profile, info), self.dialog_parent, host=self.workspace.options.host)
        dlg.pairRequested.connect(self.nodes.ask_pin)
        # (events come on the GUI thread: from the session's queued signals, through the window)
        stop = self.workspace.subscribe(lambda _event: dlg.set_findings(self.check(profile, info)))
        try:
            accepted = dlg.exec() and dlg.apply_button.isEnabled()
        finally:
            stop()
            dlg.deleteLater()
        return bool(accepted) and self.apply(profile, info)

    def read(self, path: str):
        """``(profile, differences from the live cluster)`` read on the calling thread, or None
        after telling the user why not (the window reads with :meth:`read_in_background`)."""
        from gui.cluster.launching.profile import ProfileError

        try:
            profile, info = load_with_model(path)
        except (ProfileError, OSError) as exc:
            self._unreadable(exc)
            return None
        return profile, self.check(profile, info)

    def read_in_background(self, path: str):
        """Read the profile and inspect its model off the GUI thread (seconds for a large
        vocabulary), the status bar naming the file meanwhile; returns the bridge call, whose
        result is ``(profile, model info or None)``. A failure is told to the user."""
        import asyncio

        async def go():
            return await asyncio.to_thread(load_with_model, path)

        reading = self.tr("Reading %1…").replace("%1", Path(path).name)
        bar = self.status_bar
        bar.showMessage(reading)
        call = self.bridge.submit(go(), "import profile")
        call.failed.connect(self._unreadable)
        call.done.connect(lambda: bar.currentMessage() == reading and bar.clearMessage())
        return call

    def check(self, profile, info) -> list:
        """The one check of ``profile`` against the window's cluster (``info``: its model as
        read here, None when missing): nodes as discovery reports them, which of them have
        reported their devices, the engine build; then, as warnings, what it changes in this
        PC's server settings and how its split differs from the one serving and the editor's
        (#32, #37 item 14). What the review shows and :meth:`apply` obeys."""
        from gui.cluster.launching.profile import (
            bind_to_devices,
            diff_profile,
            rebind_plan,
            settings_differences,
            split_differences,
        )

        nodes = list(self.workspace.nodes.values())
        devices = self.workspace.planned_devices()
        reporting = {d.node_id for d in devices}
        found = diff_profile(profile, nodes, self.engine.build, info, reporting=reporting)
        running = self.workspace.running.plan if self.workspace.running is not None else None
        plan = bind_to_devices(rebind_plan(profile, nodes), devices)
        return (found + settings_differences(profile, self.workspace.options)
                + split_differences(profile, plan, running, self.editor.plan()))

    def _unreadable(self, exc) -> None:
        # the error may quote the profile (its model name): outside text, shown plainly (#32)
        plain_message(self.dialog_parent, QMessageBox.Icon.Warning, self.tr("Import cluster profile"), exc)

    def apply(self, profile, info=None) -> bool:
        """Open the profile's model and show its plan on the nodes as they are now (matched by
        node id: their current addresses and free memory), then say so in the status bar and
        under the split. Refused, with what to do, when :meth:`check` finds an error: a plan on
        nodes that are not all here would name endpoints nobody listens on (#17). ``info`` is
        the model as :func:`load_with_model` read it, so it is not read again; without it the
        model is read here."""
        from gui.cluster.launching.profile import (
            applied_message,
            bind_to_devices,
            blocking,
            rebind_plan,
            refusal,
        )

        if info is None:
            info = load_with_model_info(profile)
        findings = self.check(profile, info)
        if blocking(findings):
            plain_message(self.dialog_parent, QMessageBox.Icon.Warning, self.tr("Import cluster profile"), refusal(findings))
            return False
        if info is not None and str(info.path) == str(profile.model.path):
            self.models.use_model(info)
        elif not self.models.open_model(profile.model.path):
            return False
        # (where the endpoint listens stays this PC's own setting: never the profile's, #32)
        self.workspace.set_options(ctx=profile.server.ctx, port=profile.server.port,
                                   alias=profile.server.alias, extra_args=profile.server.extra_args,
                                   people=profile.server.people)
        self.editor.apply_plan(bind_to_devices(rebind_plan(profile, list(self.workspace.nodes.values())),
                                               self.workspace.planned_devices()))
        if self.speculation is not None:  # (a profile without a speculation section runs none, as herd up)
            self.speculation.use_saved(profile.speculation)
        self.tabs.setCurrentWidget(self.editor)
        done = applied_message(profile, self.editor.plan())
        self.editor.set_note(done)  # (until the next edit)
        self.status_bar.showMessage(done, 20000)
        return True
