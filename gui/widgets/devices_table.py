"""The split editor's table: one row per holder of layers (the host first), what it holds, what
it needs against what it has free, and the tick boxes that leave a device out or keep a GPU's
experts in its PC's RAM.

The table only shows a :class:`~gui.cluster.planning.split_model.SplitModel` and reports the
ticks the user changes (:attr:`DevicesTable.useToggled`, :attr:`DevicesTable.expertsToggled`); the
split editor turns them into edits of the model.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableWidget, QTableWidgetItem, QWidget

from gui.cluster.planning.plan import Device, DeviceFit, Plan, slot_span
from gui.cluster.planning.split_model import SplitModel
from gui.widgets.outside_text import plain_tooltip

MiB = 1 << 20
BAD = QColor("#d62728")


def mib_text(n: int | None) -> str:
    """Bytes as MiB, or as GiB from 1 GiB on; "?" when not known."""
    if n is None:
        return "?"
    # GiB from 1 GiB on, as the free memory beside it ("9,768.1 MiB" next to "22.66 GiB", #17)
    return f"{n / MiB:,.1f} MiB" if n < 1024 * MiB else f"{n / (1 << 30):,.2f} GiB"


class DevicesTable(QTableWidget):
    """Per-holder rows: use, device, slots, layers, needs, free, fit, experts.

    Signals:
        useToggled(str, bool): the user ticked (True) or unticked a device's *Use* box.
        expertsToggled(str, bool): the user ticked or unticked a GPU's *Experts in RAM* box.
    """

    useToggled = Signal(str, bool)
    expertsToggled = Signal(str, bool)

    #: the column of the "experts in RAM" choice (shown for mixture-of-experts models only)
    EXPERTS_COLUMN = 7

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(0, 8, parent)
        self._row_order: list[str] = []  # device keys in the order their rows first appeared
        self._filling = False
        self.setHorizontalHeaderLabels([self.tr("Use"), self.tr("Device"), self.tr("Slots"), self.tr("Layers"),
                                        self.tr("Needs"), self.tr("Free"), self.tr("Fit"), self.tr("Experts")])
        self.horizontalHeaderItem(self.EXPERTS_COLUMN).setToolTip(self.tr(
            "A mixture-of-experts model: tick a GPU to keep its layers' experts in its PC's RAM. The GPU "
            "keeps attention and the shared tensors; a token reads only a few experts, so RAM serves "
            "them well and the GPU's memory holds more layers. The tensors between the two pass through "
            "this computer: ten round trips to that PC per layer and token, so it suits a wired network."))
        self.verticalHeader().setVisible(False)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.horizontalHeader().setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        self.itemChanged.connect(self._on_item_changed)

    def show_split(self, split: SplitModel) -> None:
        """Show ``split``'s devices: the planned ones with their fit, the left-out ones greyed."""
        self._filling = True
        try:
            rows = self._rows(split)
            self.setRowCount(len(rows))
            for r, (dev, fit) in enumerate(rows):
                self._fill_row(r, dev, fit, split)
            model = split.model
            self.setColumnHidden(self.EXPERTS_COLUMN, model is None or not model.is_moe)
            self.resizeColumnsToContents()
            self.horizontalHeader().setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        finally:
            self._filling = False

    def _rows(self, split: SplitModel) -> list[tuple[Device | None, DeviceFit | None]]:
        """The host's row, then each device's, each in the place where it first appeared."""
        fits, excluded = split.fits, split.excluded
        rows: list[tuple] = []
        if fits:
            rows.append((None, fits[-1]))
        planned = {f.device.key for f in fits[:-1]} if fits else set()
        devs = ([(f.device, f) for f in fits[:-1]] if fits else []) + \
            [(d, None) for d in split.devices if d.key in excluded and d.key not in planned]
        # Each device keeps its row, ticked or not: unticking one moved its row (and the next
        # one under the mouse) to the end of the table (#17).
        for d, _ in devs:
            if d.key not in self._row_order:
                self._row_order.append(d.key)
        return rows + sorted(devs, key=lambda r: self._row_order.index(r[0].key))

    def _fill_row(self, r: int, dev: Device | None, fit: DeviceFit | None, split: SplitModel) -> None:
        use = QTableWidgetItem()
        if dev is not None:
            use.setFlags(Qt.ItemFlag.ItemIsUserCheckable | Qt.ItemFlag.ItemIsEnabled)
            use.setCheckState(Qt.CheckState.Unchecked if dev.key in split.excluded else Qt.CheckState.Checked)
            use.setData(Qt.ItemDataRole.UserRole, dev.key)
            use.setToolTip(self.tr("Untick to leave this device out"))
        else:
            use.setFlags(Qt.ItemFlag.ItemIsEnabled)
        self.setItem(r, 0, use)
        name = self.tr("host CPU") if dev is None else dev.label
        if dev is not None and dev.endpoint:
            name += f"  ({dev.endpoint})"
        cells = [name]
        if fit is not None:
            s = fit.slots
            layers = slot_span(s, empty="–")
            if s and split.model is not None and split.model.n_layer in s:
                layers += " " + self.tr("+ output")
            verdict = self.tr("fits") if fit.fits else \
                self.tr("short by %1").replace("%1", mib_text(fit.short_by_bytes))
            cells += [str(len(s)), layers, mib_text(fit.need_bytes), mib_text(fit.free_bytes), verdict]
        else:
            cells += ["0", self.tr("left out"), "–", mib_text(dev.free_bytes if dev else None), ""]
        for c, text in enumerate(cells, start=1):
            item = QTableWidgetItem(text)
            if c >= 2:
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            if fit is not None and not fit.fits:
                item.setForeground(QBrush(BAD))
                item.setToolTip(plain_tooltip(fit.describe()))
            self.setItem(r, c, item)
        self.setItem(r, self.EXPERTS_COLUMN, self._experts_item(dev, split))

    def _experts_item(self, dev: Device | None, split: SplitModel) -> QTableWidgetItem:
        """The "Experts" cell of ``dev``'s row: a tick box on a GPU that can keep its experts in
        its PC's RAM, what a CPU device holds for its GPU, else nothing."""
        item = QTableWidgetItem()
        item.setFlags(Qt.ItemFlag.ItemIsEnabled)
        plan: Plan | None = split.plan
        if dev is None or plan is None:
            return item
        if split.can_keep_experts_in_ram(dev.key):
            item.setFlags(Qt.ItemFlag.ItemIsUserCheckable | Qt.ItemFlag.ItemIsEnabled)
            item.setCheckState(Qt.CheckState.Checked if dev.key in split.experts_in_ram
                               else Qt.CheckState.Unchecked)
            item.setData(Qt.ItemDataRole.UserRole, dev.key)
            item.setText(self.tr("in RAM"))
            item.setToolTip(self.tr("Keep this GPU's experts in its PC's RAM (its CPU device)"))
        for h, k, blocks in plan.expert_moves():
            if plan.assignments[k].device.key == dev.key:
                item.setText(self.tr("of layers %1").replace("%1", slot_span(blocks)))
                item.setToolTip(plain_tooltip(self.tr("Holds the experts of %1's layers").replace(
                    "%1", plan.assignments[h].device.label)))
        return item

    def _on_item_changed(self, item: QTableWidgetItem) -> None:
        if item.column() not in (0, self.EXPERTS_COLUMN) or self._filling:
            return
        key = item.data(Qt.ItemDataRole.UserRole)
        if not key:
            return
        ticked = item.checkState() == Qt.CheckState.Checked
        (self.expertsToggled if item.column() == self.EXPERTS_COLUMN else self.useToggled).emit(key, ticked)
