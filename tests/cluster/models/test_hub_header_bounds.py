"""A hub's GGUF header is read within bounds (#32, item 2): through the real ``huggingface_hub``
client against the local test hub on 127.0.0.1, a header that claims more than it holds is
refused after the first read, and one longer than any model's is refused before more than
:data:`~gui.cluster.models.hub.HEADER_MAX_BYTES` are fetched — in words naming the key."""

from __future__ import annotations

import struct

import pytest
from cluster.hub_server import HubServer, Repo
from cluster.padded_gguf import write_padded_model

from gui.cluster.models import hub as H

REPO = "herd-test/Hostile-GGUF"


def _fetched(srv: HubServer, name: str) -> int:
    """Bytes the client asked for of ``name``, by its ranges."""
    total = 0
    for r in srv.file_requests(name):
        start, end = (int(x) for x in r.range.removeprefix("bytes=").split("-"))
        total += end - start + 1
    return total


def _model_info(srv: HubServer):
    h = H.Hub(srv.url)
    files = h.files(REPO)
    return h.model_info(files.repo, files.commit, files.models[0])


def test_a_header_claiming_2_62_numbers_is_refused_after_the_first_read(tmp_path):
    path = tmp_path / "Hostile-Q8_0.gguf"
    key = struct.pack("<Q", 21) + b"tokenizer.ggml.scores" + struct.pack("<IIQ", 9, 4, 1 << 62)
    with open(path, "wb") as f:  # 100 MB, nearly all of it a hole
        f.write(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + key)
        f.truncate(100 << 20)
    with HubServer({REPO: Repo({path.name: path})}) as srv:
        with pytest.raises(H.HubError) as refused:
            _model_info(srv)
        fetched = _fetched(srv, path.name)
    assert "tokenizer.ggml.scores" in str(refused.value) and "b'" not in str(refused.value)
    assert fetched == H.HEADER_FIRST_READ


@pytest.mark.slow
def test_a_header_longer_than_any_models_is_refused_within_the_cap(tmp_path):
    """40 MiB of header (5 million strings): longer than the largest vocabulary's; before, the
    hub path read on up to 64 MiB."""
    path = write_padded_model(tmp_path / "Long-Header-Q8_0.gguf", 5_242_880)
    with HubServer({REPO: Repo({path.name: path})}) as srv:
        with pytest.raises(H.HubError) as refused:
            _model_info(srv)
        fetched = _fetched(srv, path.name)
    assert "does not end within" in str(refused.value) and "herd.pad" in str(refused.value)
    assert fetched <= H.HEADER_MAX_BYTES
