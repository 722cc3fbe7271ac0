"""Run as a program (``python window_on_screen.py MODEL SETTINGS.ini``) under a Qt platform whose screen size
the caller chose (``QT_QPA_PLATFORM=offscreen:configfile=…``): opens the main window the way
``herd`` does on a first start (no saved geometry), opens ``MODEL`` on the Split tab, and prints
as JSON where the window and its command-line box are against the screen's free area.
"""

from __future__ import annotations

import json
import sys

from PySide6.QtCore import QEvent, QPoint
from PySide6.QtWidgets import QApplication


def main(model: str, settings_file: str) -> int:
    from agent.engine_lookup import find_engine
    from gui.app import MainWindow
    from gui.bridge import AsyncBridge
    from gui.session import ClusterSession
    from gui.settings import Settings

    app = QApplication(sys.argv[:1])
    settings = Settings(settings_file)  # a file of its own: a first start
    bridge = AsyncBridge()
    session = ClusterSession(bridge, interfaces=["127.0.0.1"], browse=False)
    win = MainWindow(settings, bridge=bridge, session=session, engine=find_engine(probe=False))
    win.show()
    assert win.open_model(model)
    win.tabs.setCurrentWidget(win.editor)
    for _ in range(5):
        QApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)
        app.processEvents()
    avail = win.screen().availableGeometry()
    frame = win.frameGeometry()
    box = win.editor.command
    top_left = box.mapToGlobal(QPoint(0, 0))
    print(json.dumps({
        "screen": [avail.x(), avail.y(), avail.width(), avail.height()],
        "window": [frame.x(), frame.y(), frame.width(), frame.height()],
        "size": [win.width(), win.height()],
        "command": [top_left.x(), top_left.y(), box.width(), box.height()],
        "command_visible": box.isVisible(),
        "minimum": [win.minimumSizeHint().width(), win.minimumSizeHint().height()],
    }))
    win.close()
    bridge.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
