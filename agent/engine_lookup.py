"""Finding the llama.cpp programs this machine will run, and asking them what they are.

Both the master (``herd``) and the worker (``herd-agent``) need the same answer to "which
``ggml-rpc-server`` / ``llama-server`` do we use?", so the lookup lives here, in the agent
package, and the master's engine installer (``gui.cluster.llama.engine_manager``) builds on it.

Lookup order (first folder that holds the program wins):

1. an explicit folder (a setting, or the ``HERD_ENGINE_DIR`` environment variable);
2. the managed engine folder in the user data dir (what ``herd engine install`` writes), of the
   backend asked for (``cpu`` unless told: a machine may hold a CPU and a Vulkan build);
3. the folder of a frozen executable (the MSI ships the RPC worker beside ``herd-agent.exe``);
4. ``PATH``.

What a build computes on comes from the build itself (:func:`identify`): herd's own
``engine.json`` where ``herd engine install`` (or the MSI) wrote one; for a folder built or
unpacked by hand, what its programs report (``llama-server --list-devices``, the backends'
start-up lines) and the ``libggml-*.so`` / ``ggml-*.dll`` backend libraries beside them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

import platformdirs

from agent import rpc_protocol

#: The llama.cpp build every node of a herd cluster runs. Nodes must agree on it: the RPC
#: protocol is versioned and a major mismatch aborts llama-server.
PINNED_BUILD = 11434
#: RPC protocol version of the pinned build (ggml/include/ggml-rpc.h).
PINNED_RPC_PROTO = "7.0.0"

APP_NAME = "llama-herd"
ENGINE_ENV = "HERD_ENGINE_DIR"
MANIFEST_NAME = "engine.json"

# Older llama.cpp builds called the RPC worker ``rpc-server``.
RPC_SERVER_NAMES = ("ggml-rpc-server", "rpc-server")
LLAMA_SERVER_NAMES = ("llama-server",)
LLAMA_BENCH_NAMES = ("llama-bench",)


class EngineError(RuntimeError):
    """The engine is missing, broken or not the one we need. The message says what to do."""


def exe_name(name: str) -> str:
    """``name`` with the platform's executable suffix."""
    return name + ".exe" if sys.platform == "win32" else name


def data_dir() -> Path:
    """The per-user data folder of llama-herd (engine, models, profiles)."""
    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))


def managed_engine_root() -> Path:
    """Where ``herd engine install`` keeps engines, one sub-folder per build and backend."""
    return data_dir() / "engine"


def managed_engine_dir(build: int = PINNED_BUILD, backend: str = "cpu") -> Path:
    """The folder of one managed engine (it may not exist yet)."""
    return managed_engine_root() / f"b{build}-{backend}"


@dataclass
class Engine:
    """One set of llama.cpp programs, and what is known about them.

    Attributes:
        rpc_server: path of ``ggml-rpc-server`` (or the older ``rpc-server``), or None.
        llama_server: path of ``llama-server``, or None.
        llama_bench: path of ``llama-bench``, or None.
        source: where the lookup found them: ``setting``, ``env``, ``managed``, ``bundled``, ``path``.
        build: llama.cpp build number, when known (from the manifest or ``--version``).
        rpc_proto: RPC protocol version ``major.minor.patch``, when known.
        origin: how the managed engine was obtained (``release`` or ``source``), if managed.
        backend: what the build computes on (``cpu``, ``vulkan``, ``cuda``), when its manifest says.
    """

    rpc_server: Path | None = None
    llama_server: Path | None = None
    llama_bench: Path | None = None
    source: str = ""
    build: int | None = None
    rpc_proto: str | None = None
    origin: str | None = None
    folder: Path | None = None
    notes: list[str] = field(default_factory=list)
    backend: str | None = None

    @property
    def complete(self) -> bool:
        """True when both programs a cluster needs were found."""
        return self.rpc_server is not None and self.llama_server is not None

    def to_json(self) -> dict:
        """A JSON-ready summary (paths as strings)."""
        d = asdict(self)
        for k in ("rpc_server", "llama_server", "llama_bench", "folder"):
            d[k] = str(d[k]) if d[k] else None
        d["complete"] = self.complete
        return d

    def require_rpc_server(self) -> Path:
        """The RPC worker's path, or an :class:`EngineError` that says how to get one."""
        if self.rpc_server is None:
            raise EngineError(
                "No llama.cpp RPC worker (ggml-rpc-server) found. Run `herd engine install`, "
                f"or set {ENGINE_ENV} to a folder that contains it."
            )
        return self.rpc_server

    def require_llama_server(self) -> Path:
        """llama-server's path, or an :class:`EngineError` that says how to get one."""
        if self.llama_server is None:
            raise EngineError(
                "No llama-server found. Run `herd engine install`, "
                f"or set {ENGINE_ENV} to a folder that contains it."
            )
        return self.llama_server


