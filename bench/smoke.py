"""The benchmarks' smoke mode (#33): ``--smoke`` runs a benchmark in seconds.

A benchmark that no one runs rots without anyone seeing (``bench/tunnel`` did). So every
benchmark takes ``--smoke``: its smallest sizes and fewest repetitions, the same code path and
the same printed table, and no result files written into the repository (a temporary folder or
nothing). ``tests/benchmarks/test_bench_smoke.py`` runs every benchmark this way in CI. The
numbers a smoke run prints mean nothing; it shows that the benchmark still works.

Usage in a benchmark::

    from bench.smoke import parse_args
    args = parse_args(parser, {"reps": 1, "tokens": 4})

Not a benchmark itself.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

HELP = "run in seconds at the smallest sizes, to check that the benchmark works (numbers mean nothing)"


def parse_args(parser: argparse.ArgumentParser, smoke: dict, argv: list[str] | None = None) -> argparse.Namespace:
    """``parser``'s arguments with ``--smoke`` added; with ``--smoke``, the options in ``smoke``
    ({option's dest: value}) take those values unless given on the command line as well.

    ``args.smoke`` says which mode runs.
    """
    parser.add_argument("--smoke", action="store_true", help=HELP)
    known, _ = parser.parse_known_args(argv)
    if known.smoke:
        unknown = sorted(set(smoke) - set(vars(known)))
        if unknown:  # a typo here would quietly run the benchmark at full size
            raise ValueError(f"smoke values for options the benchmark does not have: {', '.join(unknown)}")
        parser.set_defaults(**smoke)
    return parser.parse_args(argv)


def results_folder(smoke: bool, folder: Path) -> Path:
    """Where a benchmark writes its result files: ``folder``, or a new temporary folder in
    smoke mode (a smoke run's numbers must not replace the real results in the repository)."""
    if smoke:
        return Path(tempfile.mkdtemp(prefix="herd-bench-smoke-"))
    return folder
