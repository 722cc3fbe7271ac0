"""A small window that shows this node's pairing PIN: ``herd-agent pin --window``.

The person at a worker PC should not need a terminal to pair it: the Start-menu shortcut (the
MSI) and the desktop entry (``herd-agent install-service``) open this window. It shows the PIN
large, grouped as people read it, how long it is still accepted (minutes:seconds, counting down)
and, in words, where to type it. When the PIN is no longer accepted it says so and offers a new
one.

Two layers, so the logic is tested without a display:

* :func:`pin_screen` — what to show for a PIN and its seconds left (plain data, no GUI toolkit);
* :class:`PinWindow` — a tkinter window that only renders :func:`pin_screen` once a tick.

tkinter is in Python's standard library, so the agent (a small service) stays free of Qt.
:func:`window_unavailable` says why no window can open here (no display, no tkinter), and the
command line then prints the PIN in the terminal instead.
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass

from agent.i18n import translate
from agent.pairing import PIN_TTL, PinFile, format_pin

#: How often the window redraws its countdown (milliseconds).
TICK_MS = 500

#: Where to type the PIN, in words. The agent has no language setting of its own (its
#: :func:`agent.i18n.translate` returns English unless a translator is installed), so the window
#: shows this line in English and, below it, in Simplified Chinese. The Chinese line is the
#: catalogue's translation of the English one (tests/agent/test_pin_window.py checks they agree).
WHERE_TO_TYPE = "On the master: open herd, press Pair on this computer's card and type this PIN."
WHERE_TO_TYPE_ZH = "在主控电脑上：打开 herd，在这台电脑的卡片上按“配对”，然后输入此 PIN。"


@dataclass(frozen=True)
class PinScreen:
    """What the PIN window shows at one moment.

    Attributes:
        pin: the PIN grouped as people read it (``12345 67890``), or "" when none is accepted.
        countdown: time the PIN is still accepted as ``m:ss``, or "" when none is accepted.
        status: one sentence on the PIN's state.
        where: the lines that say where to type the PIN (empty when none is accepted).
        expired: True when no PIN is accepted now: the window offers a new one.
    """

    pin: str
    countdown: str
    status: str
    where: tuple[str, ...]
    expired: bool


def format_countdown(seconds: float) -> str:
    """Seconds left as ``m:ss``, rounded up (a PIN with 0.2 s left still shows ``0:01``)."""
    s = max(0, math.ceil(seconds))
    return f"{s // 60}:{s % 60:02d}"


def where_lines() -> tuple[str, ...]:
    """Where to type the PIN: in the user's language when the agent has a translator, else in
    English and Simplified Chinese."""
    line = translate("PinWindow", "On the master: open herd, press Pair on this computer's card "
                                  "and type this PIN.")
    if line != WHERE_TO_TYPE:  # a translator gave the user's language: one line is enough
        return (line,)
    return (line, WHERE_TO_TYPE_ZH)


def pin_screen(pin: str | None, seconds_left: float) -> PinScreen:
    """What to show for ``pin`` (None: no PIN is accepted now) with ``seconds_left`` to go."""
    if pin is None or seconds_left <= 0:
        return PinScreen(pin="", countdown="", expired=True, where=(),
                         status=translate("PinWindow", "This PIN is no longer accepted (it "
                                                       "expired or has paired a master). Press "
                                                       "New PIN to show another."))
    return PinScreen(pin=format_pin(pin), countdown=format_countdown(seconds_left), expired=False,
                     where=where_lines(),
                     status=translate("PinWindow", "Time left to type it (minutes:seconds). It "
                                                   "pairs one master."))


def screen_of(pins: PinFile) -> PinScreen:
    """:func:`pin_screen` for the PIN ``pins`` holds now."""
    return pin_screen(pins.current(), pins.seconds_left())


def window_unavailable(environ: dict | None = None, platform: str = sys.platform) -> str | None:
    """Why no window can open here (a sentence), or None when one can."""
    env = os.environ if environ is None else environ
    try:
        import tkinter  # noqa: F401, PLC0415 - optional in some Python builds (python3-tk)
    except ImportError:
        return translate("PinWindow", "no window: this Python has no tkinter (install python3-tk)")
    # Tk draws through X11 only; a Wayland desktop gives it XWayland, which sets DISPLAY.
    if platform not in ("win32", "darwin") and not env.get("DISPLAY"):
        return translate("PinWindow", "no window: no graphical display here (DISPLAY is not set)")
    return None


class PinWindow:
    """The tkinter window: renders :func:`screen_of` every :data:`TICK_MS`.

    Its widgets have fixed Tk path names (``.body.pin``, ``.body.countdown``, ``.body.status``,
    ``.body.where``, ``.body.buttons.copy|new|close``) so tests — and assistive tools — can find them.

    Attributes:
        root: the ``tkinter.Tk`` it draws in (the caller runs ``mainloop`` and destroys it).
        pin_label, countdown_label, status_label, where_label: what the person reads.
        copy_button: puts the PIN (digits only) on the clipboard.
        new_button: shows a new PIN; visible only when the PIN is no longer accepted.
    """

    def __init__(self, root, pins: PinFile, *, tick_ms: int = TICK_MS) -> None:
        import tkinter as tk  # noqa: PLC0415 - only when a window is wanted
        from tkinter import font as tkfont  # noqa: PLC0415

        self.root = root
        self.pins = pins
        self.tick_ms = tick_ms
        root.title(translate("PinWindow", "Pairing PIN — llama-herd agent"))
        root.resizable(False, False)
        big = tkfont.Font(root=root, family="TkFixedFont", size=40, weight="bold")
        mid = tkfont.Font(root=root, size=18)
        frame = tk.Frame(root, name="body", padx=24, pady=18)
        frame.pack(fill="both", expand=True)
        self.pin_label = tk.Label(frame, name="pin", font=big)
        self.pin_label.pack()
        self.countdown_label = tk.Label(frame, name="countdown", font=mid)
        self.countdown_label.pack(pady=(4, 8))
        self.status_label = tk.Label(frame, name="status", wraplength=460, justify="center")
        self.status_label.pack()
        self.where_label = tk.Label(frame, name="where", wraplength=460, justify="center")
        self.where_label.pack(pady=(8, 12))
        buttons = tk.Frame(frame, name="buttons")
        buttons.pack()
        self.copy_button = tk.Button(buttons, name="copy", text=translate("PinWindow", "Copy"), command=self.copy)
        self.new_button = tk.Button(buttons, name="new", text=translate("PinWindow", "New PIN"), command=self.new_pin)
        self._close_button = tk.Button(buttons, name="close", text=translate("PinWindow", "Close"), command=root.destroy)
        self._after: str | None = None
        self.screen: PinScreen | None = None
        self.refresh()

    def refresh(self) -> None:
        """Redraw from the PIN file now, and again in one tick."""
        screen = screen_of(self.pins)
        self.screen = screen
        self.pin_label.config(text=screen.pin or "— — —")
        self.countdown_label.config(text=screen.countdown)
        self.status_label.config(text=screen.status)
        self.where_label.config(text="\n".join(screen.where))
        for b in (self.copy_button, self.new_button, self._close_button):
            b.pack_forget()
        shown = [self.new_button] if screen.expired else [self.copy_button]
        for b in (*shown, self._close_button):
            b.pack(side="left", padx=6)
        if self._after is not None:
            self.root.after_cancel(self._after)
        self._after = self.root.after(self.tick_ms, self.refresh)

    def new_pin(self) -> None:
        """Show a fresh PIN (the New PIN button)."""
        self.pins.show()
        self.refresh()

    def copy(self) -> None:
        """Put the PIN's digits on the clipboard (the Copy button); the master accepts them with
        or without the space."""
        pin = self.pins.current()
        if pin:
            self.root.clipboard_clear()
            self.root.clipboard_append(pin)

    def stop(self) -> None:
        """Cancel the next redraw (a destroyed window has none left to cancel)."""
        import tkinter as tk  # noqa: PLC0415

        if self._after is not None:
            try:
                self.root.after_cancel(self._after)
            except tk.TclError:  # the window was closed: its timers went with it
                pass
            self._after = None


def run_window(pins: PinFile) -> int:
    """Open the PIN window on this display and return when the person closes it."""
    import tkinter as tk  # noqa: PLC0415

    _hide_own_console()
    root = tk.Tk(className="herd-agent-pin")
    window = PinWindow(root, pins)
    root.lift()  # opened from a menu: in front of whatever was there
    root.focus_force()
    try:
        root.mainloop()
    finally:
        window.stop()
    return 0


def _hide_own_console() -> None:
    """Windows: hide the console window that opened just for this program (herd-agent.exe is a
    console program, so the Start-menu shortcut brings one up beside the PIN window). A console
    shared with other programs — a terminal the person typed the command in — stays."""
    if sys.platform != "win32":
        return
    import ctypes  # noqa: PLC0415

    kernel32 = ctypes.windll.kernel32
    console = kernel32.GetConsoleWindow()
    attached = (ctypes.c_uint32 * 2)()
    if console and kernel32.GetConsoleProcessList(attached, 2) == 1:  # only this process uses it
        ctypes.windll.user32.ShowWindow(console, 0)  # SW_HIDE


def show_error_window(text: str) -> None:
    """Tell the person what went wrong when there is no terminal to print it in (the window was
    opened from the Start menu or a desktop entry)."""
    if window_unavailable() is not None:
        return
    import tkinter as tk  # noqa: PLC0415
    from tkinter import messagebox  # noqa: PLC0415

    root = tk.Tk(className="herd-agent-pin")
    root.withdraw()
    try:
        messagebox.showerror(translate("PinWindow", "Pairing PIN — llama-herd agent"), text, parent=root)
    finally:
        root.destroy()


def show_pin(pins: PinFile, *, window: bool, command: str = "herd-agent pin") -> int:
    """Show a PIN (a new one, or the current one renewed): in the window when ``window`` is asked
    for and one can open here, else in the terminal (with a one-line note why, when the window
    was asked for). Returns the exit code."""
    pin = pins.show()
    if window:
        why = window_unavailable()
        if why is None:
            return run_window(pins)
        print(f"{command}: {why}; " + translate("PinWindow", "the PIN is shown here instead"),
              file=sys.stderr)
    print(format_pin(pin), flush=True)
    print(f"{command}: " + translate("PinWindow", "enter this PIN on the master within {minutes} "
                                                  "minutes; it pairs one master").format(
        minutes=f"{PIN_TTL / 60:.0f}"), file=sys.stderr)
    return 0

