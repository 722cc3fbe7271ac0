"""The next step, said on screen: open a model → *Launch* ▸ *Start* → *Chat* (#37).

A new user (``herd demo`` especially) met a window on the *Split* tab with nothing running and
nothing saying what comes next. :class:`NextStep` is one line beside the tabs that names the
step ahead; its link goes to the tab where that step is taken. The window says which step it is
(:meth:`NextStep.show_step`), from the workspace and the launch's state.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QLabel

#: The steps, in the order a first run takes them.
OPEN_MODEL, READING, START, STARTING, CHAT = "open-model", "reading", "start", "starting", "chat"
#: The tab each step's link goes to (the window maps the names to its tabs).
STEP_TAB = {START: "launch", CHAT: "chat", OPEN_MODEL: "", READING: "", STARTING: "launch"}


class NextStep(QLabel):
    """One line that says what to do next, with a link to the tab where it is done.

    Signals:
        tabRequested(str): the link was clicked: ``"launch"`` or ``"chat"``.

    Attributes:
        step: the step shown (one of the constants above), or "" before the first.
    """

    tabRequested = Signal(str)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.step = ""
        self.setTextFormat(Qt.TextFormat.RichText)  # (only our own words and a link, no outside text)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.LinksAccessibleByMouse
                                     | Qt.TextInteractionFlag.LinksAccessibleByKeyboard)
        self.setContentsMargins(8, 0, 8, 0)
        self.linkActivated.connect(self.tabRequested)

    def show_step(self, step: str) -> None:
        """Say ``step`` (one of :data:`OPEN_MODEL`, :data:`READING`, :data:`START`,
        :data:`STARTING`, :data:`CHAT`)."""
        if step == self.step:
            return
        self.step = step
        launch = '<a href="launch">' + self.tr("Launch ▸ Start") + "</a>"
        chat = '<a href="chat">' + self.tr("Chat") + "</a>"
        words = {
            OPEN_MODEL: self.tr("Next: open a model (Open model…, or one under On this PC)."),
            READING: self.tr("Reading the model; its split appears on the Split tab."),
            START: self.tr("Next: %1, then %2.").replace("%1", launch).replace("%2", chat),
            STARTING: self.tr("Starting the cluster; %1 opens once it is ready.").replace("%1", chat),
            CHAT: self.tr("Running. Next: ask something in %1.").replace("%1", chat),
        }
        self.setText(words.get(step, ""))
        self.setToolTip(self.tr("The steps of a first run: open a model, Launch ▸ Start, then Chat."))
