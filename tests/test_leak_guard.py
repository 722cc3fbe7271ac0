"""The leak guard (tests/leak_guard.py) fails the test that leaves something behind, names it and
what it left, lets a module-scoped fixture keep its process for the module, and puts back what it
can so the tests after a leaky one pass (#27).

Each case is a pytest run of its own, in a folder of test files that do one leaky thing each.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

# What the leaky tests left, stopped when their pytest run ends (after the guard has looked).
CONFTEST = '''
import pytest

pytest_plugins = ["leak_guard"]
LEFT = []


def pytest_unconfigure(config):
    for thing in LEFT:
        for stop in ("set", "kill", "close"):
            if hasattr(thing, stop):
                getattr(thing, stop)()
        if hasattr(thing, "quit"):  # a QThread
            thing.quit()
            thing.wait()
'''

FILES = {
    "test_a_tidy.py": '''
import subprocess, sys, threading
from PySide6.QtCore import QThread
from PySide6.QtWidgets import QWidget


def test_cleans_up_after_itself(qapp):
    t = threading.Thread(target=lambda: None)
    t.start()
    t.join()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    w = QWidget()
    w.show()
    w.close()
    q = QThread()
    q.start()
    q.quit()
    q.wait()
''',
    "test_b_thread.py": '''
import threading
from conftest import LEFT


def test_leaves_a_thread():
    stop = threading.Event()
    threading.Thread(target=stop.wait, name="leaky-thread", daemon=True).start()
    LEFT.append(stop)
''',
    "test_c_qthread.py": '''
from PySide6.QtCore import QThread
from conftest import LEFT


def test_leaves_a_qthread(qapp):
    t = QThread()
    t.setObjectName("leaky-qthread")
    t.start()
    LEFT.append(t)
''',
    "test_d_process.py": '''
import subprocess, sys
from conftest import LEFT


def test_leaves_a_process():
    LEFT.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"]))


def test_comes_after_it_in_the_module():
    pass
''',
    "test_e_window.py": '''
from PySide6.QtWidgets import QWidget
from conftest import LEFT


def test_leaves_a_window_open(qapp):
    w = QWidget()
    w.setWindowTitle("leaky window")
    w.show()
    LEFT.append(w)


def test_finds_no_window_left_open(qapp):
    assert not [w for w in qapp.topLevelWidgets() if w.isVisible()]
''',
    "test_f_environment.py": '''
import os


def test_sets_a_variable():
    os.environ["HERD_LEAKY_VARIABLE"] = "1"


def test_finds_it_gone():
    assert "HERD_LEAKY_VARIABLE" not in os.environ
''',
    "test_g_event_loops.py": '''
from PySide6.QtCore import QObject, QTimer, Signal


def test_quits_the_app_with_no_main_loop_running(qapp):
    qapp.exit(0)  # what a Quit handled after run_app's loop ended does


class Pinger(QObject):
    ping = Signal()


def test_waits_for_a_signal_afterwards(qtbot):
    p = Pinger()
    QTimer.singleShot(50, p.ping.emit)
    with qtbot.waitSignal(p.ping, timeout=5000):
        pass
''',
    "test_h_translator.py": '''
from agent import i18n


def test_leaves_the_core_translating():
    i18n.set_translator(lambda context, text: text.upper())
''',
    "test_i_module_fixture.py": '''
import subprocess, sys
import pytest


@pytest.fixture(scope="module")
def server():
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    yield p
    p.kill()
    p.wait()


def test_first_use(server):
    assert server.poll() is None


def test_second_use(server):
    assert server.poll() is None
''',
}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("leaky")
    (folder / "conftest.py").write_text(CONFTEST)
    for name, text in FILES.items():
        (folder / name).write_text(text)
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen",
               PYTHONPATH=os.pathsep.join([str(folder), str(TESTS), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts=", "-c", os.devnull,
                          "--rootdir", str(folder), "-rA", str(folder)],
                         capture_output=True, text=True, timeout=300, cwd=folder, env=env)
    return out.stdout


def _teardown_error(output: str, test: str) -> str:
    """The error report of ``test``'s teardown ('' if there is none)."""
    head = f"ERROR at teardown of {test}"
    if head not in output:
        return ""
    rest = output.split(head, 1)[1]
    return rest.split("\n____", 1)[0].split("\n====", 1)[0]


@pytest.mark.parametrize("test, left", [
    ("test_leaves_a_thread", "thread 'leaky-thread' still running"),
    ("test_leaves_a_qthread", "QThread(s) still running after the test: leaky-qthread"),
    # judged at the module's end (a module fixture may own it), and still named by its test
    ("test_comes_after_it_in_the_module", "(appeared during test_d_process.py::test_leaves_a_process)"),
    ("test_leaves_a_window_open", "top-level widget 'leaky window' still shown"),
    ("test_sets_a_variable", "environment changed: set HERD_LEAKY_VARIABLE"),
    ("test_quits_the_app_with_no_main_loop_running", "Qt's nested event loops left off"),
    ("test_leaves_the_core_translating", "the core's translator (agent.i18n.set_translator) left installed"),
])
def test_the_test_that_leaks_fails_naming_what_it_left(run, test, left):
    report = _teardown_error(run, test)
    assert left in report, run


def test_a_process_left_is_named_with_its_command(run):
    report = _teardown_error(run, "test_comes_after_it_in_the_module")
    assert "child process" in report and "time.sleep(120)" in report, run


@pytest.mark.parametrize("test", [
    "test_cleans_up_after_itself",
    "test_first_use", "test_second_use",  # a module fixture's process lives for its module
    # what a leaky test left is put back for the tests after it
    "test_finds_no_window_left_open", "test_finds_it_gone", "test_waits_for_a_signal_afterwards",
])
def test_a_test_that_leaves_nothing_passes(run, test):
    assert f"PASSED test_" in run and any(line.startswith("PASSED") and line.endswith(test)
                                          for line in run.splitlines()), run
    assert not _teardown_error(run, test), run


def test_the_leaky_tests_themselves_pass_and_only_their_teardown_errors(run):
    summary = [line for line in run.splitlines() if line.startswith("=") and " passed" in line]
    assert summary and "14 passed, 7 errors" in summary[-1] and "failed" not in summary[-1], run
