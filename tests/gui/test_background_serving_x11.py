"""The close-window choice and the tray menu in the real window on a real X server (#36 item 1):
scripts/tray_screenshots.py closes the window as a window manager does (WM_DELETE_WINDOW), keeps
the cluster serving, and uses the tray's menu, with real agents and llama-server. Xvfb has no
tray host, so the script treats the desktop as one with a tray (see its docstring)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtGui import QImage

pytestmark = [pytest.mark.engine, pytest.mark.slow]
SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "tray_screenshots.py"


def test_close_choice_and_tray_menu_on_x11(x_display, engine, tmp_path):
    env = dict(os.environ, DISPLAY=x_display, QT_QPA_PLATFORM="xcb")
    run = subprocess.run([sys.executable, str(SCRIPT), "--one", "en", "--out", str(tmp_path)], env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    seen = json.loads(next(line for line in run.stdout.splitlines() if line.startswith("{")))
    assert seen["platform"] == "xcb"
    assert sorted(seen["buttons"]) == ["Cancel", "Keep serving in the background", "Stop and quit"]
    assert seen["hidden_while_serving"] and seen["stopped"]
    assert seen["tray_items"][0].startswith("Serving ") and "tokens/s" in seen["tray_items"][0]
    assert seen["tray_items"][-3:] == ["Open", "Stop cluster", "Quit"]
    for name in ("en-close-choice.png", "en-tray-menu.png"):
        image = QImage(str(tmp_path / name))
        assert not image.isNull() and image.width() > 100
        # the X server drew something: not one flat colour
        assert len({image.pixel(x, y) for x in range(0, image.width(), 7) for y in range(0, image.height(), 7)}) > 5
