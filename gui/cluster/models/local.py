"""The GGUF models already on this PC, and whether each fits by its size.

Typing a model's path into a file dialog was most of a first chat's keystrokes; the models a
person has are usually in a few well-known folders: herd's own, the recent files, and the folders
of the other llama.cpp front ends (LM Studio, GPT4All, Jan), llama.cpp's own download cache and
the Hugging Face cache. :func:`model_folders` names them for this OS, :func:`scan_folder` lists
the models in one (bounded, loop-safe, silent about what cannot be read), :func:`find_local_models`
puts them together and :func:`size_verdict` says whether a file fits the memory free now.

Nothing here reads a GGUF header: the size check uses the file's bytes only, because reading the
header of a model with a quarter-million-token vocabulary takes seconds per file.
"""

from __future__ import annotations

import os
import re
import stat
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from agent.i18n import QT_TRANSLATE_NOOP, translate
from gui.cluster.planning.plan import MASTER_MACHINE, ram_machine

#: The names of the places models are found in, as shown (translated where shown, by
#: :func:`source_label`).
HERD = QT_TRANSLATE_NOOP("LocalModels", "herd")
RECENT = QT_TRANSLATE_NOOP("LocalModels", "recent")
LM_STUDIO = "LM Studio"
GPT4ALL = "GPT4All"
JAN = "Jan"
LLAMA_CPP = "llama.cpp"
HUGGING_FACE = "Hugging Face"

#: How deep below a folder a scan looks (the Hugging Face cache nests models five deep:
#: ``models--org--name/snapshots/<hash>/<file>``; LM Studio three).
MAX_DEPTH = 6
#: How many directory entries one folder's scan looks at before it stops (a home folder pointed
#: at by mistake must not keep the scan busy for minutes).
MAX_ENTRIES = 20000

# ``name-00001-of-00003.gguf``: llama.cpp's gguf-split naming of a model in several files.
_SHARD = re.compile(r"^(?P<stem>.+)-(?P<part>\d{5})-of-(?P<total>\d{5})\.gguf$", re.IGNORECASE)


@dataclass(frozen=True)
class LocalModel:
    """A model file found on this PC.

    Attributes:
        path: the file to open (for a split model, its first shard).
        name: the file's name.
        size_bytes: the model's bytes on disk (for a split model, all shards together).
        source: where it was found (one of the names above: :data:`HERD`, :data:`LM_STUDIO` …).
        shards: how many files the model is (1 unless split).
    """

    path: Path
    name: str
    size_bytes: int
    source: str
    shards: int = 1


@dataclass(frozen=True)
class SizeVerdict:
    """Whether a model's file fits the memory free now, by its size alone.

    Attributes:
        fits: the file's bytes are at most the free memory counted.
        short_bytes: how many more bytes would be needed (0 when it fits).
    """

    fits: bool
    short_bytes: int


def source_label(source: str) -> str:
    """``source`` as shown to the user (herd's own names translated; app names are names)."""
    return translate("LocalModels", source)


def model_folders(herd_dir: str | os.PathLike | None = None, *, home: Path | None = None,
                  env: Mapping[str, str] | None = None, platform: str | None = None) -> list[tuple[str, Path]]:
    """``[(source, folder)]`` where models are usually kept on this OS, herd's own first.

    ``herd_dir`` is herd's models folder (the ``hub/models_dir`` setting, else
    :func:`gui.cluster.models.hub.models_dir`); ``home``, ``env`` and ``platform`` default to
    this PC's. Folders that do not exist are listed too: :func:`scan_folder` skips them."""
    env = os.environ if env is None else env
    home = Path.home() if home is None else home
    platform = sys.platform if platform is None else platform
    if herd_dir is None:
        from gui.cluster.models.hub import models_dir

        herd_dir = models_dir()
    folders: list[tuple[str, Path]] = [(HERD, Path(herd_dir))]
    folders += [(LM_STUDIO, home / ".lmstudio" / "models"), (LM_STUDIO, home / ".cache" / "lm-studio" / "models")]
    local_app_data = Path(env["LOCALAPPDATA"]) if env.get("LOCALAPPDATA") else home / "AppData" / "Local"
    if platform.startswith("win"):
        folders.append((GPT4ALL, local_app_data / "nomic.ai" / "GPT4All"))
    elif platform == "darwin":
        folders.append((GPT4ALL, home / "Library" / "Application Support" / "nomic.ai" / "GPT4All"))
    else:
        folders.append((GPT4ALL, home / ".local" / "share" / "nomic.ai" / "GPT4All"))
    folders.append((JAN, home / "jan" / "models"))
    if env.get("LLAMA_CACHE"):
        folders.append((LLAMA_CPP, Path(env["LLAMA_CACHE"])))
    elif platform.startswith("win"):
        folders.append((LLAMA_CPP, local_app_data / "llama.cpp"))
    elif platform == "darwin":
        folders.append((LLAMA_CPP, home / "Library" / "Caches" / "llama.cpp"))
    else:
        folders.append((LLAMA_CPP, home / ".cache" / "llama.cpp"))
    if env.get("HF_HUB_CACHE"):
        folders.append((HUGGING_FACE, Path(env["HF_HUB_CACHE"])))
    elif env.get("HF_HOME"):
        folders.append((HUGGING_FACE, Path(env["HF_HOME"]) / "hub"))
    else:
        folders.append((HUGGING_FACE, home / ".cache" / "huggingface" / "hub"))
    return folders


