"""The worker's weight cache: a folder of its own that outlives the agent, capped by size and
by the disk's free space, its size in the status; and a second load served from it."""

from __future__ import annotations

import os
import time

import pytest
from cluster.agents import pair_all, start_agent
from conftest import free_port

from agent.weight_cache import DISK_RESERVE, WeightCache, default_root
from gui.cluster import plan as P
from gui.cluster.demo_model import DemoShape, write_demo_model
from gui.cluster.discovery import Discovery, TokenStore
from gui.cluster.launch import LaunchRequest
from gui.cluster.launcher import ClusterLauncher
from gui.cluster.model import inspect_model
from gui.cluster.server_command import ServerOptions

MiB = 1 << 20


def _entry(folder, name, size, age_s):
    p = folder / name
    p.write_bytes(b"\0" * size)
    t = time.time() - age_s
    os.utime(p, (t, t))
    return p


def test_the_cache_folder_is_the_setting_then_llama_cache_then_the_data_folder(tmp_path):
    assert default_root(str(tmp_path / "mine"), {"LLAMA_CACHE": "/x"}) == tmp_path / "mine"
    assert default_root("", {"LLAMA_CACHE": str(tmp_path / "env")}) == tmp_path / "env"
    root = default_root("", {})
    assert root.name == "weights" and "llama-herd" in str(root) and ".cache" not in root.parts
    wc = WeightCache(tmp_path / "c", 0)
    assert wc.folder == tmp_path / "c" / "rpc" and wc.env({"A": "1"}) == {"A": "1", "LLAMA_CACHE": str(tmp_path / "c")}


def test_prune_drops_the_least_recently_used_files_down_to_the_cap(tmp_path):
    wc = WeightCache(tmp_path, max_bytes=3 * MiB)
    wc.folder.mkdir(parents=True)
    old = _entry(wc.folder, "00000000000000aa", MiB, 300)
    mid = _entry(wc.folder, "00000000000000bb", MiB, 200)
    new = _entry(wc.folder, "00000000000000cc", 2 * MiB, 10)
    other = wc.folder / "notes.txt"  # not a cache entry: never counted, never removed
    other.write_text("mine")
    st = wc.status()
    assert st["bytes"] == 4 * MiB and st["files"] == 3 and st["max_bytes"] == 3 * MiB
    assert wc.prune() == MiB
    assert not old.exists() and mid.exists() and new.exists() and other.exists()
    assert wc.status()["bytes"] == 3 * MiB  # (a prune forgets the status it had read)
    # the disk's free space caps it too: never below the reserve
    assert wc.limit_bytes(3 * MiB) <= 3 * MiB
    unlimited = WeightCache(tmp_path, 0)
    import shutil
    assert unlimited.limit_bytes(0) == max(0, shutil.disk_usage(tmp_path).free - DISK_RESERVE)


@pytest.mark.engine
@pytest.mark.slow
async def test_a_restarted_agent_serves_the_next_load_from_its_cache(engine, procs, tmp_path):
    model = write_demo_model(tmp_path / "m.gguf", DemoShape(layers=4, embd=1536, ff=4096, vocab=8192,
                                                           quant="Q8_0"))
    info = inspect_model(model)
    folder = tmp_path / "kept"
    state = tmp_path / "agent-w"
    state.mkdir()
    (state / "agent.toml").write_text(f'cache_dir = "{folder}"\ncache_max_gib = 1\n')
    env = {k: v for k, v in os.environ.items() if k != "LLAMA_CACHE"}
    big = sum(t.nbytes for t in info.tensors if t.slot >= 0 and t.nbytes > 10 * MiB)
    assert big > 0

    async def load(agent):
        disc = Discovery(browse=False, tokens=TokenStore(tmp_path / "tokens.json"))
        try:
            nodes, devices = await pair_all(disc, [agent])
            plan = P.plan_from_split(info, devices, {"w": 5})
            request = LaunchRequest(plan, info, ServerOptions(ctx=512, port=free_port()))
            launcher = ClusterLauncher(engine.llama_server, request, nodes, disc.client)
            events = []
            launcher.on_transfer = events.append
            await launcher.start(120)
            await launcher.stop()
            async with disc.client(nodes[next(iter(nodes))]) as c:
                status = await c.status()
            return events[-1], status["rpc"]["weight_cache"]
        finally:
            await disc.stop()

    first = start_agent(lambda argv, **kw: procs.popen(argv, env=env, **kw), tmp_path, "w", mdns=False)
    ev1, cache1 = await load(first)
    assert cache1["dir"] == str(folder / "rpc") and cache1["max_bytes"] == 1 << 30
    assert cache1["bytes"] >= big and cache1["files"] >= 1
    assert ev1.workers[0].cached_bytes == 0
    first.proc.terminate()
    first.proc.wait(10)
    # a new agent process (a restart, or an upgrade: same settings, same folder)
    again = start_agent(lambda argv, **kw: procs.popen(argv, env=env, **kw), tmp_path, "w", mdns=False)
    ev2, cache2 = await load(again)
    assert ev2.workers[0].cached_bytes >= big, ev2.workers[0]
    assert cache2["bytes"] == cache1["bytes"]  # nothing new to store
