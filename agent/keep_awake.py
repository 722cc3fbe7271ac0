"""Keeping a worker PC awake while a master uses its RPC worker (#36).

A PC that goes to sleep in the middle of a conversation takes its layers with it: the master
fails over, slower, to the others. So while a master holds the worker (its lease, see
:mod:`agent.lease`, and a worker running for it) the agent asks the OS not to sleep on idle,
and lets go as soon as the master does — by ``rpc/stop``, or by going away until its lease ends.

One backend per OS, each holding the OS's own kind of "don't sleep" request:

* Linux: logind's ``Inhibit("sleep:idle", "herd-agent", why, "block")`` on the system bus. The
  call answers with a file descriptor; the inhibitor lasts as long as that descriptor is open,
  so releasing is closing it, and an agent that dies (even ``kill -9``) releases it with its
  descriptors. The call is made with `jeepney <https://jeepney.readthedocs.io>`_ (pure Python
  D-Bus, no C library): ``dbus-send`` cannot keep the descriptor, and ``systemd-inhibit`` would
  need a helper process held for the whole time.
* Windows: ``SetThreadExecutionState(ES_CONTINUOUS | ES_SYSTEM_REQUIRED)``, cleared with
  ``ES_CONTINUOUS``. The state belongs to the calling *thread*, so every call is made on one
  thread that lives as long as the :class:`KeepAwake` (its executor's single worker).
* macOS: an IOKit power assertion (``PreventUserIdleSystemSleep``), what ``caffeinate -i`` holds;
  the OS drops it when the process ends.

A failure (no logind, no D-Bus) is reported in the status and on the node card, never fatal: the
agent serves anyway, and the PC may sleep.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Protocol

log = logging.getLogger("herd.agent.keep_awake")

#: Seconds between checks while the PC is kept awake (or should be): a master that went away
#: without ``rpc/stop`` is noticed when its lease ends, within this long after.
RECHECK_S = 15.0
#: The reason logind lists (``systemd-inhibit --list``) and the macOS assertion's name.
WHY = "a llama-herd master is using this computer's RPC worker"
#: Seconds a D-Bus call to logind may take.
DBUS_TIMEOUT = 5.0


class InhibitError(RuntimeError):
    """The OS refused to keep the PC awake, or has no way to; the message says which and why."""


class Inhibitor(Protocol):
    """One OS's way to keep the PC awake. ``acquire`` and ``release`` are only called while
    released and held respectively, always from the same thread."""

    how: str

    def acquire(self, why: str) -> None: ...

    def release(self) -> None: ...


class LogindInhibitor:
    """logind's ``Inhibit`` over the system bus (``$DBUS_SYSTEM_BUS_ADDRESS`` if set, as every
    D-Bus client reads it). Held while the returned descriptor is open."""

    how = "logind"

    def __init__(self) -> None:
        self._fd: int | None = None

    def acquire(self, why: str) -> None:
        try:
            from jeepney import DBusAddress, MessageType, new_method_call  # noqa: PLC0415
            from jeepney.io.blocking import open_dbus_connection  # noqa: PLC0415
        except ImportError:
            raise InhibitError("the jeepney package (D-Bus) is not installed; install llama-herd "
                               "with its dependencies") from None
        manager = DBusAddress("/org/freedesktop/login1", bus_name="org.freedesktop.login1",
                              interface="org.freedesktop.login1.Manager")
        call = new_method_call(manager, "Inhibit", "ssss", ("sleep:idle", "herd-agent", why, "block"))
        try:
            with open_dbus_connection(bus="SYSTEM", enable_fds=True) as bus:
                reply = bus.send_and_get_reply(call, timeout=DBUS_TIMEOUT)
        except FileNotFoundError:
            # said in words on the node card (#37: never a Python error's repr)
            raise InhibitError("this computer has no system D-Bus, so there is no logind to ask; its own "
                               "power settings decide when it sleeps") from None
        except (OSError, TimeoutError, KeyError, ValueError) as exc:
            why = getattr(exc, "strerror", None) or str(exc) or "no answer"
            raise InhibitError(f"cannot reach logind on the system D-Bus: {why}") from None
        if reply.header.message_type == MessageType.error:
            detail = reply.body[0] if reply.body and isinstance(reply.body[0], str) else "no reason given"
            raise InhibitError(f"logind refused to keep this computer awake: {detail}")
        self._fd = reply.body[0].to_raw_fd()  # the inhibitor lives while this stays open

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


ES_CONTINUOUS = 0x80000000
ES_SYSTEM_REQUIRED = 0x00000001


class WindowsInhibitor:
    """``SetThreadExecutionState`` of kernel32 (``kernel32``: the library, or a stand-in of it)."""

    how = "windows"

    def __init__(self, kernel32=None) -> None:
        if kernel32 is None:
            kernel32 = ctypes.WinDLL("kernel32")  # type: ignore[attr-defined]  # Windows only
            kernel32.SetThreadExecutionState.restype = ctypes.c_uint32
            kernel32.SetThreadExecutionState.argtypes = [ctypes.c_uint32]
        self._kernel32 = kernel32

    def acquire(self, why: str) -> None:
        if not self._kernel32.SetThreadExecutionState(ES_CONTINUOUS | ES_SYSTEM_REQUIRED):
            raise InhibitError("Windows refused SetThreadExecutionState")

    def release(self) -> None:
        self._kernel32.SetThreadExecutionState(ES_CONTINUOUS)


#: kIOPMAssertionTypePreventUserIdleSystemSleep, kIOPMAssertionLevelOn, kCFStringEncodingUTF8
MAC_ASSERTION = b"PreventUserIdleSystemSleep"
MAC_LEVEL_ON = 255
CF_UTF8 = 0x08000100


class MacInhibitor:
    """An IOKit power assertion (``iokit``/``corefoundation``: the frameworks, or stand-ins)."""

    how = "macos"

    def __init__(self, iokit=None, corefoundation=None) -> None:
        if iokit is None or corefoundation is None:
            iokit, corefoundation = _mac_frameworks()
        self._iokit = iokit
        self._cf = corefoundation
        self._id: int | None = None

    def acquire(self, why: str) -> None:
        kind = self._cf.CFStringCreateWithCString(None, MAC_ASSERTION, CF_UTF8)
        name = self._cf.CFStringCreateWithCString(None, why.encode("utf-8"), CF_UTF8)
        assertion = ctypes.c_uint32(0)
        try:
            result = self._iokit.IOPMAssertionCreateWithName(kind, MAC_LEVEL_ON, name, ctypes.pointer(assertion))
        finally:
            self._cf.CFRelease(name)
            self._cf.CFRelease(kind)
        if result != 0:
            raise InhibitError(f"macOS refused the power assertion (IOReturn {result:#x})")
        self._id = assertion.value

    def release(self) -> None:
        assertion, self._id = self._id, None
        if assertion is not None:
            self._iokit.IOPMAssertionRelease(assertion)


def _mac_frameworks():
    iokit = ctypes.cdll.LoadLibrary(ctypes.util.find_library("IOKit") or "IOKit")
    cf = ctypes.cdll.LoadLibrary(ctypes.util.find_library("CoreFoundation") or "CoreFoundation")
    cf.CFStringCreateWithCString.restype = ctypes.c_void_p
    cf.CFStringCreateWithCString.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_uint32]
    cf.CFRelease.argtypes = [ctypes.c_void_p]
    iokit.IOPMAssertionCreateWithName.restype = ctypes.c_int32
    iokit.IOPMAssertionCreateWithName.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p,
                                                  ctypes.POINTER(ctypes.c_uint32)]
    iokit.IOPMAssertionRelease.restype = ctypes.c_int32
    iokit.IOPMAssertionRelease.argtypes = [ctypes.c_uint32]
    return iokit, cf


def platform_inhibitor() -> Inhibitor:
    """This OS's backend (logind on Linux and other Unix-likes)."""
    if sys.platform == "win32":
        return WindowsInhibitor()
    if sys.platform == "darwin":
        return MacInhibitor()
    return LogindInhibitor()


