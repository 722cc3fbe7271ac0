"""Render the README screenshots from a real local run, in English and Simplified Chinese.

For each language this starts two real ``herd-agent`` processes on loopback, opens the real
window offscreen, pairs them, opens the demo's real model (SmolLM2-135M-Instruct), sets a
three-way split, presses Start (real
workers and llama-server), chats for a while so the dashboard has data, and grabs the nodes
panel, the split editor and the chat with the dashboard into ``docs/screenshots/`` (the English
window once more at 1366×768, a laptop's screen), and before all that the window's first view
at 1366×768 (``LANG-demo-first-view.png``). Nothing is mocked: the numbers are what this
machine measured.

    python scripts/screenshots.py [--lang en zh_CN] [--out docs/screenshots]

Chinese text needs a CJK font (e.g. Debian's fonts-wqy-microhei or fonts-noto-cjk).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: A common laptop screen: the English chat and dashboard are rendered at this size too.
LAPTOP = (1366, 768)


def _wait(app, predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        app.processEvents()
        time.sleep(0.02)


def _pump(app, seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        app.processEvents()
        time.sleep(0.02)


def qt_app(lang: str):
    """The offscreen QApplication the shots are taken in: Fusion style, a font that has the
    language's glyphs, and herd's translations for ``lang``."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import QLocale
    from PySide6.QtGui import QFont
    from PySide6.QtWidgets import QApplication

    from gui.translations import install_translator

    app = QApplication.instance() or QApplication([])
    app.setStyle("Fusion")
    app.setFont(QFont("WenQuanYi Micro Hei" if lang.startswith("zh") else "DejaVu Sans", 9))
    QLocale.setDefault(QLocale(lang))
    install_translator(app, lang)
    return app


