"""Every benchmark under bench/ runs in its smoke mode and prints its table (#33).

No test ran the benchmarks, so ``bench/tunnel`` broke without anyone seeing. Here each script is
found on disk (a new benchmark is picked up without being listed), run as a subprocess with
``--smoke`` and a timeout, and must exit 0, print a table and leave no file behind in bench/.
A benchmark without a smoke mode fails: it must take ``--smoke`` (its own or through
``bench/smoke.py``), since a script that reads no arguments would run at full size.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"

#: Modules under bench/ that are not benchmarks: shared parts the benchmarks use.
NOT_BENCHMARKS = {
    "smoke.py": "the smoke mode's shared argument handling",
    "delay_proxy.py": "a TCP proxy the LAN benchmarks start",
    "fastest/cpu_quota.py": "CPU quotas for the fastest benchmark's workers",
}

#: Benchmarks that build a simulated LAN of network namespaces (root; CI runs as root).
NEEDS_LAN = {"fastest/run.py", "scale/run.py", "faults.py", "speculation/run.py"}

#: Seconds one smoke run may take; the whole set's budget is about 6 minutes (#33).
TIMEOUT_S = 180


def benchmark_scripts() -> list[str]:
    """Every Python file under bench/ (relative names) except :data:`NOT_BENCHMARKS`."""
    found = sorted(p.relative_to(BENCH).as_posix() for p in BENCH.rglob("*.py") if "__pycache__" not in p.parts)
    return [name for name in found if name not in NOT_BENCHMARKS]


def _marks(name: str) -> list:
    # A benchmark that looks up the engine needs it; in CI it is installed, so conftest fails
    # (never skips) the run when it is missing.
    marks = [pytest.mark.slow]
    if "find_engine" in (BENCH / name).read_text(encoding="utf-8"):
        marks.append(pytest.mark.engine)
    if name in NEEDS_LAN:
        marks.append(pytest.mark.netns)
    return marks


_MARKDOWN_RULE = re.compile(r"^\|\s*:?-{3,}")


def _edges(line: str) -> set[int]:
    """Columns where a word of ``line`` starts or ends (so right- and left-aligned columns both
    show)."""
    edges = set()
    for m in re.finditer(r"\S+", line):
        edges.update((m.start(), m.end()))
    return edges - {0}


def printed_table(text: str) -> bool:
    """Whether ``text`` holds a table: a Markdown table (header, rule, at least one row) or a
    fixed-width one (a header with a gap of two spaces or more between its columns, perhaps a
    rule of dashes, then a row holding a number whose column edges line up with the header's in
    at least two places)."""
    lines = [line.rstrip() for line in text.splitlines()]
    for i, line in enumerate(lines[1:-1], start=1):
        if _MARKDOWN_RULE.match(line) and lines[i - 1].startswith("|") and lines[i + 1].startswith("|"):
            return True
    rows = [line for line in lines if not re.fullmatch(r"-+", line)]
    for header, row in zip(rows, rows[1:]):
        if "  " in header and re.search(r"\d", row) and len(_edges(header) & _edges(row)) >= 2:
            return True
    return False


def _bench_files() -> dict[str, float]:
    return {p.as_posix(): p.stat().st_mtime for p in BENCH.rglob("*") if "__pycache__" not in p.parts}


@pytest.mark.parametrize("name", [pytest.param(n, marks=_marks(n), id=n) for n in benchmark_scripts()])
def test_benchmark_smoke_run_prints_its_table(name: str, tmp_path) -> None:
    source = (BENCH / name).read_text(encoding="utf-8")
    has_smoke_mode = "bench.smoke" in source or "--smoke" in source
    assert has_smoke_mode, f"{name} has no smoke mode: give it --smoke (see bench/README.md)"
    before = _bench_files()
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "TMPDIR": str(tmp_path)}
    started = time.monotonic()
    run = subprocess.run([sys.executable, str(BENCH / name), "--smoke"], cwd=tmp_path, env=env,
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=TIMEOUT_S)
    took = time.monotonic() - started
    print(f"{name}: {took:.1f} s\n{run.stdout}")  # the per-benchmark time, shown with -rA or -s
    assert run.returncode == 0, f"{name} --smoke exited {run.returncode}:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    assert printed_table(run.stdout), f"{name} --smoke printed no table:\n{run.stdout[-3000:]}"
    assert _bench_files() == before, f"{name} --smoke changed files in bench/"


@pytest.mark.parametrize("text", [
    "| a | b |\n|---|---:|\n| x | 1 |\n",
    "  models  entries   median s\n      30      110     0.0062\n",
    "measure       value\n--------------------\nrss           31 MB\n",
])
def test_a_table_is_recognised(text: str) -> None:
    assert printed_table(text)


@pytest.mark.parametrize("text", [
    "",
    "wrote results.md\n",
    "| a | b |\n",  # a header alone is no table
    "Traceback (most recent call last):\n  File \"x.py\", line 3, in <module>\n",
    "model SmolLM2, context 8192 tokens\nloading…\n",
])
def test_text_without_a_table_is_not_one(text: str) -> None:
    assert not printed_table(text)


def test_helpers_listed_as_not_benchmarks_exist() -> None:
    # A helper renamed or removed must leave this list too, or its stale name would hide nothing
    # and a benchmark of the same name later would be skipped silently.
    assert all((BENCH / name).is_file() for name in set(NOT_BENCHMARKS) | NEEDS_LAN)


def _smoke_module():
    spec = importlib.util.spec_from_file_location("bench_smoke", BENCH / "smoke.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=5)
    return parser


def test_smoke_values_apply_only_in_smoke_mode_and_the_command_line_wins() -> None:
    smoke = _smoke_module()
    assert smoke.parse_args(_parser(), {"reps": 1}, []).reps == 5
    assert smoke.parse_args(_parser(), {"reps": 1}, ["--smoke"]).reps == 1
    assert smoke.parse_args(_parser(), {"reps": 1}, ["--smoke", "--reps", "3"]).reps == 3


def test_a_smoke_value_for_an_option_that_does_not_exist_is_refused() -> None:
    # a misspelt option would otherwise leave the smoke run at full size
    with pytest.raises(ValueError, match="rep$"):
        _smoke_module().parse_args(_parser(), {"rep": 1}, ["--smoke"])


def test_smoke_results_go_to_a_temporary_folder() -> None:
    smoke = _smoke_module()
    assert smoke.results_folder(False, BENCH / "tunnel") == BENCH / "tunnel"
    folder = smoke.results_folder(True, BENCH / "tunnel")
    assert folder.is_dir() and BENCH not in folder.parents
    folder.rmdir()
