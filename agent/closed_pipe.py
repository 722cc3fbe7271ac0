"""Leaving quietly when whoever reads the output stops reading: ``herd engine status --json |
head -1`` or ``herd-agent config | head`` (#37). Python ignores SIGPIPE, so a write to a pipe
whose reader is gone raises ``BrokenPipeError``, which used to end in a traceback.

The exit code is then :data:`CLOSED_PIPE_EXIT` (141 = 128 + SIGPIPE): what a shell reports for
any program a closed pipe stopped (``seq 100000 | head -1`` under ``set -o pipefail``), so scripts
see the output was cut short, as they do for other tools. Not 0: not everything was written.
Restoring SIGPIPE's default action instead would let a socket's closed peer kill the agent.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

#: The exit code after a closed pipe: 128 + SIGPIPE (13), as a shell reports a program it stopped.
CLOSED_PIPE_EXIT = 141


def _silence_stdout() -> None:
    """Point standard output at the null device, so the interpreter's last flush at exit finds no
    closed pipe (it would print "Exception ignored … BrokenPipeError" and exit 120)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # no stdout (pythonw) or not a real file
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


def exit_code_on_closed_pipe(run: Callable[[], int]) -> int:
    """Call ``run`` (a program's main work) and return its exit code; when its output pipe is
    closed, :data:`CLOSED_PIPE_EXIT` with nothing printed. Output still buffered is flushed here,
    so a pipe closed before the end is noticed here too, not at interpreter exit."""
    try:
        try:
            return run()
        finally:  # also after SystemExit (argparse's --help, --version)
            if sys.stdout is not None:
                sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
        return CLOSED_PIPE_EXIT
