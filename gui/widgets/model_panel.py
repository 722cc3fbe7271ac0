"""The model panel: which GGUF the cluster runs, and what is in it.

Open a file (dialog, drag and drop, or the recent list); the panel shows architecture, layers,
size and context length as the core read them. *Make demo model* asks for a small random-weight
model for trying things out. The panel reads nothing itself: the window reads the file off the GUI
thread (:meth:`ModelPanel.show_reading` says which one while that takes more than a moment) and
calls :meth:`ModelPanel.show_model` or :meth:`ModelPanel.show_error`.

Below the buttons, *On this PC* lists the models already here (found off the GUI thread by
:mod:`gui.cluster.models.local`, given with :meth:`ModelPanel.set_local_models`): name, size,
where each was found and whether it fits the memory free now by its size
(:meth:`ModelPanel.set_capacity`); a click on one opens it.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (QAbstractItemView, QComboBox, QFileDialog, QGridLayout, QHBoxLayout, QHeaderView,
                               QLabel, QProgressBar, QPushButton, QSizePolicy, QTreeWidget, QTreeWidgetItem,
                               QVBoxLayout, QWidget)

from gui.cluster.models.local import size_verdict, source_label
from gui.widgets.outside_text import PATH_WORD, PlainLabel, plain_tooltip

WARN = "#d62728"
#: A file read faster than this shows no busy indicator (it would only flicker).
BUSY_AFTER_MS = 250
#: The local models list's height in rows before it scrolls (it shares the column with the tabs).
LOCAL_ROWS = 4
#: The local models list's columns.
NAME, SIZE, SOURCE, FIT = range(4)


class ModelPanel(QWidget):
    """Choose a model.

    Signals:
        modelChosen(str): the user picked a file (path).
        demoRequested(): the user wants a demo model made.
        hubRequested(): the user wants to get a model from a hub (#14).
        readingChanged(bool): a file began to be read (True), or its reading ended (False).
    """

    modelChosen = Signal(str)
    demoRequested = Signal()
    hubRequested = Signal()
    readingChanged = Signal(bool)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAcceptDrops(True)
        self.open_button = QPushButton(self.tr("Open model…"))
        self.demo_button = QPushButton(self.tr("Make demo model"))
        self.hub_button = QPushButton(self.tr("Get model…"))
        self.recent = QComboBox()
        # Long file names are elided in the box (the full path is its tooltip) instead of
        # widening the window past a small screen (#17).
        self.recent.setMinimumContentsLength(14)
        self.recent.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.recent.setPlaceholderText(self.tr("Recent models"))
        # a model's name is whatever its file says: plain text (#32); its path may be long
        self.info = PlainLabel(self.tr("No model open. Open a GGUF file or drop one here."), longest_word=PATH_WORD)
        self.info.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        # While a large GGUF's header is read (seconds for a big vocabulary): a busy bar and the
        # file's name; every control stays usable, and choosing another file replaces it.
        self.busy = QProgressBar()
        self.busy.setRange(0, 0)
        self.busy.setTextVisible(False)
        self.busy.setMaximumHeight(6)
        self._build_reading_box()
        #: the description of the model open now (kept under an error about another file, #37)
        self._open_text = ""
        #: the file of the model open now, to select its row again after a failed read
        self._open_path = ""
        self._reading = False
        self._busy_timer = QTimer(self)
        self._busy_timer.setSingleShot(True)
        self._busy_timer.setInterval(BUSY_AFTER_MS)
        self._busy_timer.timeout.connect(self._show_busy)
        # The models already on this PC: picked with a click instead of a path typed in a dialog.
        self.local = QTreeWidget()
        self.local.setRootIsDecorated(False)
        self.local.setUniformRowHeights(True)
        self.local.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.local.setHeaderLabels([self.tr("On this PC"), self.tr("Size"), self.tr("Found in"),
                                    self.tr("Fits now (size check)")])
        header = self.local.header()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(NAME, QHeaderView.ResizeMode.Stretch)
        for col in (SIZE, SOURCE, FIT):
            header.setSectionResizeMode(col, QHeaderView.ResizeMode.ResizeToContents)
        self.local.hide()  # until something is found
        self._local_models: list = []
        self._capacity: tuple[list, int] | None = None
        row = QHBoxLayout()
        row.addWidget(QLabel("<b>" + self.tr("Model") + "</b>"))
        row.addWidget(self.open_button)
        row.addWidget(self.recent, 1)
        row.addWidget(self.hub_button)
        row.addWidget(self.demo_button)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addLayout(row)
        lay.addWidget(self.local)
        status = QGridLayout()
        status.setContentsMargins(0, 0, 0, 0)
        status.addWidget(self.info, 0, 0)
        status.addWidget(self.reading_box, 0, 0, Qt.AlignmentFlag.AlignTop)
        lay.addLayout(status)
        self.open_button.clicked.connect(self._open)
        self.demo_button.clicked.connect(self.demoRequested)
        self.hub_button.clicked.connect(self.hubRequested)
        self.recent.activated.connect(lambda i: self.modelChosen.emit(self.recent.itemData(i)))
        self.local.itemClicked.connect(lambda item, _col: self.modelChosen.emit(item.data(NAME, Qt.ItemDataRole.UserRole)))

    def _build_reading_box(self) -> None:
        """The file's name and a busy bar, shown over the description while a file is read."""
        self.reading = PlainLabel()  # a file name is outside text (#32)
        # (a long file name is cut, not widening the window past a small screen, #17)
        self.reading.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        # The name and the bar lie over the model's description instead of below it, and the
        # room for them is kept while hidden: a bar that appeared below pushed the tabs down
        # about 32 px under the pointer, so the next click landed on nothing (#37).
        self.reading_box = QWidget()
        self.reading_box.setAutoFillBackground(True)
        box = QVBoxLayout(self.reading_box)
        box.setContentsMargins(0, 0, 0, 0)
        box.setSpacing(2)
        box.addWidget(self.reading)
        box.addWidget(self.busy)
        policy = self.reading_box.sizePolicy()
        policy.setRetainSizeWhenHidden(True)
        policy.setVerticalPolicy(QSizePolicy.Policy.Fixed)
        self.reading_box.setSizePolicy(policy)
        self.reading_box.hide()

    # ------------------------------------------------------------ the models on this PC

    def set_local_models(self, models: list) -> None:
        """List ``models`` (:class:`gui.cluster.models.local.LocalModel`, in the order given)."""
        self._local_models = list(models)
        self.local.clear()
        for m in self._local_models:
            item = QTreeWidgetItem([m.name, self._size_text(m), source_label(m.source), ""])
            item.setData(NAME, Qt.ItemDataRole.UserRole, str(m.path))
            item.setToolTip(NAME, plain_tooltip(m.path))
            item.setTextAlignment(SIZE, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            self.local.addTopLevelItem(item)
        self._select_open_row()  # a new scan keeps saying which model is open (#37)
        self.local.setVisible(bool(self._local_models))
        rows = min(max(len(self._local_models), 1), LOCAL_ROWS)
        row_h = self.local.sizeHintForRow(0) if self._local_models else 0
        self.local.setFixedHeight(self.local.header().sizeHint().height() + rows * max(row_h, 1)
                                  + 2 * self.local.frameWidth())
        self._show_fit()

    def set_capacity(self, devices: list, host_free: int) -> None:
        """The memory a model can use now: the plan devices the cluster can use (free bytes of
        each) and this PC's free RAM; each listed model says whether its file fits in it."""
        self._capacity = (list(devices), int(host_free))
        self._show_fit()

    def local_paths(self) -> list[str]:
        """The files listed under *On this PC*, top to bottom."""
        return [self.local.topLevelItem(i).data(NAME, Qt.ItemDataRole.UserRole)
                for i in range(self.local.topLevelItemCount())]

    def _show_fit(self) -> None:
        if self._capacity is None:
            return
        devices, host_free = self._capacity
        for i, m in enumerate(self._local_models):
            item = self.local.topLevelItem(i)
            verdict = size_verdict(m.size_bytes, devices, host_free)
            # (the file's bytes only: the header, with the context's cache, is read when opened)
            text = (self.tr("fits by size") if verdict.fits
                    else self.tr("needs about %1 GB more").replace("%1", f"{max(verdict.short_bytes / 1e9, 0.1):.1f}"))
            if item.text(FIT) != text:
                item.setText(FIT, text)
                item.setForeground(FIT, QBrush() if verdict.fits else QBrush(QColor(WARN)))

    def _size_text(self, m) -> str:
        size = (self.tr("%1 GB").replace("%1", f"{m.size_bytes / 1e9:.1f}") if m.size_bytes >= 1e9
                else self.tr("%1 MB").replace("%1", f"{m.size_bytes / 1e6:.1f}"))
        if m.shards > 1:
            return self.tr("%1 in %2 files").replace("%1", size).replace("%2", str(m.shards))
        return size

    def set_recent(self, paths: list[str]) -> None:
        """Fill the recent list (newest first)."""
        self.recent.blockSignals(True)
        self.recent.clear()
        for p in paths:
            self.recent.addItem(Path(p).name, p)
            self.recent.setItemData(self.recent.count() - 1, p, Qt.ItemDataRole.ToolTipRole)
        self.recent.setCurrentIndex(-1)
        self.recent.blockSignals(False)

    def show_reading(self, path: str) -> None:
        """``path`` is being read: name it with a busy bar if that takes more than a moment.

        The model shown so far stays shown until :meth:`show_model` or :meth:`show_error`."""
        self.reading.setText(self.tr("Reading %1…").replace("%1", Path(path).name))
        self._reading = True
        self._busy_timer.start()
        self.readingChanged.emit(True)

    def is_reading(self) -> bool:
        """True from :meth:`show_reading` until :meth:`show_model` or :meth:`show_error`."""
        return self._reading

    def _show_busy(self) -> None:
        self.reading_box.raise_()
        self.reading_box.show()

    def _reading_done(self) -> None:
        was_reading, self._reading = self._reading, False
        self._busy_timer.stop()
        self.reading_box.hide()
        if was_reading:
            self.readingChanged.emit(False)

    def show_model(self, info) -> None:
        """Show a :class:`gui.cluster.llama.model.ModelInfo`."""
        self._reading_done()
        ctx = info.context_length if info.context_length else self.tr("unknown")
        self.info.setStyleSheet("")
        self._open_text = (self.tr("%1 — %2, %3 layers, %4 MB, %5, context %6")
                           .replace("%1", info.name).replace("%2", info.architecture)
                           .replace("%3", str(info.n_layer)).replace("%4", f"{info.file_bytes / 1e6:,.1f}")
                           .replace("%5", info.quantization).replace("%6", str(ctx))
                           + f"\n{info.path}")
        self._open_path = str(info.path)
        self.info.setText(self._open_text)

    def show_error(self, path: str, message: str) -> None:
        """Say why ``path`` cannot be used (the previous model stays loaded, and the panel says
        which one that is: under the error, the split shown is still that model's, #37)."""
        self._reading_done()
        self.info.setStyleSheet(f"color: {WARN};")
        text = self.tr("Cannot use %1: %2").replace("%1", Path(path).name).replace("%2", message)
        if self._open_text:
            text += "\n" + self.tr("Still open, and shown below: %1").replace("%1", self._open_text)
        self.info.setText(text)
        # the row clicked is not the model open: the selection goes back to the open one
        self._select_open_row()

    def _select_open_row(self) -> None:
        """Select the row of the model open now (none when it is not listed)."""
        self.local.clearSelection()
        for i in range(self.local.topLevelItemCount()):
            item = self.local.topLevelItem(i)
            if item.data(NAME, Qt.ItemDataRole.UserRole) == self._open_path:
                item.setSelected(True)

    def start_folder(self) -> str:
        """Where *Open model…* starts: the folder of the newest recent model that still exists
        (models usually sit together), else the current folder."""
        for i in range(self.recent.count()):
            folder = Path(self.recent.itemData(i)).parent
            if folder.is_dir():
                return str(folder)
        return ""

    def _open(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, self.tr("Open a GGUF model"), self.start_folder(),
                                              self.tr("GGUF models (*.gguf);;All files (*)"))
        if path:
            self.modelChosen.emit(path)

    def dragEnterEvent(self, event) -> None:  # noqa: N802 - Qt override
        if event.mimeData().hasUrls():
            event.acceptProposedAction()

    def dropEvent(self, event) -> None:  # noqa: N802 - Qt override
        for url in event.mimeData().urls():
            if url.isLocalFile():
                self.modelChosen.emit(url.toLocalFile())
                event.acceptProposedAction()
                return
