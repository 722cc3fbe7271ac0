"""The hub client (``gui.cluster.models.hub``) through the real ``huggingface_hub`` library against a
local hub server on 127.0.0.1 serving real GGUF files made by the demo-model writer: listing,
split files, headers read with ranged requests, fit and speed, and downloads — resumed after an
interruption, refused on a damaged byte or a full disk, and pointed at a mirror by HF_ENDPOINT."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from cluster.hub_server import HubServer, Repo, demo_repo_files

from gui.cluster.llama.model import file_sha256, inspect_model
from gui.cluster.models import hub as H
from gui.cluster.planning.cost_model import predicted_tokens_per_s
from gui.cluster.planning.measure import (
    ComputeMeasurement,
    LinkMeasurement,
    MeasurementCache,
    NodeMeasurement,
    cost_inputs,
    slot_seconds,
)
from gui.cluster.planning.plan import Device, estimate, plan_by_memory

REPO = "herd-test/Tiny-GGUF"


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> dict[str, Path]:
    """Three quants of one model and the Q8_0 one again as a split GGUF of two files."""
    return demo_repo_files(tmp_path_factory.mktemp("hub-src"))


@pytest.fixture
def hub(sources):
    with HubServer({REPO: Repo(dict(sources), downloads=5),
                    "other/Unrelated-GGUF": Repo({"x-Q4_0.gguf": sources["Tiny-Q4_K_M.gguf"]})}) as srv:
        yield srv


def test_quant_and_split_names():
    assert H.quant_of("Qwen2.5-7B-Instruct-Q4_K_M.gguf") == "Q4_K_M"
    assert H.quant_of("llama.IQ3_XS.gguf") == "IQ3_XS"
    assert H.quant_of("big/model-Q8_0-00002-of-00003.gguf") == "Q8_0"
    assert H.quant_of("model-f16.gguf") == "F16"
    assert H.quant_of("model.gguf") == ""
    files = [H.HubFile("m-Q4_0.gguf", 10), H.HubFile("a/m-Q8_0-00002-of-00002.gguf", 7),
             H.HubFile("a/m-Q8_0-00001-of-00002.gguf", 5), H.HubFile("b/m-F16-00001-of-00003.gguf", 9),
             H.HubFile("config.json", 1)]
    models = H.group_gguf_files(files)
    # the F16 set lacks two shards: llama.cpp could not load it, so it is not offered
    assert [(m.name, m.quant, m.size, [p.path for p in m.parts]) for m in models] == [
        ("m-Q4_0.gguf", "Q4_0", 10, ["m-Q4_0.gguf"]),
        ("m-Q8_0-00001-of-00002.gguf", "Q8_0", 12, ["a/m-Q8_0-00001-of-00002.gguf", "a/m-Q8_0-00002-of-00002.gguf"])]


def test_search_and_list_files(hub, sources):
    h = H.Hub(hub.url)
    assert [r.repo for r in h.search("tiny")] == [REPO]
    assert {r.repo for r in h.search("gguf")} == {REPO, "other/Unrelated-GGUF"}
    with pytest.raises(H.HubError, match="type part of a model's name"):
        h.search("  ")
    files = h.files(REPO)
    assert files.commit == hub.repos[REPO].commit
    got = {(m.name, m.quant, m.size, tuple(p.sha256 for p in m.parts)) for m in files.models}
    want = {(n, q, sources[n].stat().st_size, (_sha(sources[n]),))
            for n, q in (("Tiny-Q4_K_M.gguf", "Q4_K_M"), ("Tiny-Q8_0.gguf", "Q8_0"), ("Tiny-F16.gguf", "F16"))}
    shards = sorted(k for k in sources if k.startswith("split/"))
    want.add(("Tiny-Q8_0-00001-of-00002.gguf", "Q8_0", sum(sources[k].stat().st_size for k in shards),
              tuple(_sha(sources[k]) for k in shards)))
    assert got == want
    # the library asked the model info and the tree listing, pinned at the commit
    paths = [r.path for r in hub.requests]
    assert f"/api/models/{REPO}" in paths or f"/api/models/{REPO}/revision/main" in paths
    assert any(p.startswith(f"/api/models/{REPO}/tree/{files.commit}") for p in paths)
    with pytest.raises(H.HubError, match="no such repository"):
        h.files("nobody/none")


def test_header_read_with_ranges_equals_the_local_file(hub, sources):
    h = H.Hub(hub.url)
    files = h.files(REPO)
    for m in files.models:
        hub.requests.clear()
        info = h.model_info(files.repo, files.commit, m)
        local = inspect_model(sources[m.first.path])
        for field in ("architecture", "n_layer", "context_length", "embedding_length", "n_head_kv",
                      "quantization", "slot_bytes", "input_bytes", "tied_embeddings", "file_bytes"):
            assert getattr(info, field) == getattr(local, field), (m.name, field)
        gets = [r for r in hub.requests if r.method == "GET" and "/resolve/" in r.path]
        assert len(gets) == len(m.parts) and all(r.range and r.range.startswith("bytes=0-") for r in gets)
        # only the header travelled, not the weights
        assert all(int(r.range.split("-")[1]) < H.HEADER_FIRST_READ for r in gets)


def _devices(free: int) -> list[Device]:
    return [Device("alpha", "alpha", "127.0.0.1:50001", 0, "CPU", free, free),
            Device("beta", "beta", "127.0.0.1:50002", 0, "CPU", free, free)]


def test_fit_split_and_suggestion_follow_the_planner(hub, sources, tmp_path):
    h = H.Hub(hub.url)
    files = h.files(REPO)
    single = H.RepoFiles(files.repo, files.commit, tuple(m for m in files.models if not m.is_split))
    ctx = 1024
    q8 = inspect_model(sources["Tiny-Q8_0.gguf"])
    # room for the Q8_0 file split evenly over two workers and the host, 2 % to spare
    need = estimate(plan_by_memory(q8, _devices(1 << 40), ctx), q8, ctx)
    free = int(max(f.need_bytes for f in need[:-1]) * 1.02)
    host_free = int(need[-1].need_bytes * 1.02)
    fits = H.assess_repo(h, single, _devices(free), ctx, host_free_bytes=host_free)
    by = {f.model.quant: f for f in fits}
    assert by["Q4_K_M"].fits and by["Q8_0"].fits and not by["F16"].fits
    assert "short" in by["F16"].problem or "needs" in by["F16"].problem
    # the split by memory, as llama.cpp computes it from equal free memory
    assert by["Q8_0"].split_text() == "alpha=5, beta=4"
    assert by["Q8_0"].plan == plan_by_memory(q8, _devices(free), ctx, host_free_bytes=host_free)
    assert single.models[H.suggest(fits)].quant == "Q8_0"
    assert all(f.tokens_per_s is None for f in fits)  # nothing measured
    # nothing fits a tiny cluster: no suggestion
    assert H.suggest(H.assess_repo(h, single, _devices(1 << 20), ctx, host_free_bytes=1 << 20)) is None


def _put(cache, devices, spb_by_node, measured_on, bytes_per_param=0.0, fingerprint="other-model", at=None):
    """Cache entries as `herd plan --fastest` leaves them: node → seconds per byte on ``measured_on``."""
    for node, spb in spb_by_node.items():
        ep = None if node == "master" else next(d.endpoint for d in devices if d.node_id == node)
        slots = slot_seconds(measured_on.slot_bytes, spb * sum(measured_on.slot_bytes))
        compute = ComputeMeasurement(ep, 0.01, (0.01,), 0.0, spb, slots, 24, bytes_per_param=bytes_per_param)
        link = None if ep is None else LinkMeasurement(ep, 0.0002, (0.0002,), 1e9)
        cache.put(NodeMeasurement(node, fingerprint, compute, link, measured_at=at or time.time()))


def test_speed_comes_from_the_cached_measurements(hub, sources, tmp_path):
    """Speeds measured on another model (as `herd plan --fastest` caches them) predict a hub
    file's speed from its layers."""
    h = H.Hub(hub.url)
    files = h.files(REPO)
    cache = MeasurementCache(tmp_path / "measure")
    measured_on = inspect_model(sources["Tiny-F16.gguf"])
    devices = _devices(1 << 34)
    assert H.cluster_measurements(devices, cache) is None
    _put(cache, devices, {"alpha": 2e-9}, measured_on)
    assert H.cluster_measurements(devices, cache) is None  # beta never measured: not measured yet
    _put(cache, devices, {"beta": 4e-9, "master": 8e-9}, measured_on)
    measured = H.cluster_measurements(devices, cache)
    nodes, host = measured.pick()
    assert [m.node_id for m in nodes] == ["alpha", "beta"] and host.node_id == "master"
    q4 = files.by_quant("Q4_K_M")
    info = h.model_info(files.repo, files.commit, q4)
    fit = H.assess(q4, info, devices, 1024, host_free_bytes=1 << 34, measured=measured)
    assert fit.fits and fit.tokens_per_s is not None
    m = cost_inputs(nodes, host, model=info)
    assert fit.tokens_per_s == pytest.approx(predicted_tokens_per_s(fit.plan, info, m))
    # the split is the one a launch uses by default: by free memory
    assert fit.plan == plan_by_memory(info, devices, 1024, host_free_bytes=1 << 34)
    # the same workers measured again, twice as slow: the same split is predicted slower
    slow = MeasurementCache(tmp_path / "slow")
    _put(slow, devices, {"alpha": 4e-9, "beta": 8e-9, "master": 8e-9}, measured_on)
    assert H.assess(q4, info, devices, 1024, host_free_bytes=1 << 34,
                    measured=H.cluster_measurements(devices, slow)).tokens_per_s < fit.tokens_per_s


