"""agent.process_memory: the empty CA store during an import, and handing freed heap back."""

from __future__ import annotations

import os
import ssl
import subprocess
import sys

import pytest

from agent.process_memory import release_free_heap, without_ca_store

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="OpenSSL reads its CA paths from the environment on Linux only")


@linux_only
def test_tls_contexts_made_inside_have_no_ca_certificates():
    outside = ssl.create_default_context().cert_store_stats()["x509_ca"]
    if outside == 0:
        pytest.skip("this system has no CA certificates, so there is nothing to leave out")
    with without_ca_store():
        inside = ssl.create_default_context().cert_store_stats()["x509_ca"]
    assert inside == 0
    assert ssl.create_default_context().cert_store_stats()["x509_ca"] == outside


@pytest.mark.parametrize("before", [None, "/somewhere/ca.pem"])
def test_environment_is_restored(monkeypatch, before):
    for key in ("SSL_CERT_FILE", "SSL_CERT_DIR"):
        if before is None:
            monkeypatch.delenv(key, raising=False)
        else:
            monkeypatch.setenv(key, before)
    with pytest.raises(RuntimeError), without_ca_store():
        assert os.environ["SSL_CERT_FILE"] == os.devnull
        raise RuntimeError("the block fails")
    assert os.environ.get("SSL_CERT_FILE") == before
    assert os.environ.get("SSL_CERT_DIR") == before


_FRAGMENTED_HEAP = r"""
import sys
from agent.process_memory import release_free_heap

def rss_kb():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS"))

# 40 MB in 20 KB blocks (C heap, below the mmap threshold), then free all but the last one,
# which pins the top of the heap so free() alone cannot shrink it.
blocks = [bytes(bytearray(20_000)) for _ in range(2000)]
del blocks[:-1]
before = rss_kb()
print(release_free_heap(), before, rss_kb())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="malloc_trim is glibc's")
def test_release_free_heap_returns_freed_memory_to_the_os():
    # A fresh interpreter, so what this test process did before does not blur the numbers.
    out = subprocess.run([sys.executable, "-c", _FRAGMENTED_HEAP], capture_output=True, text=True,
                         check=True, timeout=60).stdout.split()
    released, before, after = out[0] == "True", int(out[1]), int(out[2])
    if not released:
        pytest.skip("this C library has no malloc_trim")
    assert before - after > 20_000, f"RSS {before} kB -> {after} kB"