def _find_in(folder: Path, names: tuple[str, ...]) -> Path | None:
    for name in names:
        for candidate in (folder / exe_name(name), folder / "bin" / exe_name(name)):
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return candidate
    return None


def _engine_in(folder: Path, source: str) -> Engine | None:
    rpc = _find_in(folder, RPC_SERVER_NAMES)
    srv = _find_in(folder, LLAMA_SERVER_NAMES)
    if rpc is None and srv is None:
        return None
    eng = Engine(rpc_server=rpc, llama_server=srv, llama_bench=_find_in(folder, LLAMA_BENCH_NAMES),
                 source=source, folder=folder)
    manifest = folder / MANIFEST_NAME
    if manifest.is_file():
        try:
            m = json.loads(manifest.read_text(encoding="utf-8"))
            eng.build = int(m["build"]) if m.get("build") is not None else None
            eng.rpc_proto = m.get("rpc_proto")
            eng.origin = m.get("origin")
            eng.backend = m.get("backend")
        except (ValueError, KeyError, TypeError, OSError) as exc:
            eng.notes.append(f"ignored unreadable {manifest}: {exc}")
    return eng


#: Backends an engine can be built for; GPU ones first, in the order an agent prefers them.
BACKENDS = ("cuda", "vulkan", "cpu")


def installed_backends(build: int = PINNED_BUILD) -> list[str]:
    """The backends whose managed engine of ``build`` is installed, in :data:`BACKENDS` order."""
    out = []
    for b in BACKENDS:
        eng = _engine_in(managed_engine_dir(build, b), "managed")
        if eng is not None and eng.rpc_server is not None:
            out.append(b)
    return out


#: The GPU backends llama.cpp can be built with, as herd names them (the name of the library
#: each adds beside the programs: ``libggml-NAME.so``, ``ggml-NAME.dll``), by the prefix of the
#: device names each registers (``Vulkan0``, ``CUDA0``; HIP builds call their GPUs ``ROCm0``).
GPU_DEVICE_PREFIXES = {"CUDA": "cuda", "Vulkan": "vulkan", "ROCm": "hip", "MUSA": "musa", "SYCL": "sycl",
                       "MTL": "metal", "GPUOpenCL": "opencl", "CANN": "cann"}
GPU_BACKENDS = tuple(GPU_DEVICE_PREFIXES.values())


def device_backend(name: str) -> str | None:
    """The GPU backend a device of this name belongs to (``Vulkan0`` → ``vulkan``), or None for
    the CPU and for accelerators that are no GPU (``BLAS``)."""
    for prefix, backend in GPU_DEVICE_PREFIXES.items():
        if name == prefix or (name.startswith(prefix) and name[len(prefix):].isdigit()):
            return backend
    return None


@dataclass
class EngineDevice:
    """A device a llama.cpp build can use on this machine (``llama-server --list-devices``).

    Attributes:
        name: ``Vulkan0``, ``CUDA0``, ``CPU`` …
        description: what the driver calls it (``llvmpipe (LLVM 15.0.6, 256 bits)``).
        total_bytes, free_bytes: its memory.
    """

    name: str
    description: str
    total_bytes: int
    free_bytes: int

    @property
    def is_gpu(self) -> bool:
        """A GPU of one of :data:`GPU_BACKENDS` (not the CPU, not an accelerator such as BLAS)."""
        return device_backend(self.name) is not None