def open_window(tmp: Path, engine, **settings_values):
    """The real main window with its own settings file in ``tmp`` (a free endpoint port, then
    ``settings_values``), nodes added by address only — other herd agents on this machine must
    not slip into the shots. Returns ``(window, bridge)``; close both when done."""
    import socket

    from gui.app import MainWindow
    from gui.bridge import AsyncBridge
    from gui.session import ClusterSession
    from gui.settings import Settings

    bridge = AsyncBridge()
    session = ClusterSession(bridge, browse=False, link_interval=0.5, status_interval=1.0)
    settings = Settings(str(tmp / "herd.ini"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        settings.set("server/port", s.getsockname()[1])
    for key, value in settings_values.items():
        settings.set(key, value)
    return MainWindow(settings, bridge=bridge, session=session, engine=engine), bridge


def per_language(render, script: str, doc: str) -> int:
    """The scripts' ``main``: ``--lang``/``--out``, then ``render(lang, out)`` for each language
    in a process of its own (Qt's translations and fonts are set per application)."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--lang", nargs="+", default=["en", "zh_CN"])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.one:
        written = render(args.one, args.out)
        for p in written if isinstance(written, list) else [written]:
            print(p)
        return 0
    for lang in args.lang:
        r = subprocess.run([sys.executable, script, "--one", lang, "--out", str(args.out)])
        if r.returncode != 0:
            return r.returncode
    return 0


def render(lang: str, out: Path) -> list[Path]:
    """One real run in ``lang``; returns the written PNGs."""
    tmp = Path(tempfile.mkdtemp(prefix="herd-shots-"))
    os.environ["HERD_CONFIG_DIR"] = str(tmp / "config")  # fresh pairings, not the user's
    sys.path.insert(0, str(ROOT))
    from agent.engine_lookup import find_engine
    from gui.cluster.demo_cluster import DemoCluster

    app = qt_app(lang)
    engine = find_engine(probe=True)
    if not engine.complete:
        raise SystemExit("no llama.cpp engine; run `herd engine install`")
    # The demo's own model, real weights that answer in words (fetched on first use).
    from gui.cluster.models.demo_weights import install_demo_weights
    model = install_demo_weights()
    cluster = DemoCluster(2)
    cluster.start()
    win, bridge = open_window(tmp, engine)
    written = []
    try:
        win.resize(1280, 800)
        win.show()
        win.start([a.address for a in cluster.agents])
        ours = {f"127.0.0.1:{a.api_port}": a for a in cluster.agents}
        _wait(app, lambda: sum(f"{n.host}:{n.api_port}" in ours for n in win.node_map.values()) == 2, 20, "agents")
        for nid, node in win.node_map.items():
            win.pair_node(nid, ours[f"{node.host}:{node.api_port}"].pin)
        _wait(app, lambda: all(n.paired for n in win.node_map.values()), 15, "pairing")
        _wait(app, lambda: all(nid in win.node_status for nid in win.node_map), 15, "status")
        win.open_model(str(model))
        _wait(app, lambda: win.editor.plan() is not None and len(win.editor.plan().devices()) == 2, 15, "plan")
        written.append(_first_view(app, win, lang, out))
        n = win.model.n_layer + 1
        win.editor.ctx.setValue(2048)
        win.editor.set_counts(5, [12, n - 17])
        _pump(app, 3)  # RTT sparklines fill
        win.tabs.setCurrentWidget(win.editor)
        _pump(app, 0.3)
        for name, widget in (("nodes", win.nodes), ("split", win.tabs)):
            p = out / f"{lang}-{name}.png"
            widget.grab().save(str(p))
            written.append(p)
        win.launch.start_button.click()
        _wait(app, lambda: win.launch.state in ("ready", "failed"), 120, "llama-server")
        if win.launch.state != "ready":
            raise SystemExit(f"launch failed: {win.launch.status.text()}")
        p = out / f"{lang}-launch.png"
        win.tabs.setCurrentWidget(win.launch)
        _pump(app, 0.5)
        win.grab().save(str(p))
        written.append(p)
        win.tabs.setCurrentIndex(2)
        win.chat.max_tokens.setValue(120)
        win.chat.temperature.setValue(0)
        # SmolLM2 speaks English: the questions are English in both languages' pictures
        prompts = ["What is the capital of France?", "Write a haiku about a herd of llamas.",
                   "Name three animals that live in the Andes."]
        for q in prompts * 2:
            done = []
            win.chat.replyFinished.connect(done.append)
            win.chat.send_text(q)
            _wait(app, lambda: bool(done), 60, "a reply")
            win.chat.replyFinished.disconnect(done.append)
            _pump(app, 1.5)
        _pump(app, 2.0)
        p = out / f"{lang}-chat-dashboard.png"
        win.grab().save(str(p))
        written.append(p)
        if lang == "en":
            # the same window on a common laptop screen, as its user sees it
            win.resize(*LAPTOP)
            _pump(app, 1.0)
            if (win.width(), win.height()) != LAPTOP:
                raise SystemExit(f"the window is {win.width()}×{win.height()}, not {LAPTOP[0]}×{LAPTOP[1]}")
            p = out / f"{lang}-laptop-{LAPTOP[0]}x{LAPTOP[1]}.png"
            win.grab().save(str(p))
            written.append(p)
        win.launch_flow.stop()
        _wait(app, lambda: win.launch.state == "stopped", 30, "stop")
    finally:
        win.close()
        bridge.close()
        cluster.stop()
    return written


def _first_view(app, win, lang: str, out: Path) -> Path:
    """What ``herd demo`` first shows on a laptop's screen: the nodes paired, the model open
    and split, and the next step said beside the tabs (#37)."""
    size = (win.width(), win.height())
    win.resize(*LAPTOP)
    win.tabs.setCurrentWidget(win.editor)
    _pump(app, 1.0)
    p = out / f"{lang}-demo-first-view.png"
    win.grab().save(str(p))
    win.resize(*size)
    _pump(app, 0.3)
    return p


def main() -> int:
    return per_language(render, __file__, __doc__)


if __name__ == "__main__":
    sys.exit(main())
