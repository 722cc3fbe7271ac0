"""Render the README's split-editor screenshot with a GPU worker, from a real local run.

Two real ``herd-agent`` processes on loopback: ``gaming-pc`` runs the Vulkan build of the RPC
worker on Mesa's software GPU (``GGML_VK_VISIBLE_DEVICES=0``), so it offers its GPU and its CPU
as two devices; ``old-pc`` runs the CPU build. The real window opens offscreen, pairs them, opens
a Q4_K_M demo model and shows a split over all three devices; the split editor is grabbed into
``docs/screenshots/en-split-gpu.png``. Needs `herd engine install --from-source --backend vulkan`.

    python scripts/screenshot_gpu.py [--out docs/screenshots]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "scripts")]

from screenshots import _pump, _wait, open_window, qt_app  # noqa: E402  (the README shots' helpers)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    args = ap.parse_args()
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    tmp = Path(tempfile.mkdtemp(prefix="herd-shot-gpu-"))
    os.environ["HERD_CONFIG_DIR"] = str(tmp / "config")
    from cluster.agents import start_agent
    from conftest import ProcessJar

    from agent.engine_lookup import find_engine
    from gui.cluster.llama import engine_manager as engine_mgr
    from gui.cluster.llama.random_model import DemoShape, vocab_tokenizer, write_demo_model

    if not find_engine(backend="vulkan").complete:
        raise SystemExit("no Vulkan build: run `herd engine install --from-source --backend vulkan`")
    app = qt_app("en")
    vocab = engine_mgr.vocab_file("qwen2")
    model = write_demo_model(tmp / "qwen2-Q4_K_M.gguf",
                             DemoShape(layers=24, embd=512, ff=1280, kv_heads=2, arch="qwen2", quant="Q4_K_M",
                                       tied=True),
                             tokenizer=vocab_tokenizer(vocab) if vocab else None)
    jar = ProcessJar()
    gpu_env = dict(os.environ, GGML_VK_VISIBLE_DEVICES="0")
    agents = [start_agent(lambda argv, **kw: jar.popen(argv, env=gpu_env, **kw), tmp, "gaming-pc", mdns=False,
                          extra=["--backend", "vulkan"]),
              start_agent(jar.popen, tmp, "old-pc", mdns=False)]
    win, bridge = open_window(tmp, find_engine(probe=True))
    try:
        win.resize(1360, 860)
        win.show()
        win.start([a.api_url.removeprefix("http://") for a in agents])
        _wait(app, lambda: {n.name for n in win.node_map.values()} >= {"gaming-pc", "old-pc"}, 20, "agents")
        pins = {a.name: a.pin() for a in agents}
        for nid, node in list(win.node_map.items()):
            win.pair_node(nid, pins[node.name])
        _wait(app, lambda: all(nid in win.node_status for nid in win.node_map), 20, "status")
        win.open_model(str(model))
        _wait(app, lambda: win.editor.plan() is not None and len(win.editor.plan().devices()) == 3, 20, "plan")
        win.editor.ctx.setValue(4096)
        win.editor.set_counts(4, [6, 6, win.model.n_layer + 1 - 16])
        win.tabs.setCurrentWidget(win.editor)
        _pump(app, 2)
        args.out.mkdir(parents=True, exist_ok=True)
        path = args.out / "en-split-gpu.png"
        win.tabs.grab().save(str(path))
        print(path)
    finally:
        win.close()
        bridge.close()
        jar.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
