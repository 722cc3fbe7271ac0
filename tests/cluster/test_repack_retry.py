"""A llama-server that crashes in llama.cpp's weight repacking is started again with --no-repack.

The crash itself is seen on Intel CPUs with AMX (Q8_0 and Q4_0 models with layers on the host
die with SIGSEGV while warming up, and serve with ``--no-repack``). It cannot be produced on
every machine, so a stand-in delivers it: a wrapper runs the *real* llama-server — which loads
the real model and prints its real buffers, repacked or not, for the CPU this runs on — and
kills it with SIGSEGV at the warm-up step unless ``--no-repack`` was given, then dies of the
same signal itself. What the launcher does next is real: it reads the real log, decides, and
starts the real llama-server again.

Whether the first run had repacked host buffers depends on the CPU (Q4_0 is repacked on AVX2
and ARM CPUs, F16 on AMX ones), so the test asks the real llama-server first and expects the
retry exactly when it repacks.
"""

from __future__ import annotations

import sys

import psutil
import pytest
from conftest import free_port

from gui.cluster import launcher as L
from gui.cluster.demo_model import DemoShape, write_demo_model
from gui.cluster.launch import LaunchRequest
from gui.cluster.server_command import ServerOptions
from gui.cluster.placement import HOST_LOADED, HOST_MAPPED
from gui.cluster.model import inspect_model
from gui.cluster.plan import Plan

pytestmark = pytest.mark.engine

CRASHING_WRAPPER = """\
import ctypes, os, signal, subprocess, sys
real, args = {real!r}, sys.argv[1:]
# The real server goes when the wrapper goes: stopped (SIGTERM, forwarded) or killed (the
# kernel's parent-death signal), so the launcher's stop leaves no llama-server behind.
child = subprocess.Popen([real, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         preexec_fn=lambda: ctypes.CDLL(None).prctl(1, signal.SIGTERM))
def stop(*_):
    child.terminate()
    child.wait()
    os._exit(0)
signal.signal(signal.SIGTERM, stop)
for line in child.stdout:
    sys.stdout.buffer.write(line)
    sys.stdout.flush()
    if b"warming up the model" in line and "--no-repack" not in args:
        child.send_signal(signal.SIGSEGV)
        child.wait()
        signal.signal(signal.SIGSEGV, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGSEGV)
sys.exit(child.wait())
"""


def _wrapper(tmp_path, engine):
    path = tmp_path / "llama-server-crashing-in-repack"
    path.write_text(f"#!{sys.executable}\n" + CRASHING_WRAPPER.format(real=str(engine.llama_server)))
    path.chmod(0o755)
    return path


async def _repacked_buffers(engine, model) -> list[str]:
    """The extra host buffers the real llama-server uses for ``model`` on this CPU."""
    srv = L.ServerProcess(engine.llama_server, L.ServerSpec(model=model, ngl=0, ctx=512, port=free_port()))
    await srv.start()
    try:
        await srv.wait_ready(120)
    finally:
        await srv.stop()
    return [k for k in srv.placement().host_buffers() if k not in (HOST_MAPPED, HOST_LOADED)]


@pytest.mark.parametrize("quant", ["Q4_0", "Q8_0", "F16"])
async def test_crash_with_repacked_weights_is_retried_without_repacking(engine, tmp_path, quant):
    model = write_demo_model(tmp_path / f"{quant}.gguf", DemoShape(layers=4, embd=256, ff=512, quant=quant))
    repacked = await _repacked_buffers(engine, model)
    request = LaunchRequest(Plan(4, 5), inspect_model(model), ServerOptions(ctx=512, port=free_port()))
    launcher = L.ClusterLauncher(_wrapper(tmp_path, engine), request, {}, None)
    if repacked:
        check = await launcher.start(120)
        servers = psutil.Process(launcher.server.pid).children()
        try:
            assert check.ok, check.problems
            assert L.NO_REPACK_FLAG in launcher.spec.args()
            assert launcher.server.state == L.READY
            # The second run keeps the weights as they are in the file.
            assert set(launcher.server.placement().host_buffers()) <= {HOST_MAPPED, HOST_LOADED}
            [note] = launcher.notes
            assert "SIGSEGV" in note and "warming up the model" in note and "--no-repack" in note
            assert all(b in note for b in repacked)
        finally:
            await launcher.stop()
        assert servers and not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in servers)
    else:
        # Nothing was repacked on this CPU: a crash is a crash, explained, and not retried.
        with pytest.raises(L.LaunchError) as err:
            await launcher.start(120)
        assert "crashed (SIGSEGV) while warming up the model" in str(err.value)
        assert "warming up the model with an empty run" in str(err.value)  # its last lines
        assert launcher.notes == [] and L.NO_REPACK_FLAG not in launcher.spec.args()