def test_download_verified_and_moved_in_atomically(hub, sources, tmp_path):
    h = H.Hub(hub.url)
    files = h.files(REPO)
    seen: list[H.DownloadProgress] = []
    models = tmp_path / "models"
    model = files.by_quant("Q4_K_M")
    path = h.download(files.repo, files.commit, model, models, progress=seen.append)
    assert path == models / "Tiny-Q4_K_M.gguf"
    # the bytes came from the storage host the hub redirected to, as on huggingface.co
    assert [r.path.split("/")[1] for r in hub.file_requests("Tiny-Q4_K_M.gguf")] == ["cdn"]
    assert _sha(path) == _sha(sources["Tiny-Q4_K_M.gguf"])
    assert os.listdir(models) == ["Tiny-Q4_K_M.gguf"]  # no partial folder left
    downloads = [p for p in seen if p.phase == "download"]
    assert downloads[-1].done_bytes == downloads[-1].total_bytes == model.size
    assert [p.done_bytes for p in downloads] == sorted(p.done_bytes for p in downloads)
    assert any(p.rate_bps > 0 and p.eta_s is not None for p in downloads)
    assert seen[-1].phase == "verify" and seen[-1].done_bytes == model.size
    # a split model: both files, and llama.cpp's first-file name comes back
    split = next(m for m in files.models if m.is_split)
    first = h.download(files.repo, files.commit, split, models)
    assert first.name == "Tiny-Q8_0-00001-of-00002.gguf"
    assert inspect_model(first).n_layer == 8
    assert sorted(os.listdir(models)) == ["Tiny-Q4_K_M.gguf", "Tiny-Q8_0-00001-of-00002.gguf",
                                          "Tiny-Q8_0-00002-of-00002.gguf"]


