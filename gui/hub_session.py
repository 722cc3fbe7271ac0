"""The app's side of the model hub (#14): runs :mod:`gui.cluster.models.hub` for the *Get model* dialog.

The hub client is blocking, so every call runs in a worker thread of the bridge's asyncio loop
(``asyncio.to_thread``); results come back as the bridge's queued signals, download progress
as this object's :attr:`HubSession.progress` signal (emitted from the download thread, queued
to the GUI thread by Qt). The dialog stays a view.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from gui.bridge import AsyncBridge, describe_error
from gui.cluster.models import hub as H
from gui.cluster.planning.devices import host_free_bytes


class HubSession(QObject):
    """Connects a :class:`gui.widgets.hub_dialog.HubDialog` to the hub.

    Attributes:
        files: the listed repository's models (``gui.cluster.models.hub.RepoFiles``), or None.
        fits: their fit and speed, row by row.
        downloaded: the path of the last finished download, or None.

    Signals:
        progress(object): a ``DownloadProgress`` (from the download thread).
        reading(object): a ``HeaderProgress`` while the listed repository's headers are read
            (from the reading threads).
        modelReady(str): a download finished and was verified: its path (the first file).
    """

    progress = Signal(object)
    reading = Signal(object)
    modelReady = Signal(str)

    def __init__(self, dialog, bridge: AsyncBridge, settings, devices: Callable[[], list],
                 host_free: Callable[[], int], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.dialog = dialog
        self.bridge = bridge
        self.settings = settings
        self.devices = devices
        self.host_free = host_free
        self.files: H.RepoFiles | None = None
        self.fits: list = []
        self.downloaded: str | None = None
        self._cancel: threading.Event | None = None
        dialog.endpointChanged.connect(self.set_endpoint)
        dialog.searchRequested.connect(self.search)
        dialog.repoChosen.connect(self.list_files)
        dialog.downloadRequested.connect(self.download)
        dialog.cancelRequested.connect(self.cancel)
        self.progress.connect(dialog.show_progress)
        self.reading.connect(dialog.show_reading)

    def models_dir(self) -> Path:
        """Where downloads go: the setting, else herd's data folder."""
        return Path(self.settings.get("hub/models_dir") or H.models_dir())

    def hub(self) -> H.Hub:
        """A client for the hub set in the settings (empty: ``$HF_ENDPOINT`` or huggingface.co)."""
        return H.Hub(self.settings.get("hub/endpoint") or None)

    def set_endpoint(self, url: str) -> None:
        """Remember the hub address (a mirror) for next time."""
        self.settings.set("hub/endpoint", url.rstrip("/"))

    def _fail(self, exc) -> None:
        self.dialog.show_error(str(exc) if isinstance(exc, H.HubError) else describe_error(exc))

    def search(self, query: str):
        """Search the hub; the dialog shows what was found."""
        hub = self.hub()
        call = self.bridge.submit(asyncio.to_thread(hub.search, query), "hub search")
        call.finished.connect(self.dialog.show_hits)
        call.failed.connect(self._fail)
        return call

    def list_files(self, repo: str, ctx: int):
        """List ``repo``'s models with fit, split and speed against the cluster as it is now."""
        hub = self.hub()
        devices = list(self.devices())
        host_free = self.host_free()
        names = list(dict.fromkeys(d.node_name for d in devices))

        def work():
            files = hub.files(repo)
            measured = H.cluster_measurements(devices)
            fits = H.assess_repo(hub, files, devices, ctx, host_free_bytes=host_free, measured=measured,
                                 on_progress=self.reading.emit)
            return files, fits

        def show(result) -> None:
            self.files, self.fits = result
            self.dialog.show_fits(repo, self.fits, H.suggest(self.fits), names)

        call = self.bridge.submit(asyncio.to_thread(work), "hub files")
        call.finished.connect(show)
        call.failed.connect(self._fail)
        return call

    def download(self, row: int):
        """Download the model of ``row``; when verified, :attr:`modelReady` says where it is."""
        if self.files is None or not 0 <= row < len(self.fits) or self._cancel is not None:
            return None
        hub, files, model = self.hub(), self.files, self.fits[row].model
        self._cancel = cancel = threading.Event()
        target = self.models_dir()
        self.dialog.set_downloading(True)
        async def run():
            try:
                return await asyncio.to_thread(hub.download, files.repo, files.commit, model, target,
                                               progress=self.progress.emit, cancel=cancel)
            except asyncio.CancelledError:
                # the window is closing (the bridge cancels every call): the thread would go on
                # downloading behind the app's back; it stops at its next chunk instead
                cancel.set()
                raise

        call = self.bridge.submit(run(), "model download")

        def finished(path) -> None:
            self.downloaded = str(path)
            self.dialog.show_downloaded(str(path))
            self.modelReady.emit(str(path))

        def failed(exc) -> None:
            if isinstance(exc, H.DownloadCancelled):
                self.dialog.show_cancelled()
            else:
                self._fail(exc)

        def done() -> None:
            self._cancel = None
            self.dialog.set_downloading(False)

        call.finished.connect(finished)
        call.failed.connect(failed)
        call.done.connect(done)
        return call

    def cancel(self) -> None:
        """Stop the running download (its partial file is kept for resuming)."""
        if self._cancel is not None:
            self._cancel.set()


def open_hub_dialog(parent, bridge: AsyncBridge, settings, devices: Callable[[], list], ctx: int,
                    open_model: Callable[[str], object]):
    """Show the *Get model* dialog over ``parent`` (the window), wired to a :class:`HubSession`;
    a verified download is opened with ``open_model(path)``. Returns the dialog (its
    ``session`` attribute is the :class:`HubSession`)."""
    from gui.widgets.hub_dialog import HubDialog

    session_models = Path(settings.get("hub/models_dir") or H.models_dir())
    dialog = HubDialog(parent, endpoint=settings.get("hub/endpoint"), ctx=ctx, models_dir=str(session_models))
    dialog.session = HubSession(dialog, bridge, settings, devices,
                                host_free_bytes, parent=dialog)
    dialog.session.modelReady.connect(open_model)
    dialog.finished.connect(lambda _r: dialog.session.cancel())
    dialog.show()
    return dialog
