"""Start-up progress by the byte in the app and in `herd up`: a bar per worker with its bytes,
rate, ETA and cache, a named stall, and the dashboard's decode plot apart from prompt spikes
with each reply's time to first token marked."""

from __future__ import annotations

import io
import time

import pytest

from gui.cli.progress import TransferPrinter
from gui.cluster.launching.transfer import TransferTracker
from gui.cluster.nodes.telemetry import Sample
from gui.widgets.dashboard import Dashboard
from gui.widgets.launch_panel import LaunchPanel

MiB = 1 << 20
A, B = "10.0.0.2:50052", "10.0.0.3:50052"


def _counters(got, cached=0, idle=0.1):
    return {"session": 1, "session_age_s": 1.0, "idle_s": idle, "bytes_received": got,
            "tensor_bytes": got - cached, "cached_bytes": cached, "hash_hits": 0, "hash_misses": 0}


def _events():
    clock = [0.0]
    tr = TransferTracker({A: 100 * MiB, B: 300 * MiB}, {A: "laptop", B: "gaming-pc"}, clock=lambda: clock[0])
    out = []
    for a, b, idle in ((10, 0, 0.1), (60, 0, 0.1), (100, 30, 0.1), (100, 90, 0.1), (100, 90, 11.0)):
        clock[0] += 1.0
        out.append(tr.update({A: _counters(a * MiB, cached=a * MiB // 2 if a == 100 else 0, idle=idle),
                              B: _counters(b * MiB, idle=idle)}))
    return out


def test_launch_panel_shows_a_bar_per_worker_and_names_a_stall(qtbot):
    panel = LaunchPanel()
    qtbot.addWidget(panel)
    panel.begin(9)
    panel.show_state("loading")
    evs = _events()
    for ev in evs[:4]:
        panel.show_transfer(ev)
    bars = panel.transfer_bars
    assert set(bars) == {A, B} and not panel.transfer_box.isHidden()
    assert bars[A].value() == 1000 and bars[B].value() == 300
    assert bars[A].format().startswith("laptop: 100 / 100 MiB · done · from cache")
    assert bars[B].format().startswith("gaming-pc: 90 / 300 MiB · 30.0 MiB/s · 7 s left")
    # (the rate over the last 3 s: 90 MiB in 3 s)
    # the overall bar follows the bytes (190 of 400 MiB), not the log lines
    panel.append_log(["load_tensors: offloaded 9/9 layers to GPU"] * 3)
    assert panel.progress.value() == int(95 * 190 / 400)
    assert panel.stall.isHidden()
    panel.show_transfer(evs[4])
    assert not panel.stall.isHidden() and panel.stall.text() == "⚠ no bytes from gaming-pc for 11 s"
    panel.show_state("ready")
    assert panel.transfer_box.isHidden() and panel.transfer_bars == {}


def test_herd_up_prints_each_worker_and_the_stall():
    out = io.StringIO()
    printer = TransferPrinter(out)
    for ev in _events():
        printer(ev)
    lines = out.getvalue().splitlines()
    assert len(lines) == 5
    assert lines[0].startswith("weights [") and "laptop: 10 / 100 MiB" in lines[0]
    assert "gaming-pc: 90 / 300 MiB · 30.0 MiB/s · 7 s left" in lines[3]
    assert lines[-1].endswith("!! no bytes from gaming-pc for 11 s")


def test_decode_has_its_own_plot_and_replies_mark_time_to_first_token(qtbot):
    d = Dashboard(window_s=300)
    qtbot.addWidget(d)
    t0 = time.time()
    for i in range(6):
        d.add_sample(Sample(t0 + i, "metrics", "http://x", {"decode_tps": 8.0 + i / 10,
                                                            "prompt_tps": 400.0 if i == 2 else None}))
    d.add_sample(Sample(t0 + 5, "reply", "http://x", {"prompt_ms": 1200.0, "predicted_ms": 3000.0,
                                                      "ttft_ms": 1250.0}))
    qtbot.waitUntil(lambda: len(d.curve_data("tps", "decode")[0]) == 6, timeout=3000)
    # (the intervals without a prompt are gaps in its line, NaN)
    qtbot.waitUntil(lambda: [v for v in d.curve_data("prompt", "prompt")[1] if v == v] == [400.0], timeout=3000)
    # the prompt spike does not share decode's axis: decode fills its own plot's range
    lo, hi = d.plots["tps"].viewRange()[1]
    assert hi < 50
    # same time axis: the plots are linked, and a linked range passes through pixel coordinates,
    # so it can differ from its source in the last bit
    assert d.plots["prompt"].viewRange()[0] == pytest.approx(d.plots["tps"].viewRange()[0], abs=1e-6)
    (first, waited), = d.ttft_marks
    assert abs(first - (t0 + 2)) < 1e-6 and waited == 1.25
    # the wait is said in the legend, off the data (#36)
    assert "first token after 1.25 s" in d.legend.text()
