"""Worker PCs kept awake while a master uses their RPC worker (#36).

Linux: the agent's real logind client (D-Bus over a real socket, the descriptor passed over it)
against a stand-in of logind on a private bus this test starts (``dbus-daemon``): CI has no
logind, and a test must not keep the machine it runs on awake. Windows and macOS: the backends'
calls against stand-ins of ``SetThreadExecutionState`` and of IOKit/CoreFoundation, which cannot
be had on Linux.
"""

from __future__ import annotations

import asyncio
import json
import queue
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from agent import keep_awake
from agent.keep_awake import (ES_CONTINUOUS, ES_SYSTEM_REQUIRED, WHY, KeepAwake, LogindInhibitor, MacInhibitor,
                              WindowsInhibitor)

STANDIN = Path(__file__).with_name("logind_standin.py")


class StandInLogind:
    """The private bus and the stand-in logind on it; ``events`` holds what it printed."""

    def __init__(self, procs) -> None:
        dbus = shutil.which("dbus-daemon")
        if dbus is None:
            pytest.fail("dbus-daemon is not installed (Debian package dbus, in .ci/apt-packages.txt)")
        self.daemon = procs.popen([dbus, "--session", "--nofork", "--print-address"],
                                  stdout=subprocess.PIPE, text=True)
        self.address = self.daemon.stdout.readline().strip()
        assert self.address.startswith("unix:"), self.address
        self.service = procs.popen([sys.executable, str(STANDIN), self.address], stdout=subprocess.PIPE,
                                   text=True)
        self._events: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        assert self._events.get(timeout=20)["event"] == "ready"

    def _read(self) -> None:
        for line in self.service.stdout:
            self._events.put(json.loads(line))

    async def next_event(self, timeout: float = 20.0) -> dict:
        """The stand-in's next event (fails when none comes within ``timeout``); the event loop
        runs meanwhile."""
        try:
            return await asyncio.to_thread(self._events.get, timeout=timeout)
        except queue.Empty:
            pytest.fail(f"the stand-in logind reported nothing within {timeout:g} s")

    def pending(self) -> list[dict]:
        """Events printed so far and not read yet."""
        out = []
        while not self._events.empty():
            out.append(self._events.get_nowait())
        return out


@pytest.fixture
def logind(procs, monkeypatch) -> StandInLogind:
    """A stand-in logind on a private bus, which the agent's system-bus client is pointed at."""
    standin = StandInLogind(procs)
    monkeypatch.setenv("DBUS_SYSTEM_BUS_ADDRESS", standin.address)
    return standin


