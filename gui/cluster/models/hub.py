"""Getting a model that fits the cluster from a model hub (issue #14).

The hub client is ``huggingface_hub`` itself — nothing here speaks the hub's API by hand. It
honours ``HF_ENDPOINT`` (and :class:`Hub` takes an endpoint), so a mirror works the same as
huggingface.co; users in China reach the hub through one.

* :meth:`Hub.search` finds repositories by name; :meth:`Hub.files` lists a repository's GGUF
  files with their sizes, LFS hashes and quant types, the shards of a split GGUF
  (``name-00001-of-00003.gguf`` …) grouped into one :class:`ModelFile`.
* :meth:`Hub.model_info` reads a file's GGUF header with ranged reads (the header and the tensor
  infos are at the start of each file) into a sparse local copy of the same size, so
  :func:`gui.cluster.llama.model.inspect_model` — the same reader the app uses for local files — gives
  its :class:`~gui.cluster.llama.model.ModelInfo` without any weight being downloaded.
* :func:`assess` says whether a file fits the nodes plus the host at a context, with the
  planner's own estimate, which split would be used, and the decode speed the cost model
  predicts from the nodes' measured speeds (or that they are not measured yet);
  :func:`suggest` marks the largest file that fits.
* :meth:`Hub.download` fetches a file with progress (bytes, rate, ETA), checks the free disk
  space first, resumes an interrupted download with an HTTP Range request, checks the SHA-256
  against the hub's LFS hash and only then moves the file into the models folder (atomically).
  Partial files live in the models folder's ``.herd-downloads`` subfolder, never as a ``.gguf``
  where the app looks for models.

Everything here is Qt-free and blocking (the HTTP client is synchronous): the CLI calls it
directly, the app on a worker thread.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from glob import escape as glob_escape
from pathlib import Path

from agent.i18n import translate

#: Subfolder of the models folder that holds partial downloads (resumable, never a .gguf).
PARTIAL_DIR = ".herd-downloads"
#: First ranged read of a header; grown until the header and the tensor infos are in.
HEADER_FIRST_READ = 256 * 1024
#: A header larger than this is not a model's (the local reader's cap, ``MAX_HEADER_BYTES`` of
#: gui.cluster.llama.gguf_header). It bounds what a hub can make the app fetch and hold (#32).
HEADER_MAX_BYTES = 32 << 20
#: Disk space kept free beyond the download itself (the OS and the app need some too).
DISK_MARGIN_BYTES = 64 << 20

_SHARD_RE = re.compile(r"^(?P<stem>.+)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$", re.IGNORECASE)
# Quant labels as GGUF publishers put them in file names: Q4_K_M, IQ3_XS, Q8_0, F16, BF16 …
_QUANT_RE = re.compile(r"(?:^|[-._])((?:I?Q[1-8](?:_[0-9A-Z]+)*)|BF16|F16|F32)(?=[-._]|$)", re.IGNORECASE)
_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")


#: Headers already read, by (endpoint, repo, commit, first file): changing the context or
#: listing a repository again does not read them again.
_INFO_CACHE: dict[tuple[str, str, str, str], object] = {}
_INFO_CACHE_SIZE = 256
_INFO_LOCK = threading.Lock()
#: Headers read at once when a repository is listed (a real vocabulary makes each a few MB).
HEADER_READERS = 4


class HubError(RuntimeError):
    """A hub operation failed. The message says what went wrong and what to do."""


class DownloadCancelled(HubError):
    """The user stopped the download; the partial file is kept for resuming."""


@dataclass(frozen=True)
class HubFile:
    """One file in a hub repository.

    Attributes:
        path: its path in the repository.
        size: bytes.
        sha256: the LFS SHA-256 the hub lists for it (None for a file not in LFS).
    """

    path: str
    size: int
    sha256: str | None = None

    @property
    def name(self) -> str:
        """The file's name without the repository folders, cut at ``\\`` too: a listed
        ``x/..\\..\\m.gguf`` is ``m.gguf``, never a path two folders up on Windows (#32)."""
        return re.split(r"[/\\]", self.path)[-1]


@dataclass(frozen=True)
class ModelFile:
    """A model as a user picks it: one GGUF file, or all the shards of a split one.

    Attributes:
        name: what to show (the file name; a split model's name without the shard suffix).
        parts: its files in order (one for an ordinary GGUF).
        quant: the quant type in the file name (``Q4_K_M``), or ``""`` when it names none.
    """

    name: str
    parts: tuple[HubFile, ...]
    quant: str = ""

    @property
    def size(self) -> int:
        """Bytes of all its files."""
        return sum(p.size for p in self.parts)

    @property
    def first(self) -> HubFile:
        """The file llama.cpp is given (the first shard)."""
        return self.parts[0]

    @property
    def is_split(self) -> bool:
        """True for a model in several files."""
        return len(self.parts) > 1


@dataclass(frozen=True)
class RepoHit:
    """A repository found by :meth:`Hub.search`."""

    repo: str
    downloads: int | None = None
    likes: int | None = None


@dataclass(frozen=True)
class RepoFiles:
    """A repository's GGUF models at one commit (downloads pin that commit)."""

    repo: str
    commit: str
    models: tuple[ModelFile, ...]

    def find(self, name: str) -> ModelFile:
        """The model whose name or one of whose file paths is ``name``; :class:`HubError` if none."""
        for m in self.models:
            if name == m.name or any(name in (p.path, p.name) for p in m.parts):
                return m
        have = ", ".join(m.name for m in self.models) or "none"
        raise HubError(translate("Hub", "{repo} has no GGUF file named {name} (it has: {have})")
                       .format(repo=self.repo, name=name, have=have))

    def by_quant(self, quant: str) -> ModelFile:
        """The model of quant type ``quant`` (case-insensitive); :class:`HubError` if none."""
        for m in self.models:
            if m.quant.upper() == quant.upper():
                return m
        have = ", ".join(sorted({m.quant for m in self.models if m.quant})) or "none"
        raise HubError(translate("Hub", "{repo} has no {quant} file (quant types there: {have})")
                       .format(repo=self.repo, quant=quant, have=have))


def quant_of(filename: str) -> str:
    """The quant type a GGUF file name carries (``Qwen2-7B-Q4_K_M.gguf`` → ``Q4_K_M``), or ``""``."""
    stem = re.split(r"[/\\]", filename)[-1]
    m = _SHARD_RE.match(stem)
    stem = m.group("stem") if m else re.sub(r"\.gguf$", "", stem, flags=re.IGNORECASE)
    found = _QUANT_RE.findall(stem)
    return found[-1].upper() if found else ""


def group_gguf_files(files: Sequence[HubFile]) -> list[ModelFile]:
    """GGUF files as models: each plain ``.gguf`` is one, the shards of a split GGUF together are
    one (an incomplete set of shards is left out: llama.cpp could not load it). Sorted by size."""
    singles: list[ModelFile] = []
    shards: dict[tuple[str, int], dict[int, HubFile]] = {}
    for f in files:
        if not f.path.lower().endswith(".gguf"):
            continue
        m = _SHARD_RE.match(f.path)
        if m:
            shards.setdefault((m.group("stem"), int(m.group("count"))), {})[int(m.group("no"))] = f
        else:
            singles.append(ModelFile(f.name, (f,), quant_of(f.path)))
    for (stem, count), parts in shards.items():
        if sorted(parts) != list(range(1, count + 1)):
            continue
        ordered = tuple(parts[i] for i in range(1, count + 1))
        singles.append(ModelFile(ordered[0].name, ordered, quant_of(ordered[0].path)))
    return sorted(singles, key=lambda m: (m.size, m.name))


# --------------------------------------------------------------------------------------------
# the GGUF header's length, to know how much of a file to read


class _NeedMore(Exception):
    def __init__(self, nbytes: int, why: str = "") -> None:
        self.nbytes = nbytes
        self.why = why  # where the header reader stopped, in words


def gguf_header_length(buf: bytes) -> int:
    """Bytes from the start of a GGUF file to its first tensor's data (header, metadata, tensor
    infos, alignment padding). Raises ``_NeedMore(n)`` when ``buf`` holds fewer than ``n`` of
    the bytes needed, :class:`HubError` when it is not a GGUF. The bounded reader the app uses
    for local files reads it (#32: a count is checked against the bytes there are before more
    are fetched or walked)."""
    from gui.cluster.llama.gguf_header import HeaderError, HeaderTruncated, parse_header

    try:
        return parse_header(buf).data_offset
    except HeaderTruncated as e:
        raise _NeedMore(e.needed, str(e)) from None
    except HeaderError as e:
        raise HubError(translate("Hub", "not a usable GGUF file: {why}").format(why=e)) from None


# --------------------------------------------------------------------------------------------
# progress


@dataclass(frozen=True)
class DownloadProgress:
    """Where a download stands.

    Attributes:
        phase: ``"download"`` or ``"verify"`` (hashing what arrived).
        file: the file being worked on.
        done_bytes: bytes of the whole model done (downloaded, or hashed while verifying).
        total_bytes: bytes of the whole model.
        rate_bps: bytes per second over the last seconds (0 at the start).
        eta_s: seconds left at that rate, or None when not known yet.
        resumed_bytes: bytes that were already there from an earlier, interrupted download.
    """

    phase: str
    file: str
    done_bytes: int
    total_bytes: int
    rate_bps: float = 0.0
    eta_s: float | None = None
    resumed_bytes: int = 0


class _Rate:
    """Bytes per second over a sliding window of a few seconds."""

    def __init__(self, window_s: float = 3.0) -> None:
        self.window_s = window_s
        self.samples: list[tuple[float, int]] = []

    def add(self, done: int) -> float:
        now = time.monotonic()
        self.samples.append((now, done))
        while len(self.samples) > 2 and now - self.samples[0][0] > self.window_s:
            self.samples.pop(0)
        t0, d0 = self.samples[0]
        return (done - d0) / (now - t0) if now > t0 else 0.0


class _ProgressReporter:
    """Turns the bytes a download has done into :class:`DownloadProgress` reports, with the rate
    over the last seconds and the time left."""

    def __init__(self, progress: Callable[[DownloadProgress], None] | None, total: int, done: int) -> None:
        self.progress = progress
        self.total = total
        self.done = done
        self.resumed = done
        self.rate = _Rate()

    def add(self, phase: str, name: str, n: int) -> None:
        """``n`` more bytes arrived."""
        self.done += n
        self.report(phase, name, self.done)

    def report(self, phase: str, name: str, value: int) -> None:
        """Report that ``value`` bytes of the whole model are done in ``phase``."""
        if self.progress is None:
            return
        bps = self.rate.add(value)
        eta = (self.total - value) / bps if bps > 0 else None
        self.progress(DownloadProgress(phase, name, value, self.total, bps, eta, self.resumed))


def _resumable_parts(models_dir: Path, model: "ModelFile") -> tuple[list[Path], list[int]]:
    """The partial file of each part of ``model`` and how many of its bytes are already there.

    A partial file of another version of the same file is deleted (its bytes are no use), and one
    longer than the file is started again (it is not a prefix of it)."""
    partial_dir = models_dir / PARTIAL_DIR
    parts = [partial_path(models_dir, p) for p in model.parts]
    for f, p in zip(parts, model.parts):
        for old in (partial_dir.glob(f"{glob_escape(p.name)}.*.part") if partial_dir.is_dir() else ()):
            if old != f:
                old.unlink(missing_ok=True)
    have = [(f.stat().st_size if f.is_file() else 0) for f in parts]
    for i, (f, p) in enumerate(zip(parts, model.parts)):
        if have[i] > p.size:
            f.unlink()
            have[i] = 0
    return parts, have


def _verify_part(part, partial: Path, expected: str, reporter: _ProgressReporter, base: int) -> None:
    """Check a downloaded file's SHA-256 against the hub's; a damaged file is deleted."""
    from gui.cluster.llama.model import file_sha256

    reporter.rate = _Rate()  # hashing runs at disk speed, not the network's
    digest = file_sha256(partial, progress=lambda d, _t: reporter.report("verify", part.name, base + d))
    if digest != expected.lower():
        partial.unlink(missing_ok=True)
        raise HubError(translate("Hub", "{path}: the downloaded file is damaged (its SHA-256 is "
                                        "{got}, the hub lists {want}); it was deleted, download "
                                        "it again").format(path=part.path, got=digest, want=expected))


class _CountingFile:
    """A file the library writes downloaded chunks into: counts them, reports progress and
    stops the download when cancelled (the bytes written so far stay, for resuming)."""

    def __init__(self, f, on_bytes: Callable[[int], None], cancel: threading.Event | None) -> None:
        self.f = f
        self.on_bytes = on_bytes
        self.cancel = cancel

    def write(self, data: bytes) -> int:
        if self.cancel is not None and self.cancel.is_set():
            raise DownloadCancelled(translate("Hub", "download cancelled"))
        n = self.f.write(data)
        self.on_bytes(len(data))
        return n

    def tell(self) -> int:
        return self.f.tell()

    def seek(self, *a) -> int:
        return self.f.seek(*a)

    def truncate(self, *a) -> int:
        return self.f.truncate(*a)

    def flush(self) -> None:
        self.f.flush()


@functools.cache
def _quiet_tqdm():
    # The library draws its own progress bar on stderr; herd reports progress itself.
    from huggingface_hub.utils import tqdm

    class Quiet(tqdm):
        # no monitor thread: tqdm starts one per bar class and never stops it, even for a
        # disabled bar (one class, made once, and no monitor: no thread left per download)
        monitor_interval = 0

        def __init__(self, *a, **k) -> None:
            k["disable"] = True
            super().__init__(*a, **k)

    return Quiet


# --------------------------------------------------------------------------------------------
# the hub


def partial_path(models_dir: str | os.PathLike, f: HubFile) -> Path:
    """Where the unfinished download of ``f`` is kept: ``.herd-downloads/NAME.HASH.part`` — keyed
    by the hub's hash, so a file that changed on the hub since is not continued from old bytes."""
    tag = f".{f.sha256[:16]}" if f.sha256 else ""
    return Path(models_dir) / PARTIAL_DIR / f"{f.name}{tag}.part"


def default_endpoint() -> str:
    """The hub address in use: ``$HF_ENDPOINT`` when set (a mirror), else huggingface.co."""
    from huggingface_hub import constants

    return (os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")


def _hub_failure(what: str, exc: Exception, endpoint: str) -> HubError:
    from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError

    if isinstance(exc, RepositoryNotFoundError):
        return HubError(translate("Hub", "{what}: no such repository at {endpoint} (check the name, "
                                         "e.g. owner/model-GGUF)").format(what=what, endpoint=endpoint))
    if isinstance(exc, RevisionNotFoundError):
        return HubError(translate("Hub", "{what}: no such revision").format(what=what))
    return HubError(translate("Hub", "{what}: the hub at {endpoint} did not answer as expected ({why}); "
                                     "check the network or the hub address (a mirror can be set in "
                                     "the settings or with HF_ENDPOINT)")
                    .format(what=what, endpoint=endpoint, why=f"{type(exc).__name__}: {exc}"))


class Hub:
    """A model hub reached through ``huggingface_hub``.

    Attributes:
        endpoint: the hub's address (huggingface.co, a mirror, or a local test server).
        token: a hub token for gated repositories. None: the library's own login (``hf auth
            login``, ``HF_TOKEN``) on huggingface.co, and no token at all anywhere else — a
            user's huggingface.co token is not handed to a mirror run by someone else.
    """

    def __init__(self, endpoint: str | None = None, token: str | bool | None = None) -> None:
        from huggingface_hub import HfApi, constants

        self.endpoint = (endpoint or default_endpoint()).rstrip("/")
        if token is None and self.endpoint != constants._HF_DEFAULT_ENDPOINT:
            token = False
        self.token = token
        self.api = HfApi(endpoint=self.endpoint, token=token)

    # -- browsing ------------------------------------------------------------------------

    def search(self, query: str, limit: int = 30) -> list[RepoHit]:
        """Repositories with GGUF files whose name contains ``query``, most downloaded first."""
        if not query.strip():
            raise HubError(translate("Hub", "type part of a model's name to search for"))
        try:
            found = self.api.list_models(search=query.strip(), filter="gguf", sort="downloads", limit=limit)
            return [RepoHit(m.id, m.downloads, m.likes) for m in found]
        except Exception as exc:  # the library raises its own errors and httpx's
            raise _hub_failure(query, exc, self.endpoint) from None

    def files(self, repo: str, revision: str | None = None) -> RepoFiles:
        """The GGUF models of ``repo`` at ``revision`` (default: the main branch), with sizes,
        LFS hashes and quant types; the commit is pinned so every later read sees the same files."""
        from huggingface_hub.hf_api import RepoFile

        try:
            info = self.api.model_info(repo, revision=revision)
            commit = info.sha or revision or "main"
            entries = self.api.list_repo_tree(repo, revision=commit, recursive=True)
            files = [HubFile(e.path, int(e.size), e.lfs.sha256 if e.lfs else None)
                     for e in entries if isinstance(e, RepoFile)]
        except Exception as exc:
            raise _hub_failure(repo, exc, self.endpoint) from None
        return RepoFiles(repo, commit, tuple(group_gguf_files(files)))

    def _url(self, repo: str, commit: str, path: str) -> str:
        from huggingface_hub import hf_hub_url

        return hf_hub_url(repo, path, revision=commit, endpoint=self.endpoint)

    def _headers(self) -> dict:
        from huggingface_hub.utils import build_hf_headers

        return build_hf_headers(token=self.token)

    def read_range(self, repo: str, commit: str, path: str, start: int, end: int) -> bytes:
        """Bytes ``start … end-1`` of a file in the repository (one HTTP Range request)."""
        from huggingface_hub.utils import hf_raise_for_status, http_backoff

        headers = {**self._headers(), "Range": f"bytes={start}-{end - 1}", "Accept-Encoding": "identity"}
        try:
            r = http_backoff("GET", self._url(repo, commit, path), headers=headers)
            hf_raise_for_status(r)
        except Exception as exc:
            raise _hub_failure(path, exc, self.endpoint) from None
        data = r.content
        if r.status_code == 200:  # the server ignored the Range: keep what was asked for
            data = data[start:end]
        return data

    def header(self, repo: str, commit: str, f: HubFile) -> bytes:
        """The GGUF header of ``f`` up to its first tensor's data, read with ranged requests."""
        want = min(HEADER_FIRST_READ, f.size)
        buf = b""
        while True:
            if want > len(buf):
                buf += self.read_range(repo, commit, f.path, len(buf), want)
            try:
                return buf[:gguf_header_length(buf)]
            except _NeedMore as more:
                if more.nbytes > min(f.size, HEADER_MAX_BYTES) or len(buf) < want:
                    raise HubError(translate("Hub", "{path}: the GGUF header does not end within the "
                                                    "file's first {n} bytes: not a usable GGUF file ({why})")
                                   .format(path=f.path, n=len(buf), why=more.why)) from None
                want = min(max(more.nbytes, 2 * len(buf)), f.size, HEADER_MAX_BYTES)

    def model_info(self, repo: str, commit: str, model: ModelFile, workdir: str | os.PathLike | None = None):
        """The :class:`~gui.cluster.llama.model.ModelInfo` of a hub model from its headers alone.

        Each file's header goes into a sparse local file of the file's full size (the weights
        stay holes), which :func:`~gui.cluster.llama.model.inspect_model` reads like any model.
        The info's ``path`` is that temporary file. Raises :class:`HubError`.
        """
        from gui.cluster.llama.model import ModelError, inspect_model

        key = (self.endpoint, repo, commit, model.first.path)
        with _INFO_LOCK:
            if key in _INFO_CACHE:  # a commit never changes: its headers can be kept
                return _INFO_CACHE[key]
        with tempfile.TemporaryDirectory(prefix="herd-hub-", dir=workdir) as tmp:
            for part in model.parts:
                head = self.header(repo, commit, part)
                local = Path(tmp) / part.name
                with open(local, "wb") as out:
                    out.write(head)
                    out.truncate(part.size)
            try:
                info = inspect_model(Path(tmp) / model.first.name)
            except ModelError as exc:
                raise HubError(str(exc).replace(str(Path(tmp)) + os.sep, f"{repo}/")) from None
        with _INFO_LOCK:
            while len(_INFO_CACHE) >= _INFO_CACHE_SIZE:
                _INFO_CACHE.pop(next(iter(_INFO_CACHE)))
            _INFO_CACHE[key] = info
        return info

    # -- downloading ---------------------------------------------------------------------

    def download(self, repo: str, commit: str, model: ModelFile, models_dir: str | os.PathLike, *,
                 progress: Callable[[DownloadProgress], None] | None = None,
                 cancel: threading.Event | None = None) -> Path:
        """Download ``model`` into ``models_dir`` and return the path llama.cpp is given.

        Free disk space is checked before a byte is written. Each file goes to
        :func:`partial_path` (``models_dir/.herd-downloads/NAME.HASH.part``, resumed with an
        HTTP Range request when an earlier download was interrupted; one of an older version of
        the file is deleted), its SHA-256 is checked against the hub's LFS hash, and only when
        every file of the model is complete and verified are they moved into
        ``models_dir`` (``os.replace``, atomic on one file system). A file whose hash does not
        match is deleted. Raises :class:`HubError` (:class:`DownloadCancelled` when ``cancel``
        was set; the partial file is then kept for the next attempt).
        """
        models_dir = Path(models_dir)
        targets = [models_dir / p.name for p in model.parts]
        if all(t.is_file() and t.stat().st_size == p.size for t, p in zip(targets, model.parts)):
            return targets[0]  # already here (moved in only after its hash matched)
        parts, have = _resumable_parts(models_dir, model)
        self.check_disk_space(models_dir, model.size - sum(have))
        (models_dir / PARTIAL_DIR).mkdir(parents=True, exist_ok=True)
        reporter = _ProgressReporter(progress, model.size, done=sum(have))
        for part, partial, got in zip(model.parts, parts, have):
            expected = self._fetch_part(repo, commit, part, partial, got, reporter, cancel)
            if expected:
                _verify_part(part, partial, expected, reporter,
                             base=sum(p.size for p in model.parts[:model.parts.index(part)]))
        for partial, target in zip(parts, targets):
            os.replace(partial, target)
        try:
            (models_dir / PARTIAL_DIR).rmdir()  # only when empty: other downloads may be resuming
        except OSError:
            pass
        return targets[0]

    def _fetch_part(self, repo: str, commit: str, part, partial: Path, got: int,
                    reporter: "_ProgressReporter", cancel: threading.Event | None) -> str | None:
        """Download the rest of one file of a model into ``partial`` (it holds ``got`` bytes) and
        return the SHA-256 the hub lists for it (None when it lists none)."""
        from huggingface_hub import get_hf_file_metadata
        from huggingface_hub.file_download import http_get

        url = self._url(repo, commit, part.path)
        try:
            meta = get_hf_file_metadata(url, token=self.token, endpoint=self.endpoint)
        except Exception as exc:
            raise _hub_failure(part.path, exc, self.endpoint) from None
        expected = part.sha256 or (meta.etag if meta.etag and _SHA256_RE.match(meta.etag) else None)
        if got >= part.size:
            return expected
        reporter.report("download", part.name, reporter.done)
        with open(partial, "ab") as f:
            try:
                http_get(meta.location, _CountingFile(f, lambda n: reporter.add("download", part.name, n), cancel),
                         resume_size=got, headers=self._headers(), expected_size=meta.size or part.size,
                         displayed_filename=part.name, tqdm_class=_quiet_tqdm())
            except HubError:
                raise
            except Exception as exc:
                raise HubError(translate("Hub", "{path}: the download stopped ({why}); start it "
                                                "again to resume where it stopped")
                               .format(path=part.path, why=f"{type(exc).__name__}: {exc}")) from None
            f.flush()
            os.fsync(f.fileno())
        return expected

    @staticmethod
    def check_disk_space(models_dir: Path, need_bytes: int) -> None:
        """:class:`HubError` when ``models_dir``'s disk has less than ``need_bytes`` (plus a
        margin) free. Nothing is created."""
        probe = models_dir
        while not probe.exists() and probe.parent != probe:
            probe = probe.parent
        free = shutil.disk_usage(probe).free
        if need_bytes + DISK_MARGIN_BYTES > free:
            raise HubError(translate("Hub", "not enough disk space in {dir}: the model needs {need} MB "
                                            "and {free} MB are free; free some space or choose another "
                                            "models folder").format(dir=models_dir, need=f"{need_bytes / 1e6:,.0f}",
                                                                    free=f"{free / 1e6:,.0f}"))


# --------------------------------------------------------------------------------------------
# fit and speed against the cluster as it is now


@dataclass(frozen=True)
class FileFit:
    """How one hub model would run on the cluster.

    Attributes:
        model: the hub model.
        info: its header's facts, or None when the header could not be read (``problem`` says why).
        fits: True when every device and the host have room at the context asked for.
        plan: the split that would be used (by free memory, as *Start* and ``herd up`` do by
            default), or None.
        device_fits: the planner's memory estimate per device, the host last.
        tokens_per_s: predicted decode speed, or None when a node is not measured yet.
        problem: why it does not fit (or could not be read); ``""`` when it fits.
    """

    model: ModelFile
    info: object | None
    fits: bool
    plan: object | None = None
    device_fits: tuple = ()
    tokens_per_s: float | None = None
    problem: str = ""

    def split_text(self) -> str:
        """The split as ``node=slots`` pairs, the host's first (``host=2, alpha=4, beta=5``)."""
        if self.plan is None:
            return ""
        parts = [f"host={self.plan.host_layers}"] if self.plan.host_layers else []
        parts += [f"{a.device.node_name}={a.count}" for a in self.plan.assignments if a.count]
        return ", ".join(parts)


class ClusterSpeeds:
    """The measured speeds of the cluster's nodes and of the master's CPU, as ``herd plan
    --fastest`` and ``herd bench`` cached them (:class:`~gui.cluster.planning.measure.MeasurementCache`).

    Attributes:
        node_ids: the worker nodes, each with at least one cached measurement.
        cache: where the measurements are.
    """

    def __init__(self, node_ids: Sequence[str], cache) -> None:
        self.node_ids = list(node_ids)
        self.cache = cache

    def pick(self, info=None) -> tuple[list, object | None]:
        """``(node measurements, host measurement or None)`` to predict ``info`` (a
        ``ModelInfo``) from: per node, the entry of the model nearest in bytes per weight."""
        like = getattr(info, "bytes_per_param", None) or None
        nodes = [self.cache.latest(n, like) for n in self.node_ids]
        return nodes, self.cache.latest("master", like)


def cluster_measurements(devices: Sequence, cache=None) -> ClusterSpeeds | None:
    """The cluster's measured speeds (:class:`ClusterSpeeds`), or None when a node of
    ``devices`` has never been measured."""
    from gui.cluster.planning.measure import MeasurementCache

    cache = cache if cache is not None else MeasurementCache()
    ids = list(dict.fromkeys(d.node_id for d in devices if d.kind == "rpc"))
    if any(cache.latest(n) is None for n in ids):
        return None
    return ClusterSpeeds(ids, cache)


def assess(model: ModelFile, info, devices: Sequence, ctx: int, *, host_free_bytes: int | None,
           measured: ClusterSpeeds | None = None) -> FileFit:
    """Fit, split and predicted speed of one hub model (``info`` from :meth:`Hub.model_info`).

    The split is the one *Start* and ``herd up`` use by default, by free memory
    (:func:`~gui.cluster.planning.plan.plan_by_memory`), checked with the planner's own
    :func:`~gui.cluster.planning.plan.estimate`. With ``measured`` (:func:`cluster_measurements`) its
    speed is the cost model's prediction from each node's measured compute time, scaled to this
    model's weights (:func:`~gui.cluster.planning.measure.cost_inputs`), taken from the measured model
    nearest in bytes per weight — a measured quant type predicts files of that type per byte.
    Without it (or when the host keeps layers and was never measured) the speed is None: not
    measured yet.
    """
    import math

    from gui.cluster.planning import plan as P
    from gui.cluster.planning.cost_model import predicted_tokens_per_s
    from gui.cluster.planning.measure import cost_inputs

    if ctx < 1:
        raise HubError(f"context length must be positive, got {ctx}")
    try:
        plan = P.plan_by_memory(info, devices, ctx, host_free_bytes=host_free_bytes)
        fits = P.estimate(plan, info, ctx, host_free_bytes=host_free_bytes)
    except P.PlanError as exc:
        return FileFit(model, info, False, problem=str(exc))
    bad = P.misfits(fits)
    if bad:
        return FileFit(model, info, False, plan, tuple(fits), problem="; ".join(bad))
    tps = None
    if measured is not None:
        try:
            nodes, host = measured.pick(info)
            tps = predicted_tokens_per_s(plan, info, cost_inputs(nodes, host, model=info))
        except P.PlanError:
            tps = None
        if tps is not None and not (math.isfinite(tps) and tps > 0):
            tps = None  # the host keeps layers but its speed was never measured
    return FileFit(model, info, True, plan, tuple(fits), tps)


@dataclass(frozen=True)
class HeaderProgress:
    """Where reading a repository's headers is: ``file`` was started, or ``finished``;
    ``started`` and ``done`` of ``total`` count the files so far. A header can be slow (a large
    vocabulary is most of it), so the dialog says which one it reads."""

    file: str
    started: int
    done: int
    total: int
    finished: bool = False


def assess_repo(hub: Hub, files: RepoFiles, devices: Sequence, ctx: int, *, host_free_bytes: int | None,
                measured: ClusterSpeeds | None = None,
                on_progress: Callable[[HeaderProgress], None] | None = None) -> list[FileFit]:
    """:func:`assess` for every model of ``files``, each read from its header (a header that
    cannot be read gives a :class:`FileFit` that does not fit and says why). Up to
    :data:`HEADER_READERS` headers are read at once; ``on_progress`` hears of each start and
    finish (from the reading threads)."""
    from concurrent.futures import ThreadPoolExecutor

    lock = threading.Lock()
    count = {"started": 0, "done": 0}
    total = len(files.models)

    def tell(name: str, key: str) -> None:
        if on_progress is None:
            return
        with lock:  # told under the lock, so in order
            count[key] += 1
            on_progress(HeaderProgress(name, count["started"], count["done"], total, key == "done"))

    def one(m: ModelFile) -> FileFit:
        tell(m.first.name, "started")
        try:
            try:
                info = hub.model_info(files.repo, files.commit, m)
            except HubError as exc:
                return FileFit(m, None, False, problem=str(exc))
            return assess(m, info, devices, ctx, host_free_bytes=host_free_bytes, measured=measured)
        finally:
            tell(m.first.name, "done")

    with ThreadPoolExecutor(max_workers=HEADER_READERS, thread_name_prefix="herd-hub-header") as pool:
        return list(pool.map(one, files.models))


def suggest(fits: Sequence[FileFit]) -> int | None:
    """Index of the suggested file: the largest that fits (the best quality the cluster holds)."""
    best = None
    for i, f in enumerate(fits):
        if f.fits and (best is None or f.model.size > fits[best].model.size):
            best = i
    return best


def models_dir() -> Path:
    """Where herd keeps models by default (the demo model's folder too)."""
    from agent.engine_lookup import data_dir

    return data_dir() / "models"