class KeepAwake:
    """Holds a sleep inhibitor exactly while ``wanted()`` says a master uses the worker.

    Call :meth:`check` (from the event loop) whenever that may have changed; while held, it also
    checks by itself every :data:`RECHECK_S` seconds. Every OS call runs on one private thread.

    Args:
        enabled: the agent's ``keep_awake`` setting; off, nothing is ever held.
        wanted: ``wanted()`` — is the worker in use by a master now?
        inhibitor: the backend (default: :func:`platform_inhibitor`, made on first use).

    Attributes:
        held: the OS is asked to stay awake now.
        error: why the last attempt failed (None after a success or a release).
    """

    def __init__(self, enabled: bool, wanted: Callable[[], bool], *, inhibitor: Inhibitor | None = None,
                 recheck: float | None = None) -> None:
        self.enabled = enabled
        self._wanted = wanted
        self._inhibitor = inhibitor
        self._recheck = RECHECK_S if recheck is None else recheck
        self.held = False
        self.error: str | None = None
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="keep-awake")
        self._lock = asyncio.Lock()
        self._timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task] = set()
        self._closed = False

    def status(self) -> dict:
        """The ``keep_awake`` part of ``/status``."""
        return {"enabled": self.enabled, "held": self.held, "error": self.error,
                "how": self._inhibitor.how if self._inhibitor is not None else None}

    def check(self) -> None:
        """Take or let go of the inhibitor as ``wanted()`` now says (in the background)."""
        if self._closed:
            return
        task = asyncio.get_running_loop().create_task(self.apply())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def apply(self) -> bool:
        """Take or let go of the inhibitor now; returns whether it is held."""
        async with self._lock:
            if self._closed:
                return self.held
            want = self.enabled and self._wanted()
            if want != self.held:
                await asyncio.get_running_loop().run_in_executor(self._thread, self._switch, want)
            if self._timer is not None:
                self._timer.cancel()
            self._timer = (asyncio.get_running_loop().call_later(self._recheck, self.check)
                           if want or self.held else None)
            return self.held

    def _switch(self, want: bool) -> None:
        """Acquire or release (on the private thread)."""
        try:
            if self._inhibitor is None:
                self._inhibitor = platform_inhibitor()
            if want:
                self._inhibitor.acquire(WHY)
                log.info("keeping this computer awake while a master uses the RPC worker (%s)",
                         self._inhibitor.how)
            else:
                self._inhibitor.release()
                log.info("this computer may sleep again: no master uses the RPC worker")
            self.held, self.error = want, None
        except (InhibitError, OSError, AttributeError) as exc:
            message = str(exc) if isinstance(exc, InhibitError) else f"cannot keep this computer awake ({exc})"
            if message != self.error:  # once per cause, not at every recheck
                log.warning("%s; it may go to sleep while serving", message)
            self.error = message
            if not want:
                self.held = False

    async def close(self) -> None:
        """Let go (if held) and end the private thread. Safe to call twice."""
        async with self._lock:
            self._closed = True
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if self.held:
                await asyncio.get_running_loop().run_in_executor(self._thread, self._switch, False)
        for task in list(self._tasks):
            task.cancel()
        self._thread.shutdown(wait=True)