def test_download_resumes_after_a_dropped_connection(hub, sources, tmp_path):
    """The server drops the connection mid-file: the library goes on from the last byte it
    handed over (its chunks are 10 MiB), with a Range request, within the same download."""
    from huggingface_hub import constants

    h = H.Hub(hub.url)
    files = h.files(REPO)
    model = files.by_quant("F16")
    chunk = constants.DOWNLOAD_CHUNK_SIZE
    assert model.size > chunk + 200_000
    hub.cut_after = chunk + 100_000
    path = h.download(files.repo, files.commit, model, tmp_path / "models")
    assert _sha(path) == _sha(sources["Tiny-F16.gguf"])
    gets = hub.file_requests("Tiny-F16.gguf")
    assert [g.range for g in gets] == [None, f"bytes={chunk}-"]


def test_download_interrupted_then_resumed_by_the_next_attempt(hub, sources, tmp_path):
    """Cancelled midway (the app closed, Ctrl-C): nothing where models are looked for; the next
    download asks only for the rest (HTTP Range) and the file is whole and verified."""
    h = H.Hub(hub.url)
    files = h.files(REPO)
    model = files.by_quant("F16")
    models = tmp_path / "models"
    cancel = threading.Event()
    got: list[int] = []

    def progress(p: H.DownloadProgress) -> None:
        got.append(p.done_bytes)
        if p.done_bytes > model.size // 2:
            cancel.set()

    with pytest.raises(H.DownloadCancelled):
        h.download(files.repo, files.commit, model, models, progress=progress, cancel=cancel)
    assert list(models.glob("*.gguf")) == []
    partial = models / ".herd-downloads" / f"Tiny-F16.gguf.{_sha(sources['Tiny-F16.gguf'])[:16]}.part"
    have = partial.stat().st_size
    assert model.size // 2 < have < model.size
    hub.requests.clear()
    resumed: list[H.DownloadProgress] = []
    path = h.download(files.repo, files.commit, model, models, progress=resumed.append)
    assert [g.range for g in hub.file_requests("Tiny-F16.gguf")] == [f"bytes={have}-"]
    assert resumed[0].resumed_bytes == have
    assert _sha(path) == _sha(sources["Tiny-F16.gguf"])
    assert not (models / H.PARTIAL_DIR).exists()


