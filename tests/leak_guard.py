"""The leak guard: a test leaves nothing behind, or it fails naming what it left (#27).

A suite that passes only in one order hides real bugs: something one test leaves running or
changed breaks a later one, far from its cause. So after every test — once its fixtures are torn
down — this plugin looks for what the test left, and fails *that* test with a list:

* **threads** it started that still run (Python threads; QThreads through the same ``start``
  record napari's ``_dangling_qthreads`` keeps);
* **child processes** it started that still run;
* **top-level widgets** it opened that are still shown, and **timers** still ticking on the
  ``QApplication``;
* **Qt's nested event loops turned off** — a posted Quit handled with no main loop running
  (``run_app`` quit by a test) makes every later modal dialog and ``qtbot.waitSignal`` return at
  once;
* a **translator** still installed (Qt's or the core's ``agent.i18n``), the application's
  **style**, **font** or **name** changed, **signal handlers** replaced, objects left **frozen**
  by ``gc.freeze()``;
* **environment variables** or the **working directory** changed.

What it finds it also undoes where it can (closes the widgets, stops the timers, revives the
event loops, restores the environment), so one leak fails one test, not every test after it.
The widgets a test closed and handed to ``deleteLater`` are deleted at the end of that test,
not inside the next one.

Threads and processes get a short grace period (a process told to stop may take a moment to
go), and since a module-scoped fixture may own one for the whole module, they are judged when the
module's fixtures are gone: at the teardown of the module's last test, naming the test during
which each appeared.

``--order reverse`` and ``--order shuffle:SEED`` run the collected tests in another order (a
seeded shuffle of the modules, and of the tests within each module, so module fixtures are still
made once), to check that no test depends on another having run first.
"""

from __future__ import annotations

import gc
import os
import random
import signal
import threading
import time
from dataclasses import dataclass, field

import psutil
import pytest

GRACE_S = 5.0

# Threads that live as long as the process by design, started once by the first test that needs
# them: they are not a test's leftovers.
PROCESS_LIFETIME_THREADS = (
    "zeroconf-",  # python-zeroconf's shared event loop for the synchronous API
)


# QThreads are recorded as they start (napari's _dangling_qthreads does the same): Qt has no list
# of running threads to ask.
_qthreads_started: list = []
try:
    from PySide6.QtCore import QThread

    _original_qthread_start = QThread.start

    def _recording_start(self, *args, **kwargs):
        _qthreads_started.append(self)
        return _original_qthread_start(self, *args, **kwargs)

    QThread.start = _recording_start
except ImportError:  # the agent's tests run without Qt installed
    QThread = None


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--order", default="", metavar="reverse|shuffle:SEED",
                     help="run the tests in reverse, or shuffled with SEED (modules and the tests "
                          "within each module), to find tests that depend on the order")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    order = config.getoption("--order")
    if not order:
        return
    if order == "reverse":
        items.reverse()
        return
    kind, _, seed = order.partition(":")
    if kind != "shuffle" or not seed.isdigit():
        raise pytest.UsageError(f"--order {order!r}: expected 'reverse' or 'shuffle:SEED' (SEED a number)")
    rng = random.Random(int(seed))
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::")[0], []).append(item)
    groups = list(modules.values())
    rng.shuffle(groups)
    for group in groups:
        rng.shuffle(group)
    items[:] = [item for group in groups for item in group]


def pytest_report_header(config: pytest.Config) -> str | None:
    order = config.getoption("--order")
    return f"test order: {order}" if order else None


@dataclass
class _Before:
    """What there was when a test's setup began."""

    threads: set[threading.Thread]
    processes: set[int]
    windows: set[int]  # addresses of the shown top-level windows
    timers: set[int]
    environ: dict[str, str]
    cwd: str
    signals: dict[int, object]
    frozen: int
    app: dict[str, str] = field(default_factory=dict)


@dataclass
class _Left:
    """Something a test left that may still belong to a module-scoped fixture."""

    test: str
    what: str
    still_there: object  # () -> bool
    pid: int | None = None  # a process: its command line is read when it is reported


_BEFORE = pytest.StashKey[_Before]()
_pending: list[_Left] = []


