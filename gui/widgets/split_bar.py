"""The layer-split bar: every layer slot of the model, coloured by the device that holds it.

Slots run left to right as llama.cpp assigns them: the host's leading slots first, then each
device in llama.cpp's device order; the last slot is the output layer. Between two neighbouring
segments sits a handle. Dragging a handle with the mouse (or pressing Left/Right while it has
focus) moves the boundary one slot at a time; dragging a segment's body onto another segment
swaps their order. The bar only shows counts and reports what the user asked for; the editor
around it turns that into a plan.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QPointF, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFont, QFontMetrics, QKeyEvent, QMouseEvent, QPainter, QPainterPath, QPen
from PySide6.QtWidgets import QSizePolicy, QToolTip, QWidget

#: Segment colours, chosen to stay distinguishable in light and dark themes.
PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#edc948", "#76b7b2", "#ff9da7", "#9c755f"]
HOST_COLOR = "#8c8c8c"


@dataclass
class Segment:
    """One run of contiguous slots on one device (or the host)."""

    label: str
    count: int
    color: str


class SplitBar(QWidget):
    """A horizontal bar of layer slots with draggable boundaries.

    Signals:
        countsChanged(list): the new slot count per segment (host first) while the user edits.
        editFinished(): a drag or key press ended — the moment to record an undo step.
        reorderRequested(int, int): the user dragged device segment *a* onto device segment *b*
            (indices among the devices, host excluded).

    Attributes:
        handle_px: half-width of the grab zone around a handle, in pixels.
    """

    countsChanged = Signal(list)
    editFinished = Signal()
    reorderRequested = Signal(int, int)

    handle_px = 7
    margin = 10

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._segments: list[Segment] = []
        self._output_marked = True
        self._drag_handle: int | None = None
        self._drag_segment: int | None = None
        self._drag_stack: list[int] = []
        self._focused_handle = 0
        self._changed_during_drag = False
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.setMouseTracking(True)
        self.setMinimumHeight(64)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setAccessibleName(self.tr("Layer split"))

    # ------------------------------------------------------------------ state

    def set_segments(self, segments: list[Segment]) -> None:
        """Show these segments (host first). Does not emit ``countsChanged``."""
        self._segments = [Segment(s.label, s.count, s.color) for s in segments]
        self._focused_handle = min(self._focused_handle, max(0, self.handle_count() - 1))
        self.update()

    def segments(self) -> list[Segment]:
        """The segments shown, host first."""
        return list(self._segments)

    def counts(self) -> list[int]:
        """Slot count per segment, host first."""
        return [s.count for s in self._segments]

    def total_slots(self) -> int:
        """All layer slots (blocks + output layer)."""
        return sum(s.count for s in self._segments)

    def handle_count(self) -> int:
        """Boundaries the user can move: one between each pair of neighbouring segments."""
        return max(0, len(self._segments) - 1)

    def focused_handle(self) -> int:
        """Index of the handle that Left/Right move."""
        return self._focused_handle

    def set_focused_handle(self, index: int) -> None:
        """Give keyboard focus to handle ``index``."""
        if self.handle_count():
            self._focused_handle = max(0, min(index, self.handle_count() - 1))
            self.update()

    def handle_slot(self, index: int) -> int:
        """The slot boundary (0…total) where handle ``index`` sits."""
        return sum(s.count for s in self._segments[: index + 1])

    # ------------------------------------------------------------- geometry

    def _bar_rect(self) -> QRectF:
        return QRectF(self.margin, 18, max(1, self.width() - 2 * self.margin), max(10, self.height() - 30))

    def slot_x(self, boundary: int) -> float:
        """X coordinate of slot boundary ``boundary`` (0 = left edge of the bar)."""
        r = self._bar_rect()
        n = max(1, self.total_slots())
        return r.left() + r.width() * boundary / n

    def handle_pos(self, index: int) -> QPointF:
        """Centre of handle ``index`` in widget coordinates (for tests and tooltips)."""
        r = self._bar_rect()
        return QPointF(self.slot_x(self.handle_slot(index)), r.center().y())

    def segment_center(self, index: int) -> QPointF:
        """Centre of segment ``index`` (host = 0) in widget coordinates."""
        start = sum(s.count for s in self._segments[:index])
        end = start + self._segments[index].count
        return QPointF((self.slot_x(start) + self.slot_x(end)) / 2, self._bar_rect().center().y())

    def _boundary_at(self, x: float) -> int:
        r = self._bar_rect()
        n = max(1, self.total_slots())
        return max(0, min(n, round((x - r.left()) / r.width() * n)))

    def _handle_at(self, pos: QPointF) -> int | None:
        stacked = self._handles_at(pos)
        return stacked[-1] if stacked else None

    def _handles_at(self, pos: QPointF) -> list[int]:
        """The handles under ``pos``: several when segments between them are empty (stacked)."""
        best, best_d = None, self.handle_px + 1.0
        for i in range(self.handle_count()):
            d = abs(self.slot_x(self.handle_slot(i)) - pos.x())
            if d < best_d:
                best, best_d = i, d
        if best is None:
            return []
        slot = self.handle_slot(best)
        return [i for i in range(self.handle_count()) if self.handle_slot(i) == slot]

    def _stacked_with(self, index: int) -> list[int]:
        slot = self.handle_slot(index)
        return [i for i in range(self.handle_count()) if self.handle_slot(i) == slot]

    def _movable(self, candidates: list[int], step: int) -> int | None:
        """Of handles stacked at one boundary, the one that can move in direction ``step``.

        Moving left needs slots on the handle's left, moving right slots on its right; of a
        stack, only the first handle can have the former and only the last the latter (the
        segments between them are empty). Without this, the first drag on a bar whose devices
        all start empty picked a handle that cannot move (#17)."""
        if not candidates:
            return None
        h = candidates[0] if step < 0 else candidates[-1]
        seg = self._segments[h] if step < 0 else self._segments[h + 1]
        return h if seg.count > 0 else None

    def _segment_at(self, pos: QPointF) -> int | None:
        edge = 0
        for i, s in enumerate(self._segments):
            if self.slot_x(edge) <= pos.x() < self.slot_x(edge + s.count):
                return i
            edge += s.count
        return None

    # ---------------------------------------------------------------- edits

    def move_handle(self, index: int, boundary: int) -> bool:
        """Move handle ``index`` to slot boundary ``boundary`` (clamped); True if it moved."""
        if not (0 <= index < self.handle_count()):
            return False
        lo = sum(s.count for s in self._segments[:index])
        hi = lo + self._segments[index].count + self._segments[index + 1].count
        boundary = max(lo, min(hi, boundary))
        left = boundary - lo
        if left == self._segments[index].count:
            return False
        self._segments[index + 1].count = hi - lo - left
        self._segments[index].count = left
        self.update()
        self.countsChanged.emit(self.counts())
        return True

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt override
        if event.button() != Qt.MouseButton.LeftButton:
            return super().mousePressEvent(event)
        pos = event.position()
        stacked = self._handles_at(pos)
        self._changed_during_drag = False
        self._drag_stack = stacked
        if stacked:
            # Which of stacked handles moves is decided by the drag's direction (mouseMoveEvent).
            self._drag_handle = stacked[-1]
            self.set_focused_handle(stacked[-1])
        else:
            seg = self._segment_at(pos)
            # The host segment cannot be reordered: llama.cpp always keeps it first.
            self._drag_segment = seg if seg not in (None, 0) else None
        event.accept()

    def mouseMoveEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt override
        pos = event.position()
        if self._drag_handle is not None:
            target = self._boundary_at(pos.x())
            if len(self._drag_stack) > 1:
                here = self.handle_slot(self._drag_stack[0])
                h = self._movable(self._drag_stack, -1 if target < here else 1) if target != here else None
                if h is None:
                    event.accept()
                    return
                self._drag_handle, self._drag_stack = h, [h]
                self.set_focused_handle(h)
            if self.move_handle(self._drag_handle, target):
                self._changed_during_drag = True
        else:
            over_handle = self._handle_at(pos) is not None
            self.setCursor(Qt.CursorShape.SplitHCursor if over_handle else Qt.CursorShape.ArrowCursor)
            seg = self._segment_at(pos)
            if seg is not None and event.buttons() == Qt.MouseButton.NoButton:
                s = self._segments[seg]
                QToolTip.showText(event.globalPosition().toPoint(),
                                  self.tr("%1: %2 layer slot(s)").replace("%1", s.label).replace("%2", str(s.count)), self)
        event.accept()

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt override
        if self._drag_handle is not None:
            self._drag_handle = None
            if self._changed_during_drag:
                self.editFinished.emit()
        elif self._drag_segment is not None:
            target = self._segment_at(event.position())
            src, self._drag_segment = self._drag_segment, None
            if target not in (None, 0, src):
                self.reorderRequested.emit(src - 1, target - 1)
        event.accept()

    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: N802 - Qt override
        key = event.key()
        if key in (Qt.Key.Key_Left, Qt.Key.Key_Right) and self.handle_count():
            step = -1 if key == Qt.Key.Key_Left else 1
            # of handles stacked with the focused one, the one that can go that way (#17)
            h = self._movable(self._stacked_with(self._focused_handle), step)
            if h is None:
                h = self._focused_handle
            elif h != self._focused_handle:
                self.set_focused_handle(h)
            if self.move_handle(h, self.handle_slot(h) + step):
                self.editFinished.emit()
            event.accept()
            return
        if key in (Qt.Key.Key_Up, Qt.Key.Key_Down) and self.handle_count():
            self.set_focused_handle(self._focused_handle + (1 if key == Qt.Key.Key_Down else -1))
            event.accept()
            return
        super().keyPressEvent(event)

    # ---------------------------------------------------------------- paint

    def separator_xs(self, edge: int, count: int, label_rect: QRectF) -> list[float]:
        """Where the lines between the ``count`` slots from slot ``edge`` on are drawn: at every
        inner slot boundary outside ``label_rect`` (the segment's label)."""
        xs = (self.slot_x(edge + k) for k in range(1, count))
        return [x for x in xs if not (label_rect.left() <= x <= label_rect.right())]

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt override
        return QSize(600, 72)

    def paintEvent(self, event) -> None:  # noqa: N802 - Qt override
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        r = self._bar_rect()
        n = self.total_slots()
        pal = self.palette()
        text_color = pal.windowText().color()
        if n == 0:
            p.setPen(text_color)
            p.drawText(r, Qt.AlignmentFlag.AlignCenter, self.tr("Open a model to see its layers"))
            return
        small = QFont(self.font())
        small.setPointSizeF(max(6.0, small.pointSizeF() * 0.85))
        fm = QFontMetrics(small)
        edge = 0
        for s in self._segments:
            if s.count:
                x0, x1 = self.slot_x(edge), self.slot_x(edge + s.count)
                seg_rect = QRectF(x0, r.top(), x1 - x0, r.height())
                p.fillRect(seg_rect, QColor(s.color))
                label = f"{s.label} · {s.count}"
                if fm.horizontalAdvance(label) > seg_rect.width() - 4:
                    label = str(s.count)
                # thin slot separators so single layers stay countable — but not through the
                # label, which they made hard to read (#17)
                half = fm.horizontalAdvance(label) / 2 + 3
                text_rect = QRectF(seg_rect.center().x() - half, r.top(), 2 * half, r.height())
                p.setPen(QPen(QColor(255, 255, 255, 90), 1))
                for x in self.separator_xs(edge, s.count, text_rect):
                    p.drawLine(QPointF(x, r.top() + 3), QPointF(x, r.bottom() - 3))
                p.setFont(small)
                p.setPen(QColor("white"))
                p.drawText(seg_rect, Qt.AlignmentFlag.AlignCenter, label)
            edge += s.count
        # output layer: the last slot, outlined and labelled above the bar
        x_out = self.slot_x(n - 1)
        out_rect = QRectF(x_out, r.top(), self.slot_x(n) - x_out, r.height())
        p.setPen(QPen(text_color, 2, Qt.PenStyle.DotLine))
        p.setBrush(Qt.BrushStyle.NoBrush)
        p.drawRect(out_rect.adjusted(1, 1, -1, -1))
        p.setFont(small)
        p.setPen(text_color)
        p.drawText(QRectF(out_rect.right() - 80, 0, 80, r.top()),
                   Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, self.tr("output ▾"))
        p.drawText(QRectF(r.left(), 0, 120, r.top()),
                   Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, self.tr("▾ layer 0"))
        # handles
        for i in range(self.handle_count()):
            x = self.slot_x(self.handle_slot(i))
            focused = self.hasFocus() and i == self._focused_handle
            path = QPainterPath()
            path.addRoundedRect(QRectF(x - 4, r.top() - 4, 8, r.height() + 8), 3, 3)
            p.setPen(QPen(pal.highlight().color() if focused else text_color, 2 if focused else 1))
            p.setBrush(pal.base())
            p.drawPath(path)
        p.end()