def test_a_corrupted_byte_fails_the_hash_and_leaves_nothing(hub, sources, tmp_path):
    h = H.Hub(hub.url)
    files = h.files(REPO)
    model = files.by_quant("Q8_0")
    hub.corrupt = (model.first.path, 123_456)
    models = tmp_path / "models"
    with pytest.raises(H.HubError) as err:
        h.download(files.repo, files.commit, model, models)
    msg = str(err.value)
    assert "Tiny-Q8_0.gguf" in msg and "damaged" in msg and "SHA-256" in msg and model.first.sha256 in msg
    assert "download it again" in msg
    assert [p for p in models.rglob("*") if p.is_file()] == []
    # and once the hub serves the right bytes, the download again is whole
    hub.corrupt = None
    assert _sha(h.download(files.repo, files.commit, model, models)) == model.first.sha256


def test_a_full_disk_is_refused_before_a_byte_is_written(sources, tmp_path):
    """A model bigger than the free space of the models folder's disk (a sparse file on the
    hub's side, so the test needs no disk of its own)."""
    models = tmp_path / "models"
    free = shutil.disk_usage(tmp_path).free
    big = tmp_path / "hub" / "Huge-Q4_K_M.gguf"
    big.parent.mkdir()
    with open(big, "wb") as f:
        f.write(sources["Tiny-Q4_K_M.gguf"].read_bytes()[:4096])
        f.truncate(free + (1 << 30))
    with HubServer({REPO: Repo({big.name: big})}) as srv:
        srv.repos[REPO].sha256 = lambda path: "0" * 64  # hashing a sparse terabyte is not the point
        h = H.Hub(srv.url)
        files = h.files(REPO)
        with pytest.raises(H.HubError, match="not enough disk space") as err:
            h.download(files.repo, files.commit, files.models[0], models)
        assert "free some space or choose another models folder" in str(err.value)
        assert srv.file_requests(big.name) == []  # not one byte asked for
    assert not models.exists()


