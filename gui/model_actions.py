"""The model in the window: open, read, find and use one, make the demo's, get one from a hub.

:class:`ModelActions` answers the model panel's intentions: a GGUF file is read off the GUI
thread (the newest asked for wins), becomes the workspace's open model and is remembered in the
settings; the models already on this PC are listed in the panel. It is given the bridge, the
settings, the workspace and the panel, not the whole window (#33).
"""

from __future__ import annotations

import logging

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QWidget

from gui.bridge import describe_error

log = logging.getLogger(__name__)


class ModelActions(QObject):
    """What the user does with models (see the module docstring).

    Attributes:
        bridge, settings, workspace: the asyncio bridge, the stored settings, the Qt-free state.
        panel: the :class:`~gui.widgets.model_panel.ModelPanel` that shows the model and the files.
        newest_read: the bridge call of the newest model read asked for (:meth:`read_model`);
            an older read's result is dropped. None after :meth:`open_model`.
        hub_dialog: the *Get model…* dialog last opened, or None.

    Signals:
        modelUsed(object): a model became the open one (its ModelInfo), after the workspace has it.
        localModelsFound(list): the newest scan's models on this PC
            (:class:`~gui.cluster.models.local.LocalModel` list; the drafts are found among them, #35).
    """

    modelUsed = Signal(object)
    localModelsFound = Signal(list)

    def __init__(self, parent: QWidget, *, bridge, settings, workspace, panel) -> None:
        """``parent`` is the window: the dialogs opened from here sit on it."""
        super().__init__(parent)
        self._parent = parent
        self.bridge, self.settings, self.workspace, self.panel = bridge, settings, workspace, panel
        self.newest_read = None
        self.hub_dialog = None
        #: the newest scan for the models on this PC (:meth:`find_local_models`)
        self._local_scan = None
        self._stopped = False
        panel.modelChosen.connect(self.read_model)
        panel.demoRequested.connect(self.make_demo_model)
        panel.hubRequested.connect(self.open_hub_dialog)

    def stop(self) -> None:
        """The window closes: start no more scans."""
        self._stopped = True

    def open_model(self, path: str) -> bool:
        """Inspect ``path`` on the calling thread and use it; on error say why and keep the
        previous model. For scripts and tests that want the model open when this returns: what
        the user does goes through :meth:`read_model`, which keeps the window responsive."""
        from gui.cluster.llama.model import ModelError, inspect_model

        self.newest_read = None  # this one is newer than any read still running
        try:
            info = inspect_model(path)
        except (ModelError, OSError) as exc:
            self.panel.show_error(path, str(exc))
            return False
        self.use_model(info)
        return True

    def read_model(self, path: str):
        """Inspect ``path`` off the GUI thread, then use it; returns the bridge call.

        Parsing a GGUF's header takes seconds for a vocabulary of a quarter million tokens, so
        it runs in a thread of its own (the window keeps painting, the sparklines keep moving)
        while the model panel names the file; closing the window abandons it. The latest file chosen wins: a read
        that ends after a newer one was asked for is dropped, whichever finishes first. On
        error the panel says why and the previous model stays."""
        from gui.bridge import in_background_thread
        from gui.cluster.llama.model import inspect_model

        async def read():
            # a thread nothing waits for: closing the window mid-read does not wait for the read
            return await in_background_thread(inspect_model, path, name="herd-read-model")

        log.info("reading the model %s", path)
        self.panel.show_reading(path)
        call = self.bridge.submit(read(), "read model")
        self.newest_read = call
        call.finished.connect(lambda info: call is self.newest_read and self.use_model(info))
        call.failed.connect(lambda exc: call is self.newest_read
                            and self.panel.show_error(path, describe_error(exc)))
        return call

    def find_local_models(self):
        """List the models already on this PC in the model panel; the folders are scanned off
        the GUI thread (a large cache takes a while). Returns the bridge call, or None while
        the window closes."""
        import asyncio

        from gui.cluster.models.local import find_local_models

        if self._stopped:
            return None
        herd_dir = self.settings.get("hub/models_dir") or None
        recent = list(self.settings.get("model/recent"))

        async def scan():
            return await asyncio.to_thread(find_local_models, herd_dir, recent)

        call = self.bridge.submit(scan(), "find models on this PC")
        self._local_scan = call
        call.finished.connect(lambda models: call is self._local_scan and self._found(models))
        # a scan that fails finds no draft either: Auto then says none is here, not nothing at all (#35)
        call.failed.connect(lambda _exc: call is self._local_scan and self.localModelsFound.emit([]))
        return call

    def _found(self, models: list) -> None:
        self.panel.set_local_models(models)
        self.localModelsFound.emit(models)

    def use_model(self, info) -> None:
        """Make ``info`` (a read :class:`~gui.cluster.llama.model.ModelInfo`) the open model:
        show it, remember it, plan for it."""
        self.panel.show_model(info)
        self.settings.set("model/last", str(info.path))
        self.panel.set_recent(self.settings.add_recent("model/recent", str(info.path)))
        self.find_local_models()  # (the recent files changed; a new download may be there)
        self.workspace.open_model(info)  # (lowers a context beyond the model's own; re-plans)
        self.modelUsed.emit(info)

    def open_hub_dialog(self):
        """*Get model…*: a model from a hub that fits the cluster, opened when downloaded (#14)."""
        from gui.hub_session import open_hub_dialog

        self.hub_dialog = open_hub_dialog(self._parent, self.bridge, self.settings, self.workspace.planned_devices,
                                          self.workspace.options.ctx, self.read_model)
        return self.hub_dialog

    def make_demo_model(self) -> None:
        """Write the demo model off the GUI thread, then open it."""
        from gui.cluster.demo_cluster import ensure_demo_model

        async def make():
            import asyncio
            return await asyncio.to_thread(ensure_demo_model)

        self.panel.info.setText(self.tr("Making the demo model…"))
        call = self.bridge.submit(make(), "demo model")
        call.finished.connect(lambda p: self.read_model(str(p)))
        call.failed.connect(lambda exc: self.panel.show_error("demo model", str(exc)))