async def _until(predicate, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


# --- the agent, on Linux, with the real RPC worker --------------------------------------------

@pytest.mark.engine
async def test_kept_awake_while_a_master_uses_the_worker(engine, paired, logind):
    agent, client = paired
    assert (await client.status_json())["keep_awake"] == {"enabled": True, "held": False, "error": None,
                                                          "how": None}
    await client.rpc_start()
    event = await logind.next_event()
    assert event["event"] == "inhibit"
    assert event["args"] == ["sleep:idle", "herd-agent", WHY, "block"]
    await _until(lambda: agent.keep_awake.held)
    shown = (await client.status_json())["keep_awake"]
    assert shown["held"] is True and shown["how"] == "logind"
    await client.rpc_stop()
    assert await logind.next_event() == {"event": "released", "id": event["id"]}
    assert (await client.status_json())["keep_awake"]["held"] is False


@pytest.mark.engine
async def test_a_master_that_went_away_lets_the_pc_sleep(engine, make_agent, master_id, logind, monkeypatch):
    from agent.client import AgentClient
    monkeypatch.setattr(keep_awake, "RECHECK_S", 0.2)
    agent = await make_agent(lease_idle_s=1)
    async with AgentClient(agent.api_url, identity=master_id) as client:
        await client.pair(agent.show_pin(), "test-master")
        await client.rpc_start()
        inhibit = await logind.next_event()
        assert inhibit["event"] == "inhibit"
    # no call from the master since: its lease ends after 1 s, and the inhibitor with it
    assert await logind.next_event() == {"event": "released", "id": inhibit["id"]}
    assert agent.supervisor.state != "stopped"  # the worker itself is left running


@pytest.mark.engine
async def test_the_setting_off_never_inhibits(engine, make_agent, master_id, logind):
    from agent.client import AgentClient
    agent = await make_agent(keep_awake=False)
    async with AgentClient(agent.api_url, identity=master_id) as client:
        await client.pair(agent.show_pin(), "test-master")
        await client.rpc_start()
        assert await agent.keep_awake.apply() is False  # decided now, not in the background
        assert (await client.status_json())["keep_awake"]["enabled"] is False
    assert logind.pending() == []


async def test_without_logind_the_status_says_why(tmp_path, monkeypatch):
    monkeypatch.setenv("DBUS_SYSTEM_BUS_ADDRESS", f"unix:path={tmp_path / 'no-bus'}")
    awake = KeepAwake(True, lambda: True, inhibitor=LogindInhibitor())
    try:
        assert await awake.apply() is False
        error = awake.status()["error"]
        assert error.startswith("this computer has no system D-Bus, so there is no logind to ask"), error
        assert "Errno" not in error  # in words, not an OSError's repr (#37)
    finally:
        await awake.close()


async def test_the_logind_backend_holds_until_released(logind):
    awake = KeepAwake(True, lambda: wanted, inhibitor=LogindInhibitor())
    wanted = True
    try:
        assert await awake.apply() is True
        assert (await logind.next_event())["event"] == "inhibit"
        wanted = False
        assert await awake.apply() is False
        assert (await logind.next_event())["event"] == "released"
    finally:
        await awake.close()


# --- Windows and macOS: the calls, against stand-ins of their APIs ----------------------------

class StandInKernel32:
    """Stand-in for kernel32's SetThreadExecutionState (no Windows here): records the flags and
    the calling thread, answers the previous state as Windows does (non-zero = success)."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def SetThreadExecutionState(self, flags: int) -> int:  # noqa: N802 - the API's name
        self.calls.append((flags, threading.get_ident()))
        return ES_CONTINUOUS


async def test_windows_asks_the_thread_to_keep_the_system_awake():
    kernel32 = StandInKernel32()
    wanted = True
    awake = KeepAwake(True, lambda: wanted, inhibitor=WindowsInhibitor(kernel32))
    try:
        assert await awake.apply() is True
        wanted = False
        assert await awake.apply() is False
    finally:
        await awake.close()
    assert [flags for flags, _ in kernel32.calls] == [ES_CONTINUOUS | ES_SYSTEM_REQUIRED, ES_CONTINUOUS]
    # the execution state belongs to a thread: set and cleared on the same one
    assert len({thread for _, thread in kernel32.calls}) == 1


class StandInMacFrameworks:
    """Stand-ins for CoreFoundation's CFString calls and IOKit's power assertions (no macOS
    here): records what was asserted, and which strings are still alive."""

    def __init__(self) -> None:
        self.strings: dict[int, bytes] = {}
        self.assertions: dict[int, tuple[bytes, int, bytes]] = {}
        self.released: list[int] = []

    def CFStringCreateWithCString(self, allocator, text: bytes, encoding: int) -> int:  # noqa: N802
        assert encoding == keep_awake.CF_UTF8
        ref = 0x1000 + len(self.strings) + len(self.released) * 10
        self.strings[ref] = text
        return ref

    def CFRelease(self, ref: int) -> None:  # noqa: N802
        del self.strings[ref]

    def IOPMAssertionCreateWithName(self, kind: int, level: int, name: int, out) -> int:  # noqa: N802
        assertion = 41 + len(self.assertions)
        self.assertions[assertion] = (self.strings[kind], level, self.strings[name])
        out.contents.value = assertion
        return 0

    def IOPMAssertionRelease(self, assertion: int) -> int:  # noqa: N802
        self.released.append(assertion)
        return 0


async def test_macos_holds_a_power_assertion_until_released():
    mac = StandInMacFrameworks()
    wanted = True
    awake = KeepAwake(True, lambda: wanted, inhibitor=MacInhibitor(iokit=mac, corefoundation=mac))
    try:
        assert await awake.apply() is True
        assert mac.assertions == {41: (b"PreventUserIdleSystemSleep", 255, WHY.encode())}
        wanted = False
        assert await awake.apply() is False
    finally:
        await awake.close()
    assert mac.released == [41]
    assert mac.strings == {}  # both CFStrings released


async def test_a_refusal_is_reported_and_retried():
    class Refusing(StandInKernel32):
        def SetThreadExecutionState(self, flags: int) -> int:  # noqa: N802
            super().SetThreadExecutionState(flags)
            return 0
    kernel32 = Refusing()
    awake = KeepAwake(True, lambda: True, inhibitor=WindowsInhibitor(kernel32), recheck=0.05)
    try:
        assert await awake.apply() is False
        assert awake.status() == {"enabled": True, "held": False, "how": "windows",
                                  "error": "Windows refused SetThreadExecutionState"}
        await _until(lambda: len(kernel32.calls) >= 2)  # tried again by the recheck
    finally:
        await awake.close()