_LIST_DEVICE_RE = re.compile(r"^\s*(\S+): (.*) \((\d+) MiB, (\d+) MiB free\)\s*$")


def _run_list_devices(engine: Engine, timeout: float) -> tuple[list[EngineDevice], str]:
    """``llama-server --list-devices``: the devices it lists, and everything it printed."""
    try:
        out = subprocess.run([str(engine.llama_server), "--list-devices"], capture_output=True, text=True,
                             timeout=timeout, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EngineError(f"Could not run {engine.llama_server} --list-devices: {exc}") from exc
    text = out.stdout + "\n" + out.stderr
    found = []
    for line in text.splitlines():
        m = _LIST_DEVICE_RE.match(line)
        if m:
            found.append(EngineDevice(m.group(1), m.group(2), int(m.group(3)) << 20, int(m.group(4)) << 20))
    if out.returncode != 0 and not found:
        tail = " / ".join(ln.strip() for ln in text.strip().splitlines()[-3:])
        raise EngineError(f"{engine.llama_server} --list-devices failed (exit {out.returncode}): {tail}")
    return found, text


def list_devices(engine: Engine, timeout: float = 30.0) -> list[EngineDevice]:
    """The GPUs (and accelerators) ``engine``'s build finds here, from ``llama-server
    --list-devices``; empty for a CPU build or when the build finds no GPU. ``GGML_VK_*``
    variables of this process apply (``GGML_VK_VISIBLE_DEVICES=0`` lets a Vulkan build use a
    software device such as lavapipe)."""
    if engine.llama_server is None:
        return []
    return _run_list_devices(engine, timeout)[0]


# A build with a GPU backend says so when it starts, even where it finds no GPU: the Vulkan
# backend prints ``ggml_vulkan: No devices found.``, the CUDA one (and its HIP and MUSA
# variants) ``ggml_cuda_init: failed to initialize CUDA: …`` or ``found N CUDA devices``.
_INIT_LINE_RE = re.compile(r"^(ggml_vulkan): |^ggml_cuda_init: .*\b(CUDA|ROCm|MUSA)\b", re.M)
# libggml-vulkan.so, libggml-cuda.so.0, ggml-vulkan.dll, libggml-cpu-haswell.so, ggml-rpc.dll …
_LIBRARY_RE = re.compile(r"^(?:lib)?ggml-([a-z]+)(?:-\w+)*\.(?:dll|dylib|so(?:\.\d+)*)$", re.I)


def _init_line_backends(text: str) -> list[str]:
    out = []
    for m in _INIT_LINE_RE.finditer(text):
        b = "vulkan" if m.group(1) else {"CUDA": "cuda", "ROCm": "hip", "MUSA": "musa"}[m.group(2)]
        if b not in out:
            out.append(b)
    return out


def backend_libraries(engine: Engine) -> list[str]:
    """The file names of the ggml backend libraries beside ``engine``'s programs (or in the
    ``lib`` folder beside their ``bin``, as ``cmake --install`` lays them out), sorted."""
    folders: list[Path] = []
    for prog in (engine.llama_server, engine.rpc_server):
        if prog is not None:
            for folder in (prog.parent, prog.parent.parent / "lib"):
                if folder not in folders:
                    folders.append(folder)
    names: set[str] = set()
    for folder in folders:
        try:
            names.update(p.name for p in folder.iterdir() if _LIBRARY_RE.match(p.name))
        except OSError:
            pass
    return sorted(names)


def _library_backend(name: str) -> str:
    m = _LIBRARY_RE.match(name)
    return m.group(1).lower() if m else ""


@dataclass
class EngineIdentity:
    """What an engine is, read from the engine itself (:func:`identify`).

    Attributes:
        backends: the GPU backends the build has (``("vulkan",)``, ``("cuda",)``), empty for a
            CPU build.
        backend_from: where that was read: herd's ``engine.json``, the GPUs ``llama-server
            --list-devices`` lists, a backend's start-up line, a backend library beside the
            programs; or why it is taken for a CPU build.
        gpus: the GPUs the build finds on this machine now.
        libraries: the ggml backend libraries beside the programs.
        rpc: whether the build has llama.cpp's RPC backend (None: cannot tell).
        rpc_from: what says so.
        by_hand: the folder has no ``engine.json`` of herd's: someone built or unpacked it.
        build: llama.cpp build number, when known.
        notes: what went wrong while asking the programs.
    """

    backends: tuple[str, ...] = ()
    backend_from: str = ""
    gpus: list[EngineDevice] = field(default_factory=list)
    libraries: list[str] = field(default_factory=list)
    rpc: bool | None = None
    rpc_from: str = ""
    by_hand: bool = False
    build: int | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def backend(self) -> str:
        """``cpu``, ``vulkan``, ``cuda`` …; a build with two GPU backends is ``cuda+vulkan``."""
        return "+".join(self.backends) or "cpu"

    def has_backend(self, name: str) -> bool:
        """Whether the build computes on ``name`` (``cpu``: it is a CPU build)."""
        return name in self.backends if name != "cpu" else not self.backends

    @property
    def build_matches(self) -> bool | None:
        """Whether the build is the pinned one (None: its build number is unknown)."""
        return None if self.build is None else self.build == PINNED_BUILD

    def to_json(self) -> dict:
        """A JSON-ready summary."""
        return {"backend": self.backend, "backend_from": self.backend_from,
                "gpus": [asdict(d) for d in self.gpus], "libraries": list(self.libraries),
                "rpc": self.rpc, "rpc_from": self.rpc_from, "by_hand": self.by_hand, "build": self.build,
                "pinned_build": PINNED_BUILD, "build_matches": self.build_matches, "notes": list(self.notes)}


def identify(engine: Engine, *, timeout: float = 30.0) -> EngineIdentity:
    """What ``engine`` computes on, the GPUs it finds here, and whether it has RPC.

    The backend is herd's ``engine.json``'s where there is one. A folder without it (built or
    unpacked by hand) is asked: the GPUs ``llama-server --list-devices`` lists name their
    backend; a GPU build that finds none here still prints its backend's start-up line; and a
    build with shared libraries has its backends beside the programs (``libggml-cuda.so``). A
    build none of these name a GPU backend of is a CPU build. ``GGML_VK_*``/``CUDA_VISIBLE_*``
    variables of this process apply, as they do to the worker.

    RPC: ``ggml-rpc-server`` is only built with ``-DGGML_RPC=ON``, which puts the RPC backend
    in the folder's other programs too; a shared-library build has ``libggml-rpc.so`` (or
    ``ggml-rpc.dll``) for it. A static build with no RPC worker beside it cannot tell.
    """
    libs = backend_libraries(engine)
    lib_backends = [b for b in dict.fromkeys(_library_backend(n) for n in libs) if b in GPU_BACKENDS]
    ident = EngineIdentity(libraries=libs, by_hand=engine.origin is None and engine.backend is None,
                           build=engine.build)
    rpc_lib = next((n for n in libs if _library_backend(n) == "rpc"), None)
    if engine.rpc_server is not None:
        ident.rpc, ident.rpc_from = True, f"{engine.rpc_server.name} is built only with RPC"
    elif rpc_lib:
        ident.rpc, ident.rpc_from = True, f"{rpc_lib} beside the programs"
    elif libs:
        ident.rpc, ident.rpc_from = False, "no ggml-rpc library beside the other backend libraries"
    else:
        ident.rpc_from = "no ggml-rpc-server and no backend libraries beside llama-server"

    if not ident.by_hand:
        ident.backends = tuple(b for b in (engine.backend or "cpu").split("+") if b != "cpu")
        ident.backend_from = MANIFEST_NAME
        if ident.backends and engine.llama_server is not None:
            try:
                ident.gpus = [d for d in _run_list_devices(engine, timeout)[0] if d.is_gpu]
            except EngineError as exc:
                ident.notes.append(str(exc))
        return ident

    text = ""
    if engine.llama_server is not None:
        try:
            devices, text = _run_list_devices(engine, timeout)
        except EngineError as exc:
            ident.notes.append(str(exc))
        else:
            ident.gpus = [d for d in devices if d.is_gpu]
    elif engine.rpc_server is not None:
        ident.notes.append(f"no llama-server beside {engine.rpc_server}: the GPUs of this build cannot be "
                           "listed before its worker runs; put the build's llama-server in the same folder")
    from_devices = list(dict.fromkeys(device_backend(d.name) for d in ident.gpus))
    from_lines = _init_line_backends(text)
    ident.backends = tuple(dict.fromkeys([*from_devices, *from_lines, *lib_backends]))
    if from_devices:
        ident.backend_from = "llama-server --list-devices lists " + ", ".join(d.name for d in ident.gpus)
    elif from_lines:
        first = next(m.group(0) for m in _INIT_LINE_RE.finditer(text))
        line = next(ln for ln in text.splitlines() if ln.startswith(first))
        ident.backend_from = f"llama-server --list-devices printed {line.strip()!r}"
    elif lib_backends:
        ident.backend_from = ", ".join(n for n in libs if _library_backend(n) in lib_backends) + " beside the programs"
    elif engine.llama_server is not None:
        ident.backend_from = "llama-server --list-devices names no GPU backend, and none is beside it"
    else:
        ident.backend_from = "no GPU backend library beside the programs"
    return ident


def gpu_driver_hint(backend: str) -> str:
    """What to install when a GPU build finds no GPU."""
    if backend == "vulkan":
        return ("install the GPU's Vulkan driver (Debian/Ubuntu: mesa-vulkan-drivers for AMD and Intel "
                "GPUs, NVIDIA's driver for NVIDIA; Windows: the GPU vendor's driver) and check it with "
                "`vulkaninfo --summary`; a software device such as Mesa's lavapipe does not count")
    if backend == "cuda":
        return "install NVIDIA's driver and check it with `nvidia-smi`"
    return "check the GPU's driver"


def find_engine(explicit_dir: str | os.PathLike | None = None, *, probe: bool = False,
                backend: str = "cpu") -> Engine:
    """Find the engine this machine will use (see the module docstring for the order).

    ``backend`` picks which managed engine is looked at (``cpu``, ``vulkan``, ``cuda``).

    Never raises: a missing engine is an :class:`Engine` with ``complete == False``; callers
    that need a program use :meth:`Engine.require_rpc_server` / :meth:`Engine.require_llama_server`.
    With ``probe=True`` the build number is read from ``llama-server --version`` when no
    manifest tells it.
    """
    candidates: list[tuple[Path, str]] = []
    if explicit_dir:
        candidates.append((Path(explicit_dir), "setting"))
    if os.environ.get(ENGINE_ENV):
        candidates.append((Path(os.environ[ENGINE_ENV]), "env"))
    managed = managed_engine_dir(backend=backend)
    candidates.append((managed, "managed"))
    if getattr(sys, "frozen", False):
        candidates.append((Path(sys.executable).resolve().parent, "bundled"))
    for folder, source in candidates:
        eng = _engine_in(folder, source)
        if eng is not None:
            break
    else:
        eng = Engine(
            rpc_server=_which(RPC_SERVER_NAMES),
            llama_server=_which(LLAMA_SERVER_NAMES),
            llama_bench=_which(LLAMA_BENCH_NAMES),
            source="path",
        )
        if not (eng.rpc_server or eng.llama_server):
            eng.source = ""
    if probe and eng.build is None:
        for prog in (eng.llama_server, eng.llama_bench):
            if prog is not None:
                try:
                    eng.build = read_build_number(prog)
                    break
                except EngineError as exc:
                    eng.notes.append(str(exc))
    return eng


def choose_engine(explicit_dir: str | os.PathLike | None = None,
                  wanted: str = "auto") -> tuple[Engine, EngineIdentity, str | None]:
    """The engine an agent runs, what it is (:func:`identify`), and a sentence for its log when
    it is not what was asked for, or is a GPU build that finds no GPU (None: nothing to say).

    A folder given (``engine_dir``, or :data:`ENGINE_ENV`) is run as the build it is, whatever
    ``wanted`` says; when the two disagree the sentence names what the folder holds. Otherwise
    ``wanted`` picks the managed engine: ``auto`` the first installed GPU build that finds a GPU
    here, else the CPU build; ``cpu``, ``vulkan``, ``cuda`` that build.
    """
    eng, ident, note = _choose_engine(explicit_dir, wanted)
    if note is None and ident.backends and not ident.gpus and eng.complete:
        note = (f"the {ident.backend} build of llama.cpp in {eng.folder or 'PATH'} finds no GPU on this machine: "
                f"{'; '.join(ident.notes) or gpu_driver_hint(ident.backends[0])}; the worker offers only the CPU")
    return eng, ident, note


def _choose_engine(explicit_dir, wanted: str) -> tuple[Engine, EngineIdentity, str | None]:
    if explicit_dir or os.environ.get(ENGINE_ENV):
        eng = find_engine(explicit_dir or None, probe=True)
        ident = identify(eng)
        named = (f"engine_dir {explicit_dir}" if explicit_dir else f"{ENGINE_ENV}={os.environ[ENGINE_ENV]}")
        if eng.source != ("setting" if explicit_dir else "env"):
            return eng, ident, (f"{named} holds no llama.cpp programs (ggml-rpc-server, llama-server); "
                                f"running the {ident.backend} build found in {eng.folder or 'PATH'} instead")
        if wanted != "auto" and not ident.has_backend(wanted):
            return eng, ident, (f"--backend {wanted} was asked, but {named} holds a {ident.backend} build "
                                f"({ident.backend_from}): running it as the {ident.backend} build it is. "
                                f"To run a {wanted} build, point engine_dir at one, or leave engine_dir empty "
                                f"for herd's own (`herd engine install --backend {wanted}`)")
        return eng, ident, None
    if wanted != "auto":
        eng = find_engine(probe=True, backend=wanted)
        ident = identify(eng)
        if eng.complete and not ident.has_backend(wanted):
            return eng, ident, (f"--backend {wanted} was asked, but no {wanted} build is installed "
                                f"(`herd engine install --backend {wanted}`): running the {ident.backend} "
                                f"build in {eng.folder or 'PATH'}")
        return eng, ident, None
    note = None
    for b in installed_backends():
        eng = find_engine(probe=True, backend=b)
        ident = identify(eng)
        if b == "cpu" or ident.gpus:
            return eng, ident, note
        why = "; ".join(ident.notes)
        note = why or (f"the {b} build of llama.cpp finds no GPU on this machine (no devices found): "
                       + gpu_driver_hint(b) + "; running the CPU build")
    eng = find_engine(probe=True)
    return eng, identify(eng), note


def _which(names: tuple[str, ...]) -> Path | None:
    for name in names:
        found = shutil.which(name)
        if found:
            return Path(found)
    return None


# Builds print either "version: 11434 (abc1234)" or "version: 0.6.0-dev (build 11434, commit …)".
_VERSION_RE = re.compile(r"\(build\s+(\d+)|version:\s*(\d+)\s*\(")


def read_build_number(program: str | os.PathLike, timeout: float = 20.0) -> int:
    """Run ``program --version`` and return llama.cpp's build number from ``version: N (hash)``."""
    try:
        out = subprocess.run([str(program), "--version"], capture_output=True, text=True,
                             timeout=timeout, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EngineError(f"Could not run {program} --version: {exc}") from exc
    m = _VERSION_RE.search(out.stdout + out.stderr)
    if not m:
        raise EngineError(f"{program} --version did not print a llama.cpp build number")
    return int(m.group(1) or m.group(2))


def rpc_hello(host: str, port: int, timeout: float = 3.0) -> str:
    """Ask a running RPC worker its protocol version with the HELLO command.

    Returns ``"major.minor.patch"``. Only answers while no llama-server holds the worker (it
    serves one client at a time), so a busy worker raises :class:`TimeoutError`.
    """
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        try:
            return rpc_protocol.hello(sock)
        except rpc_protocol.RpcProtocolError as exc:
            raise EngineError(f"{host}:{port}: {exc}") from exc