def _qapp():
    try:
        from PySide6.QtWidgets import QApplication
    except ImportError:
        return None
    return QApplication.instance()


def _app_state(app) -> dict[str, str]:
    if app is None:
        return {}
    from PySide6.QtCore import QCoreApplication

    return {
        "style": app.style().name() if hasattr(app, "style") else "",
        "font": app.font().toString() if hasattr(app, "font") else "",
        "application name": app.applicationName(),
        # any catalogue left installed translates this; none gives the source back
        "Qt translator": QCoreApplication.translate("NodeCard", "worker stopped"),
    }


def _children() -> set[int]:
    try:
        return {p.pid for p in psutil.Process().children(recursive=True)}
    except psutil.Error:
        return set()


def _threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate()
            if not isinstance(t, threading._DummyThread)}  # noqa: SLF001 - foreign (Qt) threads


def _snapshot() -> _Before:
    app = _qapp()
    windows, timers = set(), set()
    if app is not None:
        from PySide6.QtCore import QTimer

        windows = {_address(w) for w in _shown_windows(app)}
        timers = {_address(t) for t in app.findChildren(QTimer) if t.isActive()}
    _qthreads_started.clear()
    return _Before(threads=_threads(), processes=_children(), windows=windows, timers=timers,
                   environ=dict(os.environ), cwd=os.getcwd(),
                   signals={s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)},
                   frozen=gc.get_freeze_count(), app=_app_state(app))


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_setup(item: pytest.Item):
    item.stash[_BEFORE] = _snapshot()
    return (yield)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):
    result = yield  # every fixture of the test is torn down by now
    _delete_closed_widgets()
    before = item.stash.get(_BEFORE, None)
    if before is None:
        return result
    name = item.nodeid
    problems = _changed_state(before) + _left_shown(before) + _qthreads_running()
    _pending.extend(_left_running(before, name))
    if nextitem is None or nextitem.path != item.path:
        # the module's own fixtures are gone now: what is still there was left
        still = [p for p in _pending if _wait_gone(p)]
        _pending.clear()
        problems += [_described(p) if p.test == name else f"{_described(p)} (appeared during {p.test})"
                     for p in still]
    if problems:
        pytest.fail(f"{name} left behind:\n  - " + "\n  - ".join(problems), pytrace=False)
    return result


def _delete_closed_widgets() -> None:
    """Delete now what the test handed to ``deleteLater`` (pytest-qt does so with every widget
    given to ``qtbot.addWidget``). Left to itself, Qt deletes them in the next event loop that
    runs: inside the next test, often inside one of its modal dialogs, where a window with its
    session, graphs and tray went down in the middle of another test's work."""
    app = _qapp()
    if app is not None:
        from PySide6.QtCore import QEvent

        app.sendPostedEvents(None, QEvent.Type.DeferredDelete)


def _described(left: _Left) -> str:
    """What was left, in words; a process with its command line, read now (just after it was
    started it may not have one yet)."""
    if left.pid is None:
        return left.what
    try:
        proc = psutil.Process(left.pid)
        cmd = " ".join(proc.cmdline()[:3]) or proc.name()
    except psutil.Error:
        cmd = "?"
    return f"{left.what} ({cmd}) still running"


def _wait_gone(left: _Left) -> bool:
    """True if ``left`` is still there after the grace period."""
    deadline = time.monotonic() + GRACE_S
    while left.still_there():
        if time.monotonic() > deadline:
            return True
        time.sleep(0.05)
    return False


def _process_alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _left_running(before: _Before, test: str) -> list[_Left]:
    """Threads and processes that appeared during the test and still run (judged at the end of
    the module: they may belong to one of its fixtures)."""
    out = []
    for t in _threads() - before.threads:
        if not t.is_alive() or t.name.startswith(PROCESS_LIFETIME_THREADS):
            continue
        out.append(_Left(test, f"thread {t.name!r} still running", t.is_alive))
    for pid in _children() - before.processes:
        out.append(_Left(test, f"child process {pid}", lambda pid=pid: _process_alive(pid), pid))
    return out


