"""The *Get model* dialog: find a GGUF on a model hub that fits the cluster, and download it (#14).

Search a hub by name, pick a repository, and see each of its GGUF files (a split model is one
row) with its quant type, size, whether it fits the nodes plus this PC at the chosen context,
the split that would be used and the predicted decode speed. The largest file that fits is
marked and selected. *Download* fetches it with progress (bytes, rate, time left) and can be
cancelled and resumed later; the window then opens the model in the split editor.

The dialog is a view: it shows what :class:`gui.hub_session.HubSession` gives it and sends the
user's intentions as signals. It opens no socket itself.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFont
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from gui.cluster.llama.server_command import DEFAULT_CTX
from gui.widgets.outside_text import NAME_WORD, PlainLabel, plain_tooltip, shortened

WARN = "#d62728"
OK = "#2ca02c"
MB = 1e6

COLUMNS = ("file", "quant", "size", "fits", "split", "speed")


class HubDialog(QDialog):
    """Browse a hub and download a model that fits.

    Attributes:
        endpoint: the hub's address (empty: huggingface.co, or ``$HF_ENDPOINT``).
        query, search_button, results: the search and the repositories found.
        ctx: the context size the fit is checked at.
        table: the chosen repository's models, one row each (columns :data:`COLUMNS`).
        download_button, cancel_button, progress, status: the download.

    Signals:
        endpointChanged(str): the user set another hub address (empty: the default).
        searchRequested(str): search for this text.
        repoChosen(str, int): list this repository's models, fit at this context.
        downloadRequested(int): download the model of this row.
        cancelRequested(): stop the running download (it can be resumed later).
    """

    endpointChanged = Signal(str)
    searchRequested = Signal(str)
    repoChosen = Signal(str, int)
    downloadRequested = Signal(int)
    cancelRequested = Signal()

    def __init__(self, parent: QWidget | None = None, *, endpoint: str = "", ctx: int = DEFAULT_CTX,
                 models_dir: str = "") -> None:
        super().__init__(parent)
        self.setWindowTitle(self.tr("Get a model"))
        self.repo = ""
        self.suggested: int | None = None
        self.downloading = False

        self.endpoint = QLineEdit(endpoint)
        self.endpoint.setPlaceholderText("https://huggingface.co")
        why = QLabel(self.tr("Leave empty for huggingface.co. Where it cannot be reached (in mainland China, "
                             "for example) enter a mirror such as https://hf-mirror.com; herd remembers it."))
        why.setWordWrap(True)
        why.setStyleSheet("color: gray;")
        self.query = QLineEdit()
        self.query.setPlaceholderText(self.tr("Model name, e.g. Qwen2.5 7B GGUF"))
        self.search_button = QPushButton(self.tr("Search"))
        self.results = QListWidget()
        self.results.setMaximumHeight(120)
        self.ctx = QSpinBox()
        self.ctx.setRange(256, 1 << 20)
        self.ctx.setSingleStep(1024)
        self.ctx.setValue(ctx)
        # node names, repository and file names, a hub's errors: outside text, shown plainly (#32)
        self.fit_note = PlainLabel()
        self.table = self._files_table()
        self.status = PlainLabel()
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.setVisible(False)
        self.saves_to = QLabel(self.tr("Saved to %1").replace("%1", models_dir))
        self.saves_to.setStyleSheet("color: gray;")
        self.download_button = QPushButton(self.tr("Download"))
        self.download_button.setEnabled(False)
        self.cancel_button = QPushButton(self.tr("Cancel download"))
        self.cancel_button.setEnabled(False)
        close = QPushButton(self.tr("Close"))
        self._lay_out(why, close)
        self.resize(860, 560)
        self._connect(close)

    def _files_table(self) -> QTableWidget:
        """The table of a repository's model files: one row per quant, read-only, one selected."""
        table = QTableWidget(0, len(COLUMNS))
        table.setHorizontalHeaderLabels([self.tr("File"), self.tr("Quant"), self.tr("Size"),
                                         self.tr("Fits"), self.tr("Split"), self.tr("Speed")])
        table.horizontalHeaderItem(5).setToolTip(self.tr(
            "Decode speed predicted from the nodes' measured speeds (Fastest in the split editor, or "
            "herd bench). A quant type other than the one measured is estimated per weight, which errs "
            "on the slow side. Not measured yet: open a model and press Fastest once."))
        table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        table.verticalHeader().setVisible(False)
        table.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        return table

    def _lay_out(self, why: QLabel, close: QPushButton) -> None:
        """Hub and search on top, the repositories, the context, the files, progress, buttons."""
        top = QHBoxLayout()
        top.addWidget(QLabel(self.tr("Hub")))
        top.addWidget(self.endpoint, 1)
        search = QHBoxLayout()
        search.addWidget(self.query, 1)
        search.addWidget(self.search_button)
        fit = QHBoxLayout()
        fit.addWidget(QLabel(self.tr("Context")))
        fit.addWidget(self.ctx)
        fit.addWidget(self.fit_note, 1)
        buttons = QHBoxLayout()
        buttons.addWidget(self.saves_to, 1)
        buttons.addWidget(self.download_button)
        buttons.addWidget(self.cancel_button)
        buttons.addWidget(close)
        lay = QVBoxLayout(self)
        lay.addLayout(top)
        lay.addWidget(why)
        lay.addLayout(search)
        lay.addWidget(self.results)
        lay.addLayout(fit)
        lay.addWidget(self.table, 1)
        lay.addWidget(self.status)
        lay.addWidget(self.progress)
        lay.addLayout(buttons)

    def _connect(self, close: QPushButton) -> None:
        """The controls ask the owner (signals) for searches, headers and downloads."""
        self.endpoint.editingFinished.connect(lambda: self.endpointChanged.emit(self.endpoint.text().strip()))
        self.search_button.clicked.connect(self._search)
        self.query.returnPressed.connect(self._search)
        self.results.itemActivated.connect(self._choose)
        self.results.itemClicked.connect(self._choose)
        self.ctx.editingFinished.connect(lambda: self.repo and self.repoChosen.emit(self.repo, self.ctx.value()))
        self.table.itemSelectionChanged.connect(self._update_buttons)
        self.download_button.clicked.connect(self._download)
        self.cancel_button.clicked.connect(self.cancelRequested)
        close.clicked.connect(self.reject)

    # -- intentions ----------------------------------------------------------------------

    def _search(self) -> None:
        self.endpointChanged.emit(self.endpoint.text().strip())
        self.status.setStyleSheet("")
        self.status.setText(self.tr("Searching…"))
        self.searchRequested.emit(self.query.text())

    def _choose(self, item: QListWidgetItem) -> None:
        repo = item.data(Qt.ItemDataRole.UserRole)
        if not repo or self.downloading:
            return
        self.repo = repo
        self.table.setRowCount(0)
        self.status.setStyleSheet("")
        self.status.setText(self.tr("Reading the headers of %1's GGUF files…").replace("%1", repo))
        self.repoChosen.emit(repo, self.ctx.value())

    def selected_row(self) -> int | None:
        """The selected model's row, or None."""
        rows = self.table.selectionModel().selectedRows()
        return rows[0].row() if rows else None

    def _download(self) -> None:
        row = self.selected_row()
        if row is not None:
            self.downloadRequested.emit(row)

    def _update_buttons(self) -> None:
        self.download_button.setEnabled(self.selected_row() is not None and not self.downloading)

    def reject(self) -> None:  # noqa: D401 - Qt override
        """Closing stops a running download (the partial file stays, for resuming)."""
        if self.downloading:
            self.cancelRequested.emit()
        super().reject()

    # -- what the session reports ---------------------------------------------------------

    def show_hits(self, hits) -> None:
        """Fill the list of repositories (``gui.cluster.models.hub.RepoHit``)."""
        self.results.clear()
        for h in hits:
            # one string per number form ("1 download", not "1 downloads")
            words = self.tr("%1 — 1 download") if h.downloads == 1 else self.tr("%1 — %2 downloads")
            item = QListWidgetItem(words.replace("%1", shortened(h.repo)).replace("%2", f"{h.downloads or 0:,}"))
            item.setData(Qt.ItemDataRole.UserRole, h.repo)
            self.results.addItem(item)
        self.status.setText(self.tr("Pick a repository to see its files.") if hits
                            else self.tr("No GGUF repositories match."))

    def show_fits(self, repo: str, fits, suggested: int | None, nodes: list[str]) -> None:
        """Show ``repo``'s models (``gui.cluster.models.hub.FileFit``), mark and select ``suggested``."""
        if repo != self.repo:
            return
        if not self.downloading:  # the headers are read: their bar has done its job
            self.progress.setValue(0)
            self.progress.hide()
        self.suggested = suggested
        where = ", ".join(nodes) if nodes else self.tr("no paired nodes")
        self.fit_note.setText(self.tr("Fit on: %1 and this PC").replace("%1", where))
        self.table.setRowCount(len(fits))
        bold = QFont()
        bold.setBold(True)
        for r, f in enumerate(fits):
            m = f.model
            name = m.name + (self.tr(" (%1 files)").replace("%1", str(len(m.parts))) if m.is_split else "")
            if r == suggested:
                name = "★ " + name
            if f.fits:
                speed = (self.tr("≈ %1 tok/s").replace("%1", f"{f.tokens_per_s:.1f}")
                         if f.tokens_per_s is not None else self.tr("not measured yet"))
            else:
                speed = "–"
            cells = [shortened(name), shortened(m.quant or "?", longest_word=NAME_WORD), f"{m.size / MB:,.1f} MB",
                     self.tr("fits") if f.fits else self.tr("does not fit"), shortened(f.split_text() or "–"), speed]
            for c, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if c == 3:
                    item.setForeground(QBrush(QColor(OK if f.fits else WARN)))
                if f.problem:
                    item.setToolTip(plain_tooltip(f.problem))
                if r == suggested:
                    item.setFont(bold)
                self.table.setItem(r, c, item)
        self.table.resizeColumnsToContents()
        self.table.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        if suggested is not None:
            self.table.selectRow(suggested)
            self.status.setText(self.tr("★ The largest file that fits is selected."))
        else:
            self.table.clearSelection()
            self.status.setText(self.tr("Nothing fits at this context: try a smaller context or add a node."))
        self._update_buttons()

    def show_reading(self, p) -> None:
        """Where reading the chosen repository's headers is (a
        ``gui.cluster.models.hub.HeaderProgress``): which file, n of m, and a bar."""
        if self.downloading:
            return
        self.progress.setVisible(True)
        self.progress.setValue(int(1000 * p.done / p.total) if p.total else 0)
        self.status.setStyleSheet("")
        if not p.finished:  # (a finished one leaves the words on the file still being read)
            self.status.setText(self.tr("Reading the header of %1 (file %2 of %3)…")
                                .replace("%1", p.file).replace("%2", str(max(p.started, 1)))
                                .replace("%3", str(p.total)))

    def set_downloading(self, on: bool) -> None:
        """Lock the choice while a download runs."""
        self.downloading = on
        self.cancel_button.setEnabled(on)
        self.progress.setVisible(on or self.progress.value() > 0)
        self._update_buttons()

    def show_progress(self, p) -> None:
        """A ``gui.cluster.models.hub.DownloadProgress``."""
        self.progress.setVisible(True)
        self.progress.setValue(int(1000 * p.done_bytes / p.total_bytes) if p.total_bytes else 0)
        self.status.setStyleSheet("")
        if p.phase == "verify":
            self.status.setText(self.tr("Checking the SHA-256 of %1…").replace("%1", p.file))
            return
        eta = (self.tr(", %1 s left").replace("%1", f"{p.eta_s:,.0f}") if p.eta_s is not None else "")
        self.status.setText(self.tr("Downloading %1: %2 of %3 MB at %4 MB/s%5")
                            .replace("%1", p.file).replace("%2", f"{p.done_bytes / MB:,.1f}")
                            .replace("%3", f"{p.total_bytes / MB:,.1f}").replace("%4", f"{p.rate_bps / MB:,.1f}")
                            .replace("%5", eta))

    def show_downloaded(self, path: str) -> None:
        """The download finished and was verified."""
        self.progress.setValue(1000)
        self.status.setStyleSheet(f"color: {OK};")
        self.status.setText("✔ " + self.tr("Downloaded and verified: %1. It is open in the split editor.")
                            .replace("%1", path))

    def show_cancelled(self) -> None:
        """The download was stopped; it resumes where it stopped next time."""
        self.status.setStyleSheet("")
        self.status.setText(self.tr("Download stopped. Download again to resume where it stopped."))

    def show_error(self, message: str) -> None:
        """Say what went wrong."""
        self.status.setStyleSheet(f"color: {WARN};")
        self.status.setText(message)
