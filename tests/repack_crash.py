"""A stand-in for a CPU where llama.cpp's weight repacking crashes llama-server (Intel AMX).

The crash is real on Intel CPUs with AMX: llama-server of the pinned build prints its real
start-up log, then dies right after "warming up the model with an empty run" — by SIGILL or
SIGSEGV, the signal varying from run to run — whenever host layers hold weights of a type the
AMX kernels take (Q4_0, Q4_1, Q8_0, Q4_K, Q5_K, Q6_K, IQ4_XS) and repacking is on. F16 does not
crash; ``--no-repack`` serves everything. On other CPUs it cannot happen, so this stand-in
delivers it, failing the way the real thing fails:

* the *real* llama-server runs the real command: the model loads, the log is the real one for
  this CPU, and where nothing crashes the server really serves;
* the wrapper reads the model (GGUF) and the command line to know which weights sit on the host
  (``-ngl``, ``--rpc``, the layer slots) — as the AMX CPU's llama.cpp does — and only when some
  are of the AMX types and repacking is on (no ``--no-repack``/``-nr``, no ``LLAMA_ARG_REPACK``
  turning it off) does it kill the server by SIGILL or SIGSEGV (alternating) as the warm-up
  starts — after the warm-up line at ``-lv 4`` and above, after the threadpool's line (the last
  one printed before it) at ``-lv 3`` — then dies of the same signal itself;
* each crash is appended to ``crashes.log`` beside it, so a test can count them.

:func:`crashing_engine` makes an engine folder of it (``HERD_ENGINE_DIR`` takes it, so the CLI
and the app use it as they would the real one).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from agent.engine_lookup import MANIFEST_NAME, Engine, exe_name, find_engine

WRAPPER = r'''
import ctypes, os, signal, subprocess, sys
from pathlib import Path

REAL = {real!r}
AMX_TYPES = {{"Q4_0", "Q4_1", "Q8_0", "Q4_K", "Q5_K", "Q6_K", "IQ4_XS"}}
HERE = Path(__file__).resolve().parent
args = sys.argv[1:]


def value(*names):
    for i, a in enumerate(args):
        if a in names and i + 1 < len(args):
            return args[i + 1]
        for n in names:
            if a.startswith(n + "="):
                return a.split("=", 1)[1]
    return None


def repacking_on():
    if "--no-repack" in args or "-nr" in args:
        return False
    return os.environ.get("LLAMA_ARG_REPACK", "").lower() not in ("0", "false", "off", "no")


def host_amx_types():
    """The AMX weight types the host holds for this command (as llama.cpp places them)."""
    model = value("-m", "--model")
    if not model:
        return set()
    import gguf
    reader = gguf.GGUFReader(model)
    arch = bytes(reader.fields["general.architecture"].parts[-1]).decode()
    n_layer = int(reader.fields[f"{{arch}}.block_count"].parts[-1][0])
    slots = n_layer + 1
    devices = bool(value("--rpc")) or bool(value("-dev", "--device"))
    ngl = value("-ngl", "--gpu-layers", "--n-gpu-layers")
    ngl = slots if ngl in (None, "auto", "all") or int(ngl) < 0 else min(int(ngl), slots)
    host = slots - ngl if devices else slots
    names = {{t.name for t in reader.tensors}}
    found = set()
    for t in reader.tensors:
        if len(t.shape) < 2 or t.name.endswith("_norm.weight") or t.name == "token_embd.weight":
            continue
        if t.name.startswith("blk."):
            on_host = int(t.name.split(".")[1]) < min(host, n_layer)
        else:  # the output layer (slot n_layer)
            on_host = host == slots
        if on_host:
            found.add(t.tensor_type.name)
    if host == slots and "output.weight" not in names:  # tied: the embeddings are the output matrix
        for t in reader.tensors:
            if t.name == "token_embd.weight":
                found.add(t.tensor_type.name)
    return found & AMX_TYPES


crash = repacking_on() and bool(host_amx_types())
# The crash comes as the warm-up starts, right after the threadpool is made. At -lv 4 and above
# llama-server says "warming up the model" first; at -lv 3 the threadpool's line is its last.
level = value("-lv", "--verbosity")
level = int(level) if level and level.lstrip("-").isdigit() else 3
trigger = b"warming up the model" if level >= 4 else b"llama threadpool init"
# The real server goes when the wrapper goes: stopped (SIGTERM, forwarded) or killed (the
# kernel's parent-death signal), so a stop leaves no llama-server behind.
child = subprocess.Popen([REAL, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         preexec_fn=lambda: ctypes.CDLL(None).prctl(1, signal.SIGTERM))


def stop(*_):
    child.terminate()
    child.wait()
    os._exit(0)


def die(sig):
    signal.signal(sig, signal.SIG_DFL)
    os.kill(os.getpid(), sig)


signal.signal(signal.SIGTERM, stop)
for line in child.stdout:
    sys.stdout.buffer.write(line)
    sys.stdout.flush()
    if crash and trigger in line:
        log = HERE / "crashes.log"
        n = len(log.read_text().splitlines()) if log.exists() else 0
        sig = (signal.SIGILL, signal.SIGSEGV)[n % 2]
        with open(log, "a") as f:
            f.write(f"{{sig.name}} {{value('-m', '--model')}}\n")
        child.kill()
        child.wait()
        die(sig)
code = child.wait()
if code < 0:  # the real server died of a signal of its own (a real AMX CPU): so does the wrapper
    die(-code)
sys.exit(code)
'''


def crashing_engine(folder: Path, real: Engine | None = None) -> Engine:
    """An engine folder whose llama-server is the stand-in around ``real``'s (the managed engine
    by default); its RPC worker and llama-bench are the real ones. Returns it as found."""
    real = real or find_engine(probe=True)
    folder.mkdir(parents=True, exist_ok=True)
    program = folder / exe_name("llama-server")
    program.write_text(f"#!{sys.executable}\n" + WRAPPER.format(real=str(real.llama_server)))
    program.chmod(0o755)
    for name, path in (("ggml-rpc-server", real.rpc_server), ("llama-bench", real.llama_bench)):
        if path is not None:
            (folder / exe_name(name)).symlink_to(path)
    manifest = (real.folder / MANIFEST_NAME) if real.folder else None
    if manifest is not None and manifest.is_file():
        shutil.copy(manifest, folder / MANIFEST_NAME)
    else:
        (folder / MANIFEST_NAME).write_text(json.dumps({"build": real.build, "rpc_proto": real.rpc_proto}))
    eng = find_engine(folder)
    assert eng.llama_server == program, eng
    return eng


def crashes(engine: Engine) -> list[str]:
    """The crashes the stand-in of ``engine`` delivered so far (``"SIGILL /path/model.gguf"``)."""
    log = Path(engine.llama_server).parent / "crashes.log"
    return log.read_text().splitlines() if log.exists() else []