def _left_shown(before: _Before) -> list[str]:
    """Top-level widgets the test left shown and timers it left ticking on the QApplication
    (no fixture here shares a window across tests); each is closed or stopped."""
    app = _qapp()
    if app is None:
        return []
    from PySide6.QtCore import QTimer

    out = []
    for w in _shown_windows(app):
        if _address(w) not in before.windows:
            out.append(f"top-level widget {w.title() or w.objectName()!r} still shown")
            w.close()
    for t in app.findChildren(QTimer):
        if _address(t) not in before.timers and _active(t):
            out.append(f"a timer on the QApplication still ticking every {t.interval()} ms")
            t.stop()
    return out


def _shown_windows(app) -> list:
    """The shown top-level windows, as the ``QWindow`` each shown top-level widget has. Listing
    them wraps no widget: listing ``topLevelWidgets()`` wrapped, after every test, widgets Qt
    makes and deletes by itself (popups, tooltips), and a full run crashed inside that call."""
    return [w for w in app.topLevelWindows() if w.isVisible()]


def _address(obj) -> int:
    """The Qt object's own address: stable while it lives, unlike the id of a passing wrapper."""
    import shiboken6

    return shiboken6.getCppPointer(obj)[0]


def _active(t) -> bool:
    try:
        return t.isActive()
    except RuntimeError:
        return False


def _qthreads_running() -> list[str]:
    running = []
    for t in list(_qthreads_started):
        try:
            if t.isRunning() and not t.wait(int(GRACE_S * 1000)):
                running.append(t.objectName() or type(t).__name__)
        except RuntimeError:  # the C++ object is gone, so the thread is too
            pass
    _qthreads_started.clear()
    return [f"QThread(s) still running after the test: {', '.join(running)}"] if running else []


def _changed_state(before: _Before) -> list[str]:
    """Process-wide state the test changed; each is put back as it was."""
    problems = []
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}  # pytest's own
    was = {k: v for k, v in before.environ.items() if k != "PYTEST_CURRENT_TEST"}
    if env != was:
        added = sorted(env.keys() - was.keys())
        removed = sorted(was.keys() - env.keys())
        changed = sorted(k for k in env.keys() & was.keys() if env[k] != was[k])
        problems.append("environment changed: " + "; ".join(
            part for part in (added and f"set {', '.join(added)}", removed and f"removed {', '.join(removed)}",
                              changed and f"changed {', '.join(changed)}") if part))
        for k in added:
            del os.environ[k]
        os.environ.update({k: was[k] for k in removed + changed})
    if os.getcwd() != before.cwd:
        problems.append(f"working directory changed to {os.getcwd()}")
        os.chdir(before.cwd)
    for sig, handler in before.signals.items():
        if signal.getsignal(sig) is not handler:
            problems.append(f"the {signal.Signals(sig).name} handler replaced")
            signal.signal(sig, handler)
    if gc.get_freeze_count() > before.frozen:
        problems.append(f"{gc.get_freeze_count() - before.frozen} objects left frozen by gc.freeze()")
        gc.unfreeze()
    from agent import i18n

    if i18n._translator is not None:  # noqa: SLF001 - the guard looks at the core's state
        problems.append("the core's translator (agent.i18n.set_translator) left installed")
        i18n.set_translator(None)
    app = _qapp()
    if app is not None:
        now = _app_state(app)
        for key, was in before.app.items():
            if now.get(key) != was:
                problems.append(f"the application's {key} changed ({was!r} → {now.get(key)!r})")
        if not _nested_loops_run():
            problems.append("Qt's nested event loops left off (a Quit posted with no main loop running): "
                            "every later modal dialog and waitSignal would return at once")
            _revive_nested_loops()
    return problems


def _nested_loops_run() -> bool:
    """True if a nested QEventLoop runs (it returns -1 at once when the app is quitting)."""
    from PySide6.QtCore import QCoreApplication, QEventLoop, QTimer

    QCoreApplication.sendPostedEvents()
    probe = QEventLoop()
    QTimer.singleShot(0, probe.quit)
    return probe.exec() != -1


def _revive_nested_loops() -> None:
    from person import revive_event_loops

    revive_event_loops()
