"""Running the real ``herd`` command in end-to-end tests, and reading ``herd up``'s report."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time

import psutil

HERD = [sys.executable, "-m", "gui.main"]


def herd(args: list[str], env: dict, wrap=None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``herd ARGS`` to completion (``wrap`` puts it in a namespace)."""
    argv = HERD + [str(a) for a in args]
    return subprocess.run(wrap(argv) if wrap else argv, capture_output=True, text=True, env=env,
                          timeout=timeout, stdin=subprocess.DEVNULL)


class HerdUp:
    """A running ``herd up``: its output lines, collected by a thread as they come."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._pump, daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, text: str, timeout: float) -> None:
        """Wait until a line contains ``text``; fail with the output if it exits or times out."""
        deadline = time.monotonic() + timeout
        while not any(text in ln for ln in self.lines):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self._thread.join(2)
                raise AssertionError(f"herd up never printed {text!r} (exit {self.proc.poll()}):\n"
                                     + "\n".join(self.lines))
            time.sleep(0.05)

    def placement(self) -> dict[str, list[int]]:
        """The "Placement reported by llama-server" table: {endpoint or host: slots}."""
        out: dict[str, list[int]] = {}
        start = next(i for i, ln in enumerate(self.lines) if ln.startswith("Placement reported"))
        for ln in self.lines[start + 1:]:
            m = re.match(r"\s+(\S+)\s+slots (.+)$", ln)
            if not m:
                break
            slots: list[int] = []
            for part in m.group(2).split(","):
                a, _, b = part.strip().partition("-")
                slots.extend(range(int(a), int(b or a) + 1))
            out[m.group(1)] = slots
        return out

    def endpoint(self) -> str:
        """The endpoint URL ``herd up`` printed (without ``/v1``)."""
        line = next(ln for ln in self.lines if ln.startswith("Endpoint: "))
        return line.split()[1].removesuffix("/v1")

    def server_pids(self) -> list[int]:
        """llama-server processes started by this herd (its children)."""
        try:
            kids = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []
        return [k.pid for k in kids if "llama-server" in k.name()]


def rpc_children(pid: int) -> list[int]:
    """ggml-rpc-server processes under ``pid``."""
    try:
        kids = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    return [k.pid for k in kids if "rpc-server" in k.name()]


def gone(pids: list[int], timeout: float = 10.0) -> bool:
    """Wait until none of ``pids`` runs any more (zombies count as gone)."""
    deadline = time.monotonic() + timeout
    while True:
        alive = []
        for p in pids:
            try:
                if psutil.Process(p).status() != psutil.STATUS_ZOMBIE:
                    alive.append(p)
            except psutil.NoSuchProcess:
                pass
        if not alive:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


def same_but_forwarders(real: list[str], planned: list[str]) -> bool:
    """Whether llama-server's real command line is the planned one, but for ``--rpc``: there
    llama-server reaches each worker through this computer's TLS forwarder (a loopback port of
    the run), one per planned endpoint, in the same order."""
    if len(real) != len(planned) or ("--rpc" in real) != ("--rpc" in planned):
        return False
    if "--rpc" not in real:
        return real == planned
    i = real.index("--rpc") + 1
    ours, theirs = real[i].split(","), planned[i].split(",")
    return (real[:i] + real[i + 1:] == planned[:i] + planned[i + 1:] and len(ours) == len(theirs)
            and all(ep.startswith("127.0.0.1:") for ep in ours))
