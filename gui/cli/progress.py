"""A one-line terminal progress bar for long work (downloads, builds)."""

from __future__ import annotations

import sys
import time


class TerminalProgress:
    """Callable progress sink: ``progress(stage, fraction_or_None)`` redraws one line on stderr.

    On a terminal it redraws in place at most ten times a second; when stderr is not a terminal
    (CI logs) it prints a line only when the stage changes or another tenth is done.
    """

    def __init__(self, stream=None, width: int = 30) -> None:
        self.stream = stream or sys.stderr
        self.width = width
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self._last_draw = 0.0
        self._last_key: tuple[str, int] | None = None

    def __call__(self, stage: str, fraction: float | None) -> None:
        stage_key = stage.split(" ")[0] if stage.startswith("Downloading") else stage
        tenth = -1 if fraction is None else int(fraction * 10)
        if self.tty:
            now = time.monotonic()
            if now - self._last_draw < 0.1 and fraction not in (1.0,):
                return
            self._last_draw = now
            self.stream.write("\r\033[K" + self._render(stage, fraction))
            if fraction == 1.0:
                self.stream.write("\n")
            self.stream.flush()
        elif (stage_key, tenth) != self._last_key:
            self._last_key = (stage_key, tenth)
            self.stream.write(self._render(stage, fraction) + "\n")
            self.stream.flush()

    def _render(self, stage: str, fraction: float | None) -> str:
        if fraction is None:
            return f"{stage} …"
        filled = int(self.width * max(0.0, min(1.0, fraction)))
        return f"[{'#' * filled}{'.' * (self.width - filled)}] {fraction * 100:5.1f}%  {stage}"

    def done(self) -> None:
        """End the line on a terminal."""
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


class TransferPrinter:
    """``herd up``'s start-up progress by the byte: a callable for
    :attr:`gui.cluster.launching.launcher.ClusterLauncher.on_transfer`.

    Each :class:`~gui.cluster.launching.transfer.TransferEvent` shows every worker's slice (bytes, rate,
    ETA, from cache) and a stall by name. On a terminal one line is redrawn in place at most
    five times a second; otherwise a line is printed when a worker passes another tenth of its
    slice, when a stall begins, and once all slices arrived.
    """

    def __init__(self, stream=None, width: int = 20) -> None:
        self.stream = stream or sys.stderr
        self.width = width
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self._last_draw = 0.0
        self._last_key: tuple | None = None
        self._finished = False

    def render(self, event) -> str:
        """One line for ``event``: the overall bar, then each worker's figures, then a stall."""
        filled = int(self.width * event.fraction)
        line = (f"weights [{'#' * filled}{'.' * (self.width - filled)}] {event.fraction * 100:5.1f}%  "
                + "  |  ".join(w.describe() for w in event.workers))
        return line + (f"  !! {event.stall}" if event.stall else "")

    def __call__(self, event) -> None:
        if self._finished:
            return
        done = event.done
        if self.tty:
            now = time.monotonic()
            if now - self._last_draw < 0.2 and not done:
                return
            self._last_draw = now
            self.stream.write("\r\033[K" + self.render(event) + ("\n" if done else ""))
        else:
            key = (tuple(int(w.fraction * 10) for w in event.workers), event.stalled_node, done)
            if key == self._last_key:
                return
            self._last_key = key
            self.stream.write(self.render(event) + "\n")
        self._finished = done
        self.stream.flush()
