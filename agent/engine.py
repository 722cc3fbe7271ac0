"""Finding the llama.cpp programs this machine will run, and asking them what they are.

Both the master (``herd``) and the worker (``herd-agent``) need the same answer to "which
``ggml-rpc-server`` / ``llama-server`` do we use?", so the lookup lives here, in the agent
package, and the master's engine installer (``gui.cluster.engine``) builds on it.

Lookup order (first folder that holds the program wins):

1. an explicit folder (a setting, or the ``HERD_ENGINE_DIR`` environment variable);
2. the managed engine folder in the user data dir (what ``herd engine install`` writes), of the
   backend asked for (``cpu`` unless told: a machine may hold a CPU and a Vulkan build);
3. the folder of a frozen executable (the MSI ships the RPC worker beside ``herd-agent.exe``);
4. ``PATH``.
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
        return not self.name.upper().startswith("CPU")


_LIST_DEVICE_RE = re.compile(r"^\s*(\S+): (.*) \((\d+) MiB, (\d+) MiB free\)\s*$")


def list_devices(engine: Engine, timeout: float = 30.0) -> list[EngineDevice]:
    """The GPUs (and accelerators) ``engine``'s build finds here, from ``llama-server
    --list-devices``; empty for a CPU build or when the build finds no GPU. ``GGML_VK_*``
    variables of this process apply (``GGML_VK_VISIBLE_DEVICES=0`` lets a Vulkan build use a
    software device such as lavapipe)."""
    if engine.llama_server is None:
        return []
    try:
        out = subprocess.run([str(engine.llama_server), "--list-devices"], capture_output=True, text=True,
                             timeout=timeout, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EngineError(f"Could not run {engine.llama_server} --list-devices: {exc}") from exc
    found = []
    for line in (out.stdout + "\n" + out.stderr).splitlines():
        m = _LIST_DEVICE_RE.match(line)
        if m:
            found.append(EngineDevice(m.group(1), m.group(2), int(m.group(3)) << 20, int(m.group(4)) << 20))
    return found


def choose_backend(wanted: str = "auto") -> tuple[str, str | None]:
    """The backend an agent runs, and a sentence for its log when it could not have the one it
    would prefer. ``auto``: the first installed GPU build that finds a GPU here, else ``cpu``;
    anything else is taken as asked."""
    if wanted != "auto":
        return wanted, None
    note = None
    for b in installed_backends():
        if b == "cpu":
            return b, note
        try:
            gpus = [d for d in list_devices(find_engine(backend=b)) if d.is_gpu]
        except EngineError as exc:
            gpus, why = [], str(exc)
        else:
            why = None
        if gpus:
            return b, note
        note = why or (f"the {b} build of llama.cpp finds no GPU on this machine (no devices found): "
                       + gpu_driver_hint(b) + "; running the CPU build")
    return "cpu", note


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
