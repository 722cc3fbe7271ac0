"""The engine manager against real archives of the real llama.cpp programs, served over HTTP on
loopback, and the failures a user can meet: interrupted download, checksum mismatch, corrupt
archive, wrong contents, missing build tools, no engine at all."""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import os
import subprocess
import sys
import tarfile
import threading
import time
import zipfile
from pathlib import Path

import pytest
from conftest import free_port

from agent.engine_lookup import MANIFEST_NAME, PINNED_BUILD, EngineError, find_engine, rpc_hello
from gui.cluster.llama import engine_manager as mgr

ASSET_TGZ = f"llama-b{PINNED_BUILD}-bin-ubuntu-x64.tar.gz"
ASSET_ZIP = f"llama-b{PINNED_BUILD}-bin-ubuntu-x64.zip"


def _tgz_of(folder: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=1) as tf:
        for item in sorted(folder.iterdir()):
            if item.name != MANIFEST_NAME:
                tf.add(item, arcname=f"build/bin/{item.name}")
    return buf.getvalue()


def _zip_of(folder: Path) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        for item in sorted(folder.iterdir()):
            if item.name != MANIFEST_NAME and not item.is_symlink():
                zf.write(item, arcname=item.name)
            elif item.is_symlink():
                # zip has no portable links: store the target's bytes under the link's name
                info = zipfile.ZipInfo(item.name)
                info.external_attr = 0o755 << 16
                zf.writestr(info, item.read_bytes())
    return buf.getvalue()