def _is_model_file(name: str) -> bool:
    # vision projectors go with a model; they are not one to open on their own
    return name.lower().endswith(".gguf") and "mmproj" not in name.lower()


def _gguf_files(folder: Path, max_depth: int, max_entries: int) -> list[tuple[Path, int]]:
    """``[(path, bytes)]`` of the ``*.gguf`` files under ``folder`` (symlinks to files followed,
    as the Hugging Face cache's snapshots are; a directory reached twice is scanned once)."""
    found: list[tuple[Path, int]] = []
    seen_dirs: set[tuple[int, int]] = set()
    budget = max_entries
    stack = [(folder, 0)]
    while stack and budget > 0:
        here, depth = stack.pop()
        try:
            st = os.stat(here)
        except OSError:
            continue
        key = (st.st_dev, st.st_ino)
        if key in seen_dirs:  # a symlink loop, or the same folder by two names
            continue
        seen_dirs.add(key)
        try:
            with os.scandir(here) as entries:
                listed = []
                for entry in entries:
                    budget -= 1
                    if budget < 0:
                        break
                    listed.append(entry)
        except OSError:  # unreadable: not ours to complain about
            continue
        for entry in sorted(listed, key=lambda e: e.name):
            try:
                if entry.is_dir():  # (follows a symlink; the seen set stops loops)
                    if depth < max_depth and not entry.name.startswith("."):
                        stack.append((Path(entry.path), depth + 1))
                elif _is_model_file(entry.name):
                    st = entry.stat()  # the target's size for a symlink
                    if stat.S_ISREG(st.st_mode):
                        found.append((Path(entry.path), st.st_size))
            except OSError:  # a broken link, a file gone meanwhile
                continue
    return found


def group_shards(files: Iterable[tuple[Path, int]], source: str) -> list[LocalModel]:
    """One :class:`LocalModel` per model: a split model's first shard stands for all of its
    shards (their bytes added up); a split model whose first shard is missing is left out."""
    models: list[LocalModel] = []
    split: dict[tuple[Path, str, int], dict[int, tuple[Path, int]]] = {}
    for path, size in files:
        m = _SHARD.match(path.name)
        if m is None:
            models.append(LocalModel(path, path.name, size, source))
            continue
        split.setdefault((path.parent, m["stem"], int(m["total"])), {})[int(m["part"])] = (path, size)
    for (_folder, _stem, total), parts in split.items():
        if 1 not in parts:
            continue
        first = parts[1][0]
        models.append(LocalModel(first, first.name, sum(size for _p, size in parts.values()), source,
                                 shards=total))
    return sorted(models, key=lambda m: m.name.lower())


def scan_folder(folder: str | os.PathLike, source: str, *, max_depth: int = MAX_DEPTH,
                max_entries: int = MAX_ENTRIES) -> list[LocalModel]:
    """The models under ``folder``, found as ``source``; empty when it does not exist or cannot
    be read. Looks at most ``max_depth`` folders deep and ``max_entries`` entries in all."""
    return group_shards(_gguf_files(Path(folder), max_depth, max_entries), source)


def _file_model(path: Path, source: str) -> LocalModel | None:
    try:
        st = path.stat()
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    m = _SHARD.match(path.name)
    if m is None:
        return LocalModel(path, path.name, st.st_size, source)
    grouped = group_shards(_gguf_files(path.parent, 0, MAX_ENTRIES), source)
    return next((g for g in grouped if g.path == path), None)


def find_local_models(herd_dir: str | os.PathLike | None = None, recent: Iterable[str] = (), *,
                      home: Path | None = None, env: Mapping[str, str] | None = None,
                      platform: str | None = None) -> list[LocalModel]:
    """Every model on this PC in the known folders (:func:`model_folders`) and the ``recent``
    files that still exist; each file once (by its real path), under the first place it is
    found in: the recent files first, then herd's folder, then the other apps'."""
    found: list[LocalModel] = []
    for p in recent:
        model = _file_model(Path(p), RECENT)
        if model is not None:
            found.append(model)
    for source, folder in model_folders(herd_dir, home=home, env=env, platform=platform):
        found += scan_folder(folder, source)
    unique: dict[str, LocalModel] = {}
    for model in found:
        try:
            key = os.path.realpath(model.path)
        except OSError:
            key = str(model.path)
        unique.setdefault(key, model)
    return list(unique.values())


def size_verdict(size_bytes: int, devices: Iterable, host_free: int) -> SizeVerdict:
    """Whether ``size_bytes`` of weights fit the free memory of ``devices`` (the plan devices the
    cluster can use now) plus ``host_free`` (this PC's free RAM), by size alone.

    A computer's RAM is counted once, however many of its CPU devices are offered (a worker on
    this PC shares its RAM with the host). The file's bytes stand for the weights; the context's
    cache comes on top, which is why this is called a size check where it is shown."""
    free = max(0, int(host_free))
    counted = {MASTER_MACHINE}
    for d in devices:
        machine = ram_machine(d)
        if machine is not None:
            if machine in counted:
                continue
            counted.add(machine)
        free += max(0, int(d.free_bytes))
    short = max(0, int(size_bytes) - free)
    return SizeVerdict(short == 0, short)
