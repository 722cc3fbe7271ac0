"""Render the README screenshots of the *Get model* dialog, in English and Simplified Chinese.

For each language this serves a small local model hub on 127.0.0.1 (the test hub of
``tests/cluster/hub_server.py``: real GGUF files in three quants and a split one), starts two
real ``herd-agent`` processes on loopback, opens the real window offscreen and pairs them, sets
the local hub as the hub address, searches, downloads the smallest file, lets *Fastest* measure
the nodes on it (real workers and llama-server), lists the repository again so every file has
its predicted speed, and grabs the dialog into ``docs/screenshots/{lang}-get-model.png``.

    python scripts/hub_screenshots.py [--lang en zh_CN] [--out docs/screenshots]

Chinese text needs a CJK font (e.g. Debian's fonts-wqy-microhei or fonts-noto-cjk).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from screenshots import _pump, _wait, open_window, per_language, qt_app  # noqa: E402

REPO = "herd-demo/Tiny-GGUF"


def render(lang: str, out: Path) -> Path:
    """One real run in ``lang``; returns the written PNG."""
    tmp = Path(tempfile.mkdtemp(prefix="herd-hub-shots-"))
    os.environ["HERD_CONFIG_DIR"] = str(tmp / "config")  # fresh pairings, not the user's
    os.environ["XDG_CACHE_HOME"] = str(tmp / "cache")    # fresh measurements
    from cluster.hub_server import HubServer, Repo, demo_repo_files

    from agent.engine_lookup import find_engine
    from gui.cluster.demo_cluster import DemoCluster

    app = qt_app(lang)
    engine = find_engine(probe=True)
    if not engine.complete:
        raise SystemExit("no llama.cpp engine; run `herd engine install`")
    files = demo_repo_files(tmp / "hub", layers=16)
    small = {k: v for k, v in files.items() if "Q4_K_M" in k}
    cluster = DemoCluster(2)
    cluster.start()
    with HubServer({REPO: Repo(files, downloads=1200), "herd-demo/Tiny-Chat-GGUF": Repo(small, downloads=310)}) as hub:
        win, bridge = open_window(tmp, engine, **{"hub/models_dir": str(tmp / "models")})
        try:
            win.resize(1360, 860)
            win.show()
            win.start([a.address for a in cluster.agents])
            ours = {f"127.0.0.1:{a.api_port}": a for a in cluster.agents}
            _wait(app, lambda: sum(f"{n.host}:{n.api_port}" in ours for n in win.node_map.values()) == 2,
                  20, "agents")
            for nid, node in win.node_map.items():
                win.pair_node(nid, ours[f"{node.host}:{node.api_port}"].pin)
            _wait(app, lambda: all(nid in win.node_status for nid in win.node_map)
                  and len(win.planned_devices()) == 2, 15, "status")
            win.editor.ctx.setValue(2048)
            win.model_panel.hub_button.click()
            dlg = win.models.hub_dialog
            dlg.endpoint.setText(hub.url)
            dlg.query.setText("tiny")
            dlg.search_button.click()
            _wait(app, lambda: dlg.results.count() == 2, 20, "search")
            dlg._choose(dlg.results.item(0))
            dlg.results.setCurrentRow(0)
            _wait(app, lambda: dlg.table.rowCount() == 4, 30, "files")
            # download the smallest, then measure the nodes on it (the Fastest button)
            row = next(r for r in range(4) if dlg.table.item(r, 1).text() == "Q4_K_M")
            dlg.table.selectRow(row)
            dlg.download_button.click()
            _wait(app, lambda: win.model is not None, 60, "download")
            call = win.launch_flow.find_fastest()
            if call is None:
                raise SystemExit("the Fastest measurement did not start")
            finished = []
            call.done.connect(lambda: finished.append(True))
            _wait(app, lambda: bool(finished), 300, "measuring the nodes")
            dlg.repoChosen.emit(dlg.repo, dlg.ctx.value())
            _wait(app, lambda: dlg.table.rowCount() == 4 and dlg.table.item(0, 5) is not None
                  and "/" in dlg.table.item(0, 5).text(), 30, "speeds")
            dlg.resize(980, 600)
            _pump(app, 0.5)
            p = out / f"{lang}-get-model.png"
            dlg.grab().save(str(p))
            dlg.close()
        finally:
            win.close()
            bridge.close()
            cluster.stop()
    return p


def main() -> int:
    return per_language(render, __file__, __doc__)


if __name__ == "__main__":
    sys.exit(main())