class ReleaseServer:
    """A tiny HTTP server on loopback that plays the release host and its metadata API."""

    def __init__(self) -> None:
        self.assets: dict[str, bytes] = {}
        self.digests: dict[str, str] = {}
        self.truncate: set[str] = set()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):  # keep test output clean
                pass

            def do_GET(self):
                if self.path == f"/api/b{PINNED_BUILD}":
                    body = json.dumps({"assets": [{"name": n, "digest": f"sha256:{d}"}
                                                  for n, d in outer.digests.items()]}).encode()
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                name = self.path.rsplit("/", 1)[-1]
                if self.path != f"/dl/b{PINNED_BUILD}/{name}" or name not in outer.assets:
                    self.send_error(404)
                    return
                data = outer.assets[name]
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if name in outer.truncate:
                    self.wfile.write(data[: len(data) // 3])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(data)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def publish(self, name: str, data: bytes, digest: str | None = None) -> None:
        self.assets[name] = data
        self.digests[name] = digest or hashlib.sha256(data).hexdigest()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def release_server():
    srv = ReleaseServer()
    yield srv
    srv.close()


def _install(srv: ReleaseServer, dest: Path, **kw):
    seen: list[tuple[str, float | None]] = []
    eng = mgr.install_from_release(base_url=f"{srv.base}/dl", api_url=f"{srv.base}/api", dest=dest,
                                   progress=lambda s, f: seen.append((s, f)), **kw)
    return eng, seen


def _leftovers(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir()) if parent.exists() else []


@pytest.mark.engine
@pytest.mark.parametrize("asset", [ASSET_TGZ, ASSET_ZIP])
def test_release_install_gives_a_working_engine(engine, release_server, tmp_path, asset):
    data = _tgz_of(engine.folder) if asset.endswith(".tar.gz") else _zip_of(engine.folder)
    release_server.publish(asset, data)
    dest = tmp_path / "engines" / f"b{PINNED_BUILD}-cpu"
    eng, seen = _install(release_server, dest, asset_names=[asset])
    assert eng.complete and eng.build == PINNED_BUILD and eng.origin == "release"
    manifest = json.loads((dest / MANIFEST_NAME).read_text())
    assert manifest["archive_sha256"] == hashlib.sha256(data).hexdigest()
    # the progress bar saw the download advance to the end
    fractions = [f for s, f in seen if s.startswith("Downloading") and f is not None]
    assert fractions and fractions[-1] == pytest.approx(1.0) and fractions == sorted(fractions)
    # the installed RPC worker really runs and speaks the pinned protocol
    port = free_port()
    proc = subprocess.Popen([str(eng.rpc_server), "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                assert rpc_hello("127.0.0.1", port) == "7.0.0"
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
    finally:
        proc.terminate()
        proc.wait(timeout=5)
    # nothing but the engine is left beside it
    assert _leftovers(dest.parent) == [dest.name]


@pytest.mark.engine
def test_release_install_falls_back_to_the_second_asset_name(engine, release_server, tmp_path):
    release_server.publish(ASSET_ZIP, _zip_of(engine.folder))
    eng, _ = _install(release_server, tmp_path / "e", asset_names=[ASSET_TGZ, ASSET_ZIP])
    assert eng.complete


def test_interrupted_download_leaves_nothing(release_server, tmp_path):
    release_server.publish(ASSET_TGZ, os.urandom(3_000_000))
    release_server.truncate.add(ASSET_TGZ)
    dest = tmp_path / "engines" / "b-cpu"
    with pytest.raises(EngineError, match="interrupted"):
        _install(release_server, dest, asset_names=[ASSET_TGZ])
    assert not dest.exists()
    assert _leftovers(dest.parent) == []


def test_checksum_mismatch_is_refused(release_server, tmp_path):
    release_server.publish(ASSET_TGZ, b"not what was published" * 1000, digest="0" * 64)
    dest = tmp_path / "engines" / "b-cpu"
    with pytest.raises(EngineError, match="Checksum mismatch"):
        _install(release_server, dest, asset_names=[ASSET_TGZ])
    assert _leftovers(dest.parent) == []


def test_corrupt_archive_is_refused(release_server, tmp_path):
    release_server.publish(ASSET_TGZ, b"\x1f\x8b\x08" + os.urandom(50_000))
    dest = tmp_path / "engines" / "b-cpu"
    with pytest.raises(EngineError, match="corrupt"):
        _install(release_server, dest, asset_names=[ASSET_TGZ])
    assert _leftovers(dest.parent) == []


def test_archive_without_the_programs_is_refused(release_server, tmp_path):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("README.md", "no programs here")
    release_server.publish(ASSET_ZIP, buf.getvalue())
    dest = tmp_path / "engines" / "b-cpu"
    with pytest.raises(EngineError, match="does not contain llama-server"):
        _install(release_server, dest, asset_names=[ASSET_ZIP])
    assert _leftovers(dest.parent) == []


def test_unchecked_archive_is_refused(release_server, tmp_path):
    """No published checksum and none given: we do not install blind."""
    release_server.publish(ASSET_ZIP, b"whatever")
    release_server.digests.clear()
    with pytest.raises(EngineError, match="refusing to install an unchecked archive"):
        _install(release_server, tmp_path / "e", asset_names=[ASSET_ZIP])


@pytest.mark.engine
def test_wrong_build_is_refused(engine, tmp_path):
    """A folder whose llama-server reports another build is not accepted as our engine."""
    with pytest.raises(EngineError, match="needs build 1"):
        mgr.verify_engine_folder(engine.folder, expected_build=1)


@pytest.mark.engine
def test_second_install_is_instant(engine, tmp_path):
    start = time.monotonic()
    eng = mgr.install_engine(method="source", dest=engine.folder)
    assert eng.complete and eng.folder == engine.folder
    # reuse means no download and no build: it returns without touching the network
    assert time.monotonic() - start < 10


def test_missing_cmake_is_explained(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(EngineError, match="cmake is not installed"):
        mgr.install_from_source(dest=tmp_path / "e", sdist=tmp_path / "none.tar.gz")
    assert not (tmp_path / "e").exists()


def test_wrong_sdist_is_refused(tmp_path):
    fake = tmp_path / mgr.SDIST_FILENAME
    fake.write_bytes(b"definitely not llama.cpp")
    with pytest.raises(EngineError, match="Checksum mismatch"):
        mgr.install_from_source(dest=tmp_path / "engines" / "e", sdist=fake)
    assert _leftovers(tmp_path / "engines") == []


def test_asset_names_per_platform():
    assert mgr.release_asset_names(system="Windows", machine="AMD64", backend="cuda") == [
        f"llama-b{PINNED_BUILD}-bin-win-cuda-12.4-x64.zip"]
    assert mgr.release_asset_names(system="Linux", machine="aarch64")[0].endswith("ubuntu-arm64.tar.gz")
    with pytest.raises(EngineError, match="Only the cpu backend"):
        mgr.release_asset_names(system="Linux", backend="cuda")


def _herd(args: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gui.main", *args], capture_output=True, text=True,
                          env=env, timeout=120, cwd=Path(__file__).resolve().parents[3])


def test_status_without_engine_says_what_to_do(tmp_path):
    env = dict(os.environ, HOME=str(tmp_path), XDG_DATA_HOME=str(tmp_path / "data"), PATH=os.path.dirname(sys.executable))
    env.pop("HERD_ENGINE_DIR", None)
    r = _herd(["engine", "status"], env)
    assert r.returncode == 1
    assert "herd engine install" in r.stdout


@pytest.mark.engine
def test_status_json_reports_the_engine(engine):
    env = dict(os.environ, HERD_ENGINE_DIR=str(engine.folder))
    r = _herd(["engine", "status", "--json"], env)
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["complete"] and info["build"] == PINNED_BUILD and info["source"] == "env"
    assert info["rpc_server"].endswith("ggml-rpc-server")


def test_find_engine_accepts_the_old_rpc_server_name(tmp_path, monkeypatch):
    for name in ("rpc-server", "llama-server"):
        p = tmp_path / name
        p.write_text("#!/bin/sh\n")
        p.chmod(0o755)
    eng = find_engine(tmp_path)
    assert eng.complete and eng.rpc_server.name == "rpc-server" and eng.source == "setting"


def test_vulkan_build_names_the_packages_it_needs(tmp_path, monkeypatch):
    # cmake and a compiler are there, the shader compiler is not: say what to install, build nothing.
    import shutil as sh
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("cmake", "c++", "g++"):
        found = sh.which(tool)
        if found:
            (bindir / tool).symlink_to(found)
    monkeypatch.setenv("PATH", str(bindir))
    with pytest.raises(EngineError, match="A Vulkan build needs the glslc shader compiler.*apt-get install "
                                          "libvulkan-dev glslc spirv-headers mesa-vulkan-drivers"):
        mgr.install_from_source(backend="vulkan", dest=tmp_path / "e", sdist=tmp_path / "none.tar.gz")
    assert not (tmp_path / "e").exists()


def test_a_backend_source_builds_cannot_make_says_what_to_do(tmp_path):
    with pytest.raises(EngineError, match="CUDA: use the release archive on Windows"):
        mgr.install_from_source(backend="cuda", dest=tmp_path / "e")


@pytest.mark.parametrize("member", ["../unpacked.secret", "..\\unpacked.secret", "/etc/unpacked.secret"])
def test_an_archive_member_outside_the_folder_changes_nothing_outside(tmp_path, member):
    """Zip-slip (#32): ``../unpacked.secret`` passed a prefix check (``…/unpacked.secret`` starts
    with ``…/unpacked``) and its mode 0777 was set on the file of that name beside the folder."""
    secret = tmp_path / "unpacked.secret"
    secret.write_text("keep")
    secret.chmod(0o600)
    into = tmp_path / "unpacked"
    into.mkdir()
    archive = tmp_path / "engine.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        info = zipfile.ZipInfo(member)
        info.external_attr = 0o100777 << 16
        zf.writestr(info, "x")
    try:
        mgr._extract(archive, into)
    except EngineError as exc:
        assert "unsafe path" in str(exc)
    assert secret.stat().st_mode & 0o777 == 0o600 and secret.read_text() == "keep"
    for p in into.rglob("*"):  # whatever was written stayed inside
        assert p.resolve().is_relative_to(into.resolve())
