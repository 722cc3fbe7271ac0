"""Opening a model never blocks the window: the GGUF is read off the GUI thread.

A model's header reads in well under a second since the bounded reader (#37, item 11; Gemma 3
270M took seconds before), but a read can still take long: a model on a network share or a
disk that is waking up. These tests read the longest header the reader accepts (32 MiB of
string lengths to walk), held at its start until the test lets it go — a stand-in for a slow
disk, which cannot be had here. While it is read the window keeps handling events, the model
panel names the file, a model chosen meanwhile wins, and closing herd does not wait for it.
"""

from __future__ import annotations

import threading
import time

import pytest
from PySide6.QtCore import QTimer

from cluster.padded_gguf import write_padded_model
from gui.cluster.llama import model as model_module
from gui.cluster.llama.gguf_header import MAX_HEADER_BYTES

#: Empty strings that fill the slow model's header up to (nearly) the reader's cap.
SLOW_HEADER_STRINGS = (MAX_HEADER_BYTES // 8) - (1 << 16)

#: Run as ``python -c`` before herd's own main: every model read waits for ever, as on a disk
#: that never answers (herd must close all the same).
NEVER_ANSWERING_DISK = """
import runpy, threading
import gui.cluster.llama.model as model_module
model_module.read_header = lambda path, *args, **kwargs: threading.Event().wait()
runpy.run_module("gui.main", run_name="__main__")
"""


@pytest.fixture(scope="module")
def slow_model(tmp_path_factory):
    """A model whose header is as long as the reader accepts."""
    return write_padded_model(tmp_path_factory.mktemp("slow") / "slow-header.gguf", SLOW_HEADER_STRINGS)


class SlowDisk:
    """Reads of ``path`` wait at their start until :meth:`release` (a slow disk's stand-in)."""

    def __init__(self, path) -> None:
        self.path = str(path)
        self.released = threading.Event()
        self.waiting = threading.Event()
        self._read = model_module.read_header

    def read_header(self, path, *args, **kwargs):
        if str(path) == self.path:
            self.waiting.set()
            self.released.wait(120)
        return self._read(path, *args, **kwargs)

    def release(self) -> None:
        self.released.set()


@pytest.fixture
def slow_disk(monkeypatch, slow_model):
    disk = SlowDisk(slow_model)
    monkeypatch.setattr(model_module, "read_header", disk.read_header)
    yield disk
    disk.release()  # a read still held ends before the next test


class StallMeter:
    """The GUI thread's worst stall: a 10 ms timer records the largest gap between its ticks."""

    def __init__(self) -> None:
        self.worst = 0.0
        self.ticks = 0
        self._last = time.perf_counter()
        self._timer = QTimer()
        self._timer.setInterval(10)
        self._timer.timeout.connect(self._tick)

    def _tick(self) -> None:
        now = time.perf_counter()
        self.worst = max(self.worst, now - self._last)
        self._last = now
        self.ticks += 1

    def __enter__(self) -> StallMeter:
        self._last = time.perf_counter()
        self._timer.start()
        return self

    def __exit__(self, *exc) -> None:
        self._timer.stop()


def pick_recent(win, path) -> None:
    """Choose ``path`` from the model panel's Recent models list, as a person does."""
    box = win.model_panel.recent
    index = box.findData(str(path))
    assert index >= 0, [box.itemData(i) for i in range(box.count())]
    box.setCurrentIndex(index)
    box.activated.emit(index)  # what a click on the entry in the opened list emits


def test_a_model_that_reads_slowly_opens_while_the_window_stays_responsive(qtbot, make_window, slow_model,
                                                                           slow_disk):
    win = make_window(browse=False, **{"model/recent": [str(slow_model)]})
    win.model_panel.set_recent(win.settings.get("model/recent"))
    with StallMeter() as meter:
        started = time.perf_counter()
        pick_recent(win, slow_model)
        # more than a moment: the panel names the file with a busy bar
        qtbot.waitUntil(lambda: win.model_panel.busy.isVisible(), timeout=5000)
        assert slow_model.name in win.model_panel.reading.text()
        # the other controls answer meanwhile: the tabs switch, the Open button is there to use
        win.tabs.setCurrentIndex(1)
        assert win.tabs.currentWidget() is win.launch
        assert win.model_panel.open_button.isEnabled()
        slow_disk.release()  # the disk answers; the longest header there is is walked
        qtbot.waitUntil(lambda: win.model is not None, timeout=180000)
        reading = time.perf_counter() - started
    assert win.model.path == slow_model and win.model.architecture == "llama"
    assert not win.model_panel.busy.isVisible()
    assert slow_model.name in win.model_panel.info.text()
    # The window never stopped for the read (read on the GUI thread, the worst stall would be
    # all of it).
    print(f"\nread {reading:.2f} s, the window's worst stall {meter.worst * 1000:.0f} ms")
    assert meter.worst < reading / 2, (meter.worst, reading)


def test_a_model_chosen_while_another_is_read_wins(qtbot, make_window, slow_model, demo_model, slow_disk):
    win = make_window(browse=False, **{"model/recent": [str(slow_model), str(demo_model)]})
    win.model_panel.set_recent(win.settings.get("model/recent"))
    pick_recent(win, slow_model)
    slow, ended = win.models.newest_read, []
    slow.done.connect(lambda: ended.append(slow.future.result()))  # (delivered queued: never missed)
    pick_recent(win, demo_model)  # changed my mind while the large one is read
    qtbot.waitUntil(lambda: win.model is not None, timeout=60000)
    assert win.model.path == demo_model
    # the large one finishes later (its result reaches the window) and is dropped: the model
    # chosen last stays open
    slow_disk.release()
    qtbot.waitUntil(lambda: bool(ended), timeout=180000)
    assert ended[0].path == slow_model
    assert win.model.path == demo_model
    assert win.settings.get("model/last") == str(demo_model)
    assert demo_model.name in win.model_panel.info.text() and not win.model_panel.busy.isVisible()


def test_an_unreadable_model_says_why_and_keeps_the_open_one(qtbot, make_window, demo_model, tmp_path):
    bad = tmp_path / "not-a-model.gguf"
    bad.write_bytes(b"not a gguf at all")
    win = make_window(browse=False, **{"model/recent": [str(demo_model), str(bad)]})
    win.model_panel.set_recent(win.settings.get("model/recent"))
    pick_recent(win, demo_model)
    qtbot.waitUntil(lambda: win.model is not None, timeout=60000)
    pick_recent(win, bad)
    qtbot.waitUntil(lambda: "Cannot use not-a-model.gguf" in win.model_panel.info.text(), timeout=60000)
    assert "not a GGUF file" in win.model_panel.info.text()
    assert win.model.path == demo_model and not win.model_panel.busy.isVisible()


def test_the_demo_window_answers_while_a_remembered_large_model_is_read(qtbot, make_window, agents, demo_model,
                                                                       slow_model, slow_disk):
    """`herd demo` after a session with a large model: the window starts reading the remembered
    model, then the demo's own; it keeps answering meanwhile and the demo's model is the one
    open, although the remembered one finishes last."""
    win = make_window(browse=False, **{"model/last": str(slow_model)})  # start() reads the last model
    remembered, ended = win.models.newest_read, []
    assert remembered is not None and win.model is None
    remembered.done.connect(lambda: ended.append(True))
    with StallMeter() as meter:
        started = time.perf_counter()
        win.demo.attach(agents, demo_model)
        qtbot.waitUntil(lambda: win.model is not None, timeout=60000)
        assert win.model.path == demo_model
        # the remembered read stays stuck while the window answers a hundred more ticks (the
        # header reader is fast: released at once, the read would be over in a blink)
        answered = meter.ticks
        qtbot.waitUntil(lambda: meter.ticks >= answered + 100, timeout=60000)
        assert not ended
        slow_disk.release()
        qtbot.waitUntil(lambda: bool(ended), timeout=180000)
        reading = time.perf_counter() - started
    assert win.model.path == demo_model and win.settings.get("model/last") == str(demo_model)
    assert meter.worst < reading / 2, (meter.worst, reading)


def test_closing_herd_while_a_model_is_read_ends_it_at_once(tmp_path, slow_model):
    """A person opens herd (it reads the model of last time, from a disk that does not answer)
    and closes it: herd is gone, cleanly, without waiting for the read."""
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    from gui.settings import Settings

    config = tmp_path / "xdg-config"
    remembered = Settings(str(config / "llama-herd" / "herd.conf"))  # where herd keeps its settings on Linux
    remembered.set("model/last", str(slow_model))
    remembered.sync()
    env = dict(os.environ, HERD_CONFIG_DIR=str(tmp_path / "config"), XDG_CONFIG_HOME=str(config),
               XDG_CACHE_HOME=str(tmp_path / "cache"), HERD_INTERFACES="127.0.0.1", QT_QPA_PLATFORM="offscreen",
               HERD_DEBUG="1", PYTHONPATH=str(Path(__file__).resolve().parents[2]), PYTHONUNBUFFERED="1")
    log = tmp_path / "herd.log"
    with open(log, "w") as out:
        herd = subprocess.Popen([sys.executable, "-c", NEVER_ANSWERING_DISK], env=env, stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while "reading the model" not in log.read_text():
            assert herd.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)  # polling another process's log for the moment its read begins
        closing = time.perf_counter()
        herd.send_signal(signal.SIGTERM)  # closes the window as a person would
        herd.wait(60)  # generous: the read never ends, so any exit is herd's own
        took = time.perf_counter() - closing
    finally:
        if herd.poll() is None:
            herd.kill()
            herd.wait()
    print(f"\nherd was gone {took:.2f} s after closing")
    assert herd.returncode == 0, log.read_text()
    assert "Traceback" not in log.read_text(), log.read_text()


def test_a_read_that_ends_after_the_window_closed_goes_nowhere(qtbot, make_window, slow_model, slow_disk, caplog):
    import logging
    import threading

    win = make_window(browse=False)
    win._own_bridge = True  # as the app's own window: closing it closes its asyncio loop too
    win.read_model(str(slow_model))
    qtbot.waitUntil(lambda: win.model_panel.busy.isVisible(), timeout=5000)
    reader = [t for t in threading.enumerate() if t.name == "herd-read-model"]
    assert reader, [t.name for t in threading.enumerate()]
    win.close()
    assert not win.bridge.is_running() and reader[0].is_alive()  # closed while the read goes on
    slow_disk.release()
    failures = []
    threading.excepthook, before = (lambda args: failures.append(args)), threading.excepthook
    try:
        with caplog.at_level(logging.WARNING):
            qtbot.waitUntil(lambda: not reader[0].is_alive(), timeout=180000)
    finally:
        threading.excepthook = before
    assert not failures and not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
    assert win.model is None  # the window that was closed never took it
