"""The worker's weight cache: a folder of its own that outlives the agent, capped by size and
by the disk's free space, its size in the status; and a second load served from it."""

from __future__ import annotations

import os
import time

import pytest
from cluster.agents import pair_all, start_agent
from conftest import free_port

from agent.identity import fingerprint_of_pem
from agent.weight_cache import DISK_RESERVE, WeightCache, default_root
from gui.cluster.launching.launcher import ClusterLauncher
from gui.cluster.launching.request import LaunchRequest
from gui.cluster.llama.model import inspect_model
from gui.cluster.llama.random_model import DemoShape, write_demo_model
from gui.cluster.llama.server_command import ServerOptions
from gui.cluster.nodes.discovery import Discovery
from gui.cluster.nodes.records import TokenStore
from gui.cluster.planning import plan as P

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


FP_A = "ab" * 32
FP_B = "cd" * 32


def test_each_master_has_a_folder_and_the_cap_holds_for_all_of_them(tmp_path):
    wc = WeightCache(tmp_path, max_bytes=3 * MiB)
    assert wc.master_root(FP_A) == tmp_path / "masters" / ("ab" * 8)
    assert wc.env({}, FP_B) == {"LLAMA_CACHE": str(tmp_path / "masters" / ("cd" * 8))}
    with pytest.raises(ValueError, match="not a key fingerprint"):
        wc.master_root("../../etc")
    folders = {}
    for fp in (FP_A, FP_B):
        folders[fp] = wc.master_root(fp) / "rpc"
        folders[fp].mkdir(parents=True)
    old_a = _entry(folders[FP_A], "00000000000000aa", MiB, 300)
    old_b = _entry(folders[FP_B], "00000000000000aa", MiB, 200)  # the same hash: another master's file
    new_a = _entry(folders[FP_A], "00000000000000bb", 2 * MiB, 10)
    legacy = tmp_path / "rpc"  # the one shared folder of older agents counts, and goes first
    legacy.mkdir()
    shared = _entry(legacy, "00000000000000cc", MiB, 400)
    wc.use_for(FP_A)
    st = wc.status()
    assert st["dir"] == str(folders[FP_A]) and st["bytes"] == 5 * MiB and st["files"] == 4
    assert st["master_bytes"] == 3 * MiB
    assert wc.prune() == 2 * MiB  # least recently used first, whichever master's
    assert not shared.exists() and not old_a.exists() and old_b.exists() and new_a.exists()
    # unpairing B takes its files and folder with it, and nothing of A's
    assert wc.forget(FP_B) == MiB
    assert not wc.master_root(FP_B).exists() and new_a.exists()


@pytest.mark.engine
@pytest.mark.slow
async def test_a_restarted_agent_serves_the_next_load_from_its_cache_and_each_master_its_own(
        engine, procs, tmp_path):
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

    async def load(agent, master: str, unpair: bool = False):
        """Pair from the master whose keys are in ``tmp_path/master``, load the model once,
        return the last transfer event, the cache status and this master's key fingerprint."""
        (tmp_path / master).mkdir(exist_ok=True)
        disc = Discovery(browse=False, tokens=TokenStore(tmp_path / master / "tokens.json"))
        try:
            nodes, devices = await pair_all(disc, [agent])
            plan = P.plan_from_split(info, devices, {"w": 5})
            request = LaunchRequest(plan, info, ServerOptions(ctx=512, port=free_port()))
            launcher = ClusterLauncher(engine.llama_server, request, nodes, disc.client)
            events = []
            launcher.on_transfer = events.append
            await launcher.start(120)
            await launcher.stop()
            node = nodes[next(iter(nodes))]
            async with disc.client(node) as c:
                status = await c.status()
            if unpair:
                assert await disc.unpair(node) is None
            return events[-1], status["rpc"]["weight_cache"], fingerprint_of_pem(disc.identity.cert_pem)
        finally:
            await disc.stop()

    first = start_agent(lambda argv, **kw: procs.popen(argv, env=env, **kw), tmp_path, "w", mdns=False)
    ev1, cache1, fp_a = await load(first, "a")
    mine = folder / "masters" / fp_a[:16] / "rpc"
    assert cache1["dir"] == str(mine) and cache1["max_bytes"] == 1 << 30
    assert cache1["bytes"] >= big and cache1["files"] >= 1 and cache1["master_bytes"] == cache1["bytes"]
    assert ev1.workers[0].cached_bytes == 0
    first.proc.terminate()
    first.proc.wait(10)
    # a new agent process (a restart, or an upgrade: same settings, same folder)
    again = start_agent(lambda argv, **kw: procs.popen(argv, env=env, **kw), tmp_path, "w", mdns=False)
    ev2, cache2, _ = await load(again, "a")
    assert ev2.workers[0].cached_bytes >= big, ev2.workers[0]
    assert cache2["bytes"] == cache1["bytes"]  # nothing new to store
    # another master gets nothing from the first one's cache: it sends every byte, into its own folder
    ev3, cache3, fp_b = await load(again, "b", unpair=True)
    theirs = folder / "masters" / fp_b[:16] / "rpc"
    assert fp_b != fp_a and cache3["dir"] == str(theirs)
    assert ev3.workers[0].cached_bytes == 0, ev3.workers[0]
    assert cache3["master_bytes"] >= big and cache3["bytes"] == cache1["bytes"] + cache3["master_bytes"]
    # unpairing the second master removed its files; the first master's are still there
    assert not theirs.exists() and any(mine.iterdir())
