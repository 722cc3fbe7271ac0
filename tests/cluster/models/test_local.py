"""The models already on this PC: found in the well-known folders, grouped, judged by size.

Every test works in a temporary HOME holding real small GGUF files (written by the demo model
writer), so what is found is what a person who had those apps would have.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from gui.cluster.llama.random_model import DemoShape, write_demo_model
from gui.cluster.models import local as L
from gui.cluster.planning.plan import Device

SMALL = DemoShape(layers=1, embd=64, ff=256, vocab=256)


@pytest.fixture(scope="module")
def gguf(tmp_path_factory) -> Path:
    """One real small GGUF to copy into the trees below."""
    return write_demo_model(tmp_path_factory.mktemp("gguf") / "tiny.gguf", SMALL)


def put(gguf: Path, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(gguf, path)
    return path


def find(home: Path, herd: Path | None = None, recent=(), env=None, platform="linux"):
    return L.find_local_models(herd or home / "herd-models", recent, home=home, env=env or {},
                               platform=platform)


def by_name(models) -> dict[str, L.LocalModel]:
    return {m.name: m for m in models}


def test_each_known_folder_of_the_other_apps_is_found(tmp_path, gguf):
    home = tmp_path / "home"
    put(gguf, home / ".lmstudio/models/lmstudio-community/Qwen-GGUF/qwen.gguf")
    put(gguf, home / ".cache/lm-studio/models/old/phi.gguf")
    put(gguf, home / ".local/share/nomic.ai/GPT4All/mistral.gguf")
    put(gguf, home / "jan/models/tinyllama/tinyllama.gguf")
    put(gguf, home / ".cache/llama.cpp/ggml-org_gemma.gguf")
    put(gguf, home / "herd-models/demo.gguf")
    put(gguf, home / "elsewhere/not-looked-at.gguf")
    models = by_name(find(home))
    assert {n: m.source for n, m in models.items()} == {
        "demo.gguf": L.HERD, "qwen.gguf": L.LM_STUDIO, "phi.gguf": L.LM_STUDIO,
        "mistral.gguf": L.GPT4ALL, "tinyllama.gguf": L.JAN, "ggml-org_gemma.gguf": L.LLAMA_CPP}
    assert all(m.size_bytes == gguf.stat().st_size and m.shards == 1 for m in models.values())


def test_the_hugging_face_cache_is_found_through_its_snapshot_links(tmp_path, gguf):
    home = tmp_path / "home"
    repo = home / ".cache/huggingface/hub/models--org--Tiny-GGUF"
    blob = put(gguf, repo / "blobs/3f2a9c")
    snap = repo / "snapshots/abc123"
    snap.mkdir(parents=True)
    (snap / "tiny-Q4_K_M.gguf").symlink_to(os.path.relpath(blob, snap))
    (snap / "broken.gguf").symlink_to("../../blobs/gone")  # a download cut short
    models = find(home)
    assert [(m.name, m.source, m.size_bytes) for m in models] == [
        ("tiny-Q4_K_M.gguf", L.HUGGING_FACE, gguf.stat().st_size)]


def test_the_caches_follow_their_environment_variables(tmp_path, gguf):
    home = tmp_path / "home"
    put(gguf, tmp_path / "llama-cache/a.gguf")
    put(gguf, tmp_path / "hf/hub/models--x--y/snapshots/1/b.gguf")
    put(gguf, home / ".cache/llama.cpp/not-this-one.gguf")
    env = {"LLAMA_CACHE": str(tmp_path / "llama-cache"), "HF_HOME": str(tmp_path / "hf")}
    assert {m.name: m.source for m in find(home, env=env)} == {"a.gguf": L.LLAMA_CPP, "b.gguf": L.HUGGING_FACE}


def test_gpt4all_and_llama_cpp_on_windows_live_in_local_app_data(tmp_path):
    home, app_data = tmp_path / "home", tmp_path / "AppData/Local"
    folders = L.model_folders(tmp_path / "herd", home=home, env={"LOCALAPPDATA": str(app_data)},
                              platform="win32")
    assert (L.GPT4ALL, app_data / "nomic.ai" / "GPT4All") in folders
    assert (L.LLAMA_CPP, app_data / "llama.cpp") in folders
    assert (L.GPT4ALL, home / ".local/share/nomic.ai/GPT4All") not in folders


def test_a_split_model_is_its_first_shard_with_the_whole_size_and_projectors_are_left_out(tmp_path, gguf):
    home = tmp_path / "home"
    folder = home / ".lmstudio/models/org/Big-GGUF"
    for part in (1, 2, 3):
        put(gguf, folder / f"big-Q4_K_M-0000{part}-of-00003.gguf")
    put(gguf, folder / "mmproj-big-f16.gguf")
    put(gguf, folder / "big-Q8_0.gguf")
    # a split model whose first file is missing cannot be opened: not offered
    put(gguf, folder / "half-00002-of-00002.gguf")
    models = by_name(find(home))
    assert sorted(models) == ["big-Q4_K_M-00001-of-00003.gguf", "big-Q8_0.gguf"]
    split = models["big-Q4_K_M-00001-of-00003.gguf"]
    assert split.shards == 3 and split.size_bytes == 3 * gguf.stat().st_size


def test_a_symlink_loop_and_an_unreadable_folder_do_not_stop_the_scan(tmp_path, gguf, monkeypatch):
    home = tmp_path / "home"
    models_dir = home / ".lmstudio/models"
    put(gguf, models_dir / "org/a/a.gguf")
    (models_dir / "org/a/again").symlink_to(models_dir)  # a loop back to the top
    locked = put(gguf, models_dir / "locked/hidden.gguf").parent
    locked.chmod(0)
    try:
        if os.access(locked, os.R_OK):
            # root reads every folder, so the refusal a user meets cannot be had here: the
            # scan is refused that one folder as the OS refuses it to others
            real = os.scandir

            def refusing(path="."):
                if os.fspath(path) == os.fspath(locked):
                    raise PermissionError(13, "Permission denied", os.fspath(path))
                return real(path)
            monkeypatch.setattr(L.os, "scandir", refusing)
        models = find(home)
    finally:
        locked.chmod(0o755)
    # a.gguf once (its folder is not walked again through the loop); the locked folder skipped
    assert [m.name for m in models] == ["a.gguf"]


def test_the_scan_is_bounded_in_depth_and_entries(tmp_path, gguf):
    deep = tmp_path / "m" / "1/2/3/4"
    put(gguf, deep / "deep.gguf")
    put(gguf, tmp_path / "m" / "top.gguf")
    assert [m.name for m in L.scan_folder(tmp_path / "m", L.JAN, max_depth=3)] == ["top.gguf"]
    assert {m.name for m in L.scan_folder(tmp_path / "m", L.JAN, max_depth=4)} == {"top.gguf", "deep.gguf"}
    many = tmp_path / "many"
    for i in range(50):
        (many / f"d{i:02}").mkdir(parents=True)
    put(gguf, many / "zz/zz.gguf")  # below the 51 entries at the top, whatever their order
    assert L.scan_folder(many, L.JAN, max_entries=20) == []
    assert [m.name for m in L.scan_folder(many, L.JAN, max_entries=100)] == ["zz.gguf"]


def test_a_folder_that_is_not_there_is_no_error(tmp_path, gguf):
    assert L.scan_folder(tmp_path / "nothing", L.JAN) == []
    assert find(tmp_path / "empty-home") == []
    # a file where a folder is expected cannot be listed (even by root): skipped like a locked one
    home = tmp_path / "home"
    put(gguf, home / ".lmstudio/models")
    put(gguf, home / "jan/models/j.gguf")
    assert [m.name for m in find(home)] == ["j.gguf"]


def test_recent_files_come_first_and_each_file_is_listed_once(tmp_path, gguf):
    home = tmp_path / "home"
    herd = home / "herd-models"
    demo = put(gguf, herd / "demo.gguf")
    other = put(gguf, tmp_path / "downloads/mine.gguf")
    models = find(home, herd, recent=[str(other), str(demo), str(tmp_path / "deleted.gguf")])
    assert [(m.name, m.source) for m in models] == [("mine.gguf", L.RECENT), ("demo.gguf", L.RECENT)]


def test_a_recent_split_model_counts_all_its_shards(tmp_path, gguf):
    first = put(gguf, tmp_path / "dl/m-00001-of-00002.gguf")
    put(gguf, tmp_path / "dl/m-00002-of-00002.gguf")
    [model] = find(tmp_path / "home", recent=[str(first)])
    assert model.shards == 2 and model.size_bytes == 2 * gguf.stat().st_size


def device(node: str, free: int, machine: str, name: str = "CPU") -> Device:
    return Device(node_id=node, node_name=node, endpoint=f"{node}:50052", index=0, name=name,
                  free_bytes=free, total_bytes=2 * free, machine=machine)


GB = 1 << 30


def test_the_size_verdict_adds_the_devices_free_memory_to_this_pcs():
    assert L.size_verdict(3 * GB, [], 4 * GB) == L.SizeVerdict(True, 0)
    assert L.size_verdict(6 * GB, [], 4 * GB) == L.SizeVerdict(False, 2 * GB)
    assert L.size_verdict(6 * GB, [device("a", 3 * GB, "10.0.0.2")], 4 * GB) == L.SizeVerdict(True, 0)


def test_one_computers_ram_is_counted_once():
    # a worker on this PC (the demo's) shares the host's RAM; two CPU devices of one worker too
    same_pc = [device("demo", 4 * GB, "master")]
    assert L.size_verdict(6 * GB, same_pc, 4 * GB) == L.SizeVerdict(False, 2 * GB)
    twice = [device("a", 3 * GB, "10.0.0.2"), device("a2", 3 * GB, "10.0.0.2")]
    assert L.size_verdict(8 * GB, twice, 4 * GB) == L.SizeVerdict(False, 1 * GB)
    # a GPU's memory is its own
    gpu = Device(node_id="a", node_name="a", endpoint="a:50052", index=1, name="CUDA0",
                 free_bytes=3 * GB, total_bytes=8 * GB, kind="rpc", machine="10.0.0.2")
    assert L.size_verdict(10 * GB, twice + [gpu], 4 * GB) == L.SizeVerdict(True, 0)


@pytest.mark.skipif(sys.platform.startswith("win"), reason="symlinks need privileges on Windows")
def test_a_folder_reached_twice_by_links_is_listed_once(tmp_path, gguf):
    home = tmp_path / "home"
    put(gguf, home / "jan/models/x/x.gguf")
    (home / ".lmstudio").mkdir(parents=True)
    (home / ".lmstudio/models").symlink_to(home / "jan/models")
    assert [(m.name, m.source) for m in find(home)] == [("x.gguf", L.LM_STUDIO)]
