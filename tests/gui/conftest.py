"""Fixtures for the desktop app's tests: a bridge per test, and no QThread left behind.

Like napari's ``_dangling_qthreads``: every QThread started during a test must have finished
by its end, or the test fails naming the thread.
"""

from __future__ import annotations

import pytest
from PySide6.QtCore import QThread

_started: list[QThread] = []
_original_start = QThread.start


def _recording_start(self, *args, **kwargs):
    _started.append(self)
    return _original_start(self, *args, **kwargs)


QThread.start = _recording_start


@pytest.fixture(autouse=True)
def no_dangling_qthreads(qapp):
    """Fail a test that leaves a QThread running."""
    _started.clear()
    yield _started
    running = []
    for t in _started:
        try:
            if t.isRunning():
                running.append(t.objectName() or type(t).__name__)
        except RuntimeError:  # the C++ object is gone, so the thread is too
            pass
    _started.clear()
    if running:
        pytest.fail(f"QThread(s) still running after the test: {', '.join(running)}")


@pytest.fixture
def bridge(qapp):
    """A started :class:`gui.bridge.AsyncBridge`, closed (and its thread joined) afterwards."""
    from gui.bridge import AsyncBridge

    b = AsyncBridge()
    yield b
    b.close()
