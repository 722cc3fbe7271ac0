"""The dashboard's line on speculation (#35): how many drafted tokens the cluster accepted over
the replies so far, and the last reply's effective tokens/s (accepted drafts included)."""

from __future__ import annotations

from collections.abc import Mapping

from PySide6.QtWidgets import QLabel, QWidget

from gui.cluster.planning.speculation import ReplyDrafts


class AcceptanceLine(QLabel):
    """A line that stays hidden until a reply drafted, then counts the drafts of every reply.

    Attributes:
        drafted: tokens drafted over the replies so far (``draft_n``).
        accepted: of them, accepted (``draft_n_accepted``).
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.drafted = 0
        self.accepted = 0
        self.setWordWrap(True)
        self.hide()

    def add_reply(self, timings: Mapping) -> None:
        """A finished reply's final ``timings``: counted and said when it drafted."""
        drafts = ReplyDrafts.of(timings)
        if drafts is None:
            return
        self.drafted += drafts.drafted
        self.accepted += drafts.accepted
        text = self.tr("Speculation: %1 % of drafted tokens accepted (%2 of %3).").replace(
            "%1", f"{100 * self.accepted / self.drafted:.0f}").replace("%2", f"{self.accepted:,}").replace(
            "%3", f"{self.drafted:,}")
        if drafts.tokens_per_s is not None:
            text += " " + self.tr("Last reply: %1 tokens/s effective.").replace("%1", f"{drafts.tokens_per_s:.1f}")
        self.setText(text)
        self.show()