def test_hf_endpoint_points_the_library_at_a_mirror(sources, tmp_path):
    """HF_ENDPOINT (what users in China set for a mirror) is honoured: a fresh process with it
    set and no endpoint given lists and downloads from the mirror (one that serves the bytes at
    ``resolve`` itself, without a storage host)."""
    with HubServer({REPO: Repo(dict(sources))}, cdn=False) as mirror:
        _mirror_download(mirror, sources, tmp_path)


def _mirror_download(hub, sources, tmp_path):
    code = (
        "from gui.cluster.models.hub import Hub, default_endpoint\n"
        "import sys\n"
        "h = Hub()\n"
        "print(default_endpoint())\n"
        "f = h.files('herd-test/Tiny-GGUF')\n"
        "print(h.download(f.repo, f.commit, f.by_quant('Q4_K_M'), sys.argv[1]))\n"
    )
    env = dict(os.environ, HF_ENDPOINT=hub.url, HF_HUB_OFFLINE="0")
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path / "m")], env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == hub.url
    assert file_sha256(lines[-1]) == _sha(sources["Tiny-Q4_K_M.gguf"])
    assert hub.file_requests("Tiny-Q4_K_M.gguf")


def test_a_split_model_is_read_from_all_its_files(sources, tmp_path):
    from gui.cluster.llama.model import ModelError

    first, second = (sources[k] for k in sorted(k for k in sources if k.startswith("split/")))
    whole = inspect_model(sources["Tiny-Q8_0.gguf"])
    info = inspect_model(first)
    assert info.slot_bytes == whole.slot_bytes and info.input_bytes == whole.input_bytes
    assert info.file_bytes == first.stat().st_size + second.stat().st_size
    with pytest.raises(ModelError, match=f"not the first file of a split model; open {first.name}"):
        inspect_model(second)
    lonely = tmp_path / first.name
    shutil.copy(first, lonely)
    with pytest.raises(ModelError, match=f"{second.name}: part of a split model is missing"):
        inspect_model(lonely)


def test_another_quant_is_predicted_per_weight(hub, sources, tmp_path):
    """A node measured on the F16 file (2 bytes per weight) predicts the Q4_K_M file per weight:
    a quantised weight costs more work per byte, so per byte would promise far too much. Once a
    Q4_K_M model was measured too, Q4_K_M files are predicted from that one, per byte."""
    h = H.Hub(hub.url)
    files = h.files(REPO)
    f16 = inspect_model(sources["Tiny-F16.gguf"])
    q4 = inspect_model(sources["Tiny-Q4_K_M.gguf"])
    assert q4.n_params == f16.n_params and 0.5 < q4.bytes_per_param < 0.7
    assert f16.bytes_per_param == pytest.approx(2, abs=0.01)
    devices = _devices(1 << 34)

    def speeds(cache) -> dict[str, float]:
        measured = H.cluster_measurements(devices, cache)
        out = {}
        for quant in ("Q4_K_M", "F16"):
            m = files.by_quant(quant)
            out[quant] = H.assess(m, h.model_info(files.repo, files.commit, m), devices, 1024,
                                  host_free_bytes=1 << 34, measured=measured).tokens_per_s
        return out

    cache = MeasurementCache(tmp_path / "measure")
    _put(cache, devices, {"alpha": 1e-9, "beta": 1e-9}, f16, f16.bytes_per_param, "f16", at=1000.0)
    from_f16 = speeds(cache)
    assert from_f16["Q4_K_M"] == pytest.approx(from_f16["F16"], rel=0.15)
    # an entry without bytes per weight (an older cache) falls back to per byte: Q4_K_M far faster
    old = MeasurementCache(tmp_path / "old")
    _put(old, devices, {"alpha": 1e-9, "beta": 1e-9}, f16)
    assert speeds(old)["Q4_K_M"] > 2 * from_f16["Q4_K_M"]
    # a Q4_K_M model measured as well (earlier than the F16 one): each quant from its own kind
    _put(cache, devices, {"alpha": 3e-9, "beta": 3e-9}, q4, q4.bytes_per_param, "q4", at=500.0)
    both = speeds(cache)
    assert both["F16"] == pytest.approx(from_f16["F16"])
    nodes, _ = H.cluster_measurements(devices, cache).pick(q4)
    assert {m.model_fingerprint for m in nodes} == {"q4"}
    assert both["Q4_K_M"] != pytest.approx(from_f16["Q4_K_M"], rel=0.05)


