"""*Who uses the cluster* (#34 item 6): the front door's counts per key, as a small table.

One row per key name (the app and other programs on this PC as *This PC*): requests, tokens
read and generated, the recent tokens/s and what waits in the queue now. The rows come from
:meth:`gui.cluster.serving.usage.UsageTable.snapshot`, carried by ``usage`` telemetry samples;
the dashboard shows them when it redraws its graphs. Hidden while the endpoint is not shared
(no front door counts anything then).
"""

from __future__ import annotations

from PySide6.QtWidgets import QAbstractItemView, QGroupBox, QHeaderView, QTableWidget, QTableWidgetItem, QVBoxLayout

from gui.cluster.serving.usage import THIS_PC


class UsageTableView(QGroupBox):
    """The box *Who uses the cluster* and its table.

    Attributes:
        table: the ``QTableWidget``: key, requests, tokens in, tokens out, tok/s, waiting.
        rows: the last rows shown (``KeyUsage`` of the core), in their order.
    """

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setTitle(self.tr("Who uses the cluster"))
        self.rows: list = []
        self.table = QTableWidget(0, 6)
        self.table.setHorizontalHeaderLabels([self.tr("Key"), self.tr("Requests"), self.tr("Tokens in"),
                                              self.tr("Tokens out"), self.tr("tok/s"), self.tr("Waiting")])
        self.table.verticalHeader().hide()
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        QVBoxLayout(self).addWidget(self.table)
        self.hide()

    def show_rows(self, rows) -> None:
        """Show ``rows`` (a usage snapshot); the table appears with its first row."""
        self.rows = list(rows)
        table = self.table
        table.setRowCount(len(self.rows))
        for r, row in enumerate(self.rows):
            # waiting: in the queue now (its requests being answered now in brackets, when any)
            waiting = (self.tr("{waiting} (+{busy} answered now)").format(waiting=row.waiting, busy=row.in_flight)
                       if row.in_flight else str(row.waiting))
            speed = "–" if row.tokens_per_s is None else f"{row.tokens_per_s:.1f}"
            cells = [self.tr("This PC") if row.name == THIS_PC else row.name, str(row.requests),
                     str(row.prompt_tokens), str(row.generated_tokens), speed, waiting]
            for c, text in enumerate(cells):
                item = table.item(r, c)
                if item is None:
                    table.setItem(r, c, QTableWidgetItem(text))
                elif item.text() != text:
                    item.setText(text)
        # as high as its rows (a household has a few keys), never a scrolling box in a scrolling page
        height = table.horizontalHeader().sizeHint().height() + sum(table.rowHeight(r) for r in range(len(self.rows)))
        table.setFixedHeight(height + 2 * table.frameWidth())
        self.setVisible(bool(self.rows))

    def text_at(self, row: int, column: int) -> str:
        """What the user reads in one cell."""
        item = self.table.item(row, column)
        return item.text() if item is not None else ""