def test_a_mixture_of_experts_file_is_predicted_by_the_bytes_a_token_reads(sources, tmp_path):
    """A token of a mixture-of-experts model reads only ``experts_used`` of each block's experts:
    its predicted speed follows those bytes, not every byte the file holds (which would make an
    8-expert, 2-used file look about 3× slower than it is)."""
    from gui.cluster.llama.random_model import DemoShape, write_demo_model

    moe = write_demo_model(tmp_path / "Tiny-MoE-Q4_K_M.gguf",
                           DemoShape(arch="qwen3moe", layers=4, embd=256, ff=512, experts=8,
                                     experts_used=2, expert_ff=256, quant="Q4_K_M"))
    f16 = inspect_model(sources["Tiny-F16.gguf"])
    devices = _devices(1 << 34)
    cache = MeasurementCache(tmp_path / "measure")
    spb = 1e-8  # seconds per byte read: the links' round trips stay a small part of a step
    _put(cache, devices, {"alpha": spb, "beta": spb}, f16, f16.bytes_per_param)
    with HubServer({"herd-test/Tiny-MoE-GGUF": Repo({moe.name: moe})}) as srv:
        h = H.Hub(srv.url)
        files = h.files("herd-test/Tiny-MoE-GGUF")
        m = files.models[0]
        info = h.model_info(files.repo, files.commit, m)
        fit = H.assess(m, info, devices, 1024, host_free_bytes=1 << 34,
                       measured=H.cluster_measurements(devices, cache))
    read, held = sum(info.active_slot_bytes), sum(info.slot_bytes)
    assert info.is_moe and read < held / 2
    assert fit.fits and fit.plan.host_layers == 0
    per_byte = spb * f16.bytes_per_param / info.bytes_per_param  # a Q4_K_M weight from an F16 one
    links = 2 * 0.0002  # both workers' round trips, as _put measured them
    assert fit.tokens_per_s == pytest.approx(1.0 / (read * per_byte + links), rel=0.01)
    assert fit.tokens_per_s > 2 * (1.0 / (held * per_byte + links))


def test_a_users_huggingface_token_is_not_sent_to_another_hub(hub, sources, tmp_path, monkeypatch):
    """HF_TOKEN is the user's huggingface.co login: a mirror (any other address) never sees it;
    a token given for that hub on purpose is sent."""
    monkeypatch.setenv("HF_TOKEN", "hf_users_own_secret")
    h = H.Hub(hub.url)
    files = h.files(REPO)
    h.model_info(files.repo, files.commit, files.by_quant("Q4_K_M"))
    h.download(files.repo, files.commit, files.by_quant("Q4_K_M"), tmp_path / "m")
    assert hub.requests and not any(r.authorization for r in hub.requests)
    hub.requests.clear()
    H.Hub(hub.url, token="hf_for_this_hub").files(REPO)
    assert {r.authorization for r in hub.requests} == {"Bearer hf_for_this_hub"}


def test_headers_are_read_once_per_commit(hub, sources):
    """Changing the context lists the repository again: its headers are not read again."""
    h = H.Hub(hub.url)
    files = h.files(REPO)
    first = H.assess_repo(h, files, _devices(1 << 34), 512, host_free_bytes=1 << 34)
    reads = [r for r in hub.requests if r.method == "GET" and r.range]
    assert len(reads) >= len(files.models)
    hub.requests.clear()
    again = H.assess_repo(H.Hub(hub.url), files, _devices(1 << 34), 4096, host_free_bytes=1 << 34)
    assert not [r for r in hub.requests if r.method == "GET" and r.range]
    assert [f.info.n_layer for f in again] == [f.info.n_layer for f in first]
    assert [f.device_fits[0].kv_bytes for f in again] != [f.device_fits[0].kv_bytes for f in first]


@pytest.mark.slow
def test_a_real_vocabulary_header_is_read_in_several_ranges(tmp_path):
    """Qwen's vocabulary makes the header about 6 MB, far past the first 256 KiB read: the
    client reads on until the tensor infos end, and no further."""
    from cluster.model_matrix import require_vocab

    from gui.cluster.llama.random_model import DemoShape, write_demo_model

    path = write_demo_model(tmp_path / "src" / "Qwen-Tiny-Q4_K_M.gguf",
                            DemoShape(layers=8, embd=256, ff=512, arch="qwen2", quant="Q4_K_M", tied=True,
                                      kv_heads=2), tokenizer=require_vocab("qwen2"))
    head = H.gguf_header_length(path.read_bytes())
    assert head > 4 * H.HEADER_FIRST_READ
    with HubServer({REPO: Repo({path.name: path})}) as srv:
        h = H.Hub(srv.url)
        files = h.files(REPO)
        info = h.model_info(files.repo, files.commit, files.models[0])
        reads = [r.range for r in srv.file_requests(path.name)]
    local = inspect_model(path)
    assert (info.architecture, info.slot_bytes, info.tied_embeddings, info.vocab_size) == (
        "qwen2", local.slot_bytes, True, local.vocab_size)
    assert len(reads) > 1 and reads[0] == f"bytes=0-{H.HEADER_FIRST_READ - 1}"
    spans = [tuple(int(x) for x in r.removeprefix("bytes=").split("-")) for r in reads]
    assert all(b[0] == a[1] + 1 for a, b in zip(spans, spans[1:]))  # each range goes on from the last
    assert head - 1 <= spans[-1][1] < 2 * head  # enough, and not the weights


def test_a_partial_of_a_file_that_changed_on_the_hub_is_not_continued(hub, sources, tmp_path):
    """The hub's file changed since the download stopped (another hash): its old bytes are
    left alone and the new file is fetched from its start."""
    h = H.Hub(hub.url)
    files = h.files(REPO)
    model = files.by_quant("Q8_0")
    models = tmp_path / "models"
    stale = H.partial_path(models, H.HubFile(model.first.path, model.first.size, "f" * 64))
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"old bytes of another version")
    path = h.download(files.repo, files.commit, model, models)
    assert _sha(path) == model.first.sha256
    assert [r.range for r in hub.file_requests("Tiny-Q8_0.gguf")] == [None]
    assert not stale.exists() and not (models / H.PARTIAL_DIR).exists()


def test_a_listed_name_with_backslashes_lands_in_the_models_folder(sources, tmp_path):
    """A hub listing ``x/..\\..\\win-Q8_0.gguf`` (a name that is two folders up on Windows) is
    downloaded into the models folder as ``win-Q8_0.gguf``: names are cut at ``\\`` as at ``/`` (#32)."""
    sly = "x/..\\..\\win-Q8_0.gguf"
    assert H.HubFile(sly, 1).name == "win-Q8_0.gguf" and H.quant_of(sly) == "Q8_0"
    with HubServer({REPO: Repo({sly: sources["Tiny-Q8_0.gguf"]})}) as srv:
        h = H.Hub(srv.url)
        files = h.files(REPO)
        (model,) = files.models
        models = tmp_path / "deep" / "models"
        path = h.download(files.repo, files.commit, model, models)
    assert path == models / "win-Q8_0.gguf" and _sha(path) == _sha(sources["Tiny-Q8_0.gguf"])
    assert os.listdir(models) == ["win-Q8_0.gguf"]
