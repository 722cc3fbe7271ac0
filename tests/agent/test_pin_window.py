"""The pairing PIN window (``herd-agent pin --window``): what it says at each moment, and the real
window under a real X server (Xvfb), as the person at the worker PC sees and uses it."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from xvfb import pump_until, tk_app_shown

from agent import pin_window
from agent.i18n import set_translator
from agent.main import build_parser
from agent.pairing import PIN_TTL, PinFile, format_pin
from agent.pin_window import PinWindow, format_countdown, pin_screen, window_unavailable
from agent.service_windows import elevated_command

ROOT = Path(__file__).resolve().parents[2]
TS = ROOT / "resources" / "translations" / "herd_zh_CN.ts"


class FakeClock:
    """Wall time the test moves by hand: five minutes of PIN life without waiting five minutes."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


# --- what to show (no display needed) -------------------------------------------------------

@pytest.mark.parametrize("seconds, shown", [
    (300, "5:00"), (299.2, "5:00"), (61, "1:01"), (60, "1:00"), (59.5, "1:00"), (9, "0:09"),
    (0.2, "0:01"),
])
def test_countdown_is_minutes_and_seconds_rounded_up(seconds, shown):
    assert format_countdown(seconds) == shown


def test_a_live_pin_is_grouped_with_its_time_and_where_to_type_it():
    screen = pin_screen("1234567890", 125.0)
    assert screen.pin == "12345 67890" and screen.countdown == "2:05" and not screen.expired
    assert "Pair" in screen.where[0] and "master" in screen.where[0]
    # the agent has no language of its own, so Chinese readers get their line too
    assert screen.where[1] == pin_window.WHERE_TO_TYPE_ZH


@pytest.mark.parametrize("pin, left", [(None, 100.0), ("1234567890", 0.0), ("1234567890", -3.0)])
def test_no_accepted_pin_says_so_and_offers_a_new_one(pin, left):
    screen = pin_screen(pin, left)
    assert screen.expired and screen.pin == "" and screen.countdown == "" and screen.where == ()
    assert "no longer accepted" in screen.status and "New PIN" in screen.status


def test_with_a_translator_the_window_speaks_one_language():
    set_translator(lambda context, text: "ZH:" + text if context == "PinWindow" else text)
    try:
        screen = pin_screen("1234567890", 10)
    finally:
        set_translator(None)
    assert screen.where == ("ZH:" + pin_window.WHERE_TO_TYPE,)


def test_the_chinese_line_is_the_catalogues_translation():
    """The window's own Chinese line and the app's catalogue say the same thing."""
    context = next(c for c in ET.parse(TS).getroot().iter("context") if c.findtext("name") == "PinWindow")
    translations = {m.findtext("source"): m.findtext("translation") for m in context.iter("message")}
    assert translations[pin_window.WHERE_TO_TYPE] == pin_window.WHERE_TO_TYPE_ZH


def test_screen_follows_the_pin_file(tmp_path):
    clock = FakeClock()
    pins = PinFile(tmp_path, clock=clock)
    pin = pins.show()
    assert pin_window.screen_of(pins).pin == format_pin(pin)
    clock.now += PIN_TTL - 30
    assert pin_window.screen_of(pins).countdown == "0:30"
    clock.now += 31
    assert pin_window.screen_of(pins).expired


def test_window_unavailable_without_a_display():
    assert "DISPLAY" in window_unavailable({}, platform="linux")
    assert window_unavailable({"DISPLAY": ":5"}, platform="linux") is None
    # Tk needs X11: on a Wayland desktop that is XWayland's DISPLAY
    assert "DISPLAY" in window_unavailable({"WAYLAND_DISPLAY": "wayland-0"}, platform="linux")
    assert window_unavailable({}, platform="win32") is None  # Windows always has its desktop


# --- the command line -----------------------------------------------------------------------

def test_window_flag_on_both_pin_commands():
    assert build_parser().parse_args(["pin", "--window"]).window is True
    assert build_parser().parse_args(["pin"]).window is False
    args = build_parser().parse_args(["service", "pin", "--window"])
    assert (args.command, args.action, args.window) == ("service", "pin", True)


def test_elevation_reruns_the_same_command():
    # frozen (the MSI's herd-agent.exe): the exe itself with the same arguments
    exe = r"C:\Program Files\llama-herd agent\herd-agent.exe"
    assert elevated_command([exe, "service", "pin", "--window"], exe, frozen=True) == \
        (exe, "service pin --window")
    # from source: Python runs the same script again; paths with spaces stay one argument
    assert elevated_command([r"C:\my tools\herd-agent.exe", "service", "pin", "--window"],
                            r"C:\Python\python.exe", frozen=False) == \
        (r"C:\Python\python.exe", '"C:\\my tools\\herd-agent.exe" service pin --window')


def _agent(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "agent.main", *args], capture_output=True,
                          text=True, timeout=60, env=env)


def test_without_a_display_the_pin_goes_to_the_terminal_with_a_note(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    out = _agent("--state-dir", str(tmp_path), "pin", "--window", env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().replace(" ", "") == PinFile(tmp_path).current()
    note = [ln for ln in out.stderr.splitlines() if "no window" in ln]
    assert len(note) == 1 and "DISPLAY" in note[0] and "shown here instead" in note[0]


# --- the real window on a real X server -----------------------------------------------------

def test_window_shows_the_pin_counts_down_and_renews_it(tmp_path, tk_root):
    clock = FakeClock()
    pins = PinFile(tmp_path, clock=clock)
    first = pins.show()
    window = PinWindow(tk_root, pins, tick_ms=20)
    try:
        pump_until(tk_root, lambda: window.pin_label.winfo_ismapped())
        assert window.pin_label.cget("text") == format_pin(first)
        assert window.countdown_label.cget("text") == "5:00"
        assert "Pair" in window.where_label.cget("text")
        assert window.copy_button.winfo_ismapped() and not window.new_button.winfo_ismapped()

        # the person copies the PIN: the digits land on the clipboard
        window.copy_button.invoke()
        assert tk_root.clipboard_get() == first

        # time passes: the countdown moves on its own (the window's timer reads the clock)
        clock.now += 61
        pump_until(tk_root, lambda: window.countdown_label.cget("text") == "3:59")
        assert window.pin_label.cget("text") == format_pin(first)

        # the PIN expires: the window says so and offers a new one in place of Copy
        clock.now += PIN_TTL
        pump_until(tk_root, lambda: window.new_button.winfo_ismapped())
        assert "no longer accepted" in window.status_label.cget("text")
        assert first not in window.pin_label.cget("text").replace(" ", "")
        assert not window.copy_button.winfo_ismapped()

        # New PIN: a fresh PIN, accepted for the full time, and it is the one the agent checks
        window.new_button.invoke()
        pump_until(tk_root, lambda: window.copy_button.winfo_ismapped())
        fresh = pins.current()
        assert fresh is not None
        assert window.pin_label.cget("text") == format_pin(fresh)
        assert window.countdown_label.cget("text") == "5:00"
        assert not window.new_button.winfo_ismapped()
    finally:
        window.stop()


def test_the_command_opens_the_window_with_the_agents_pin(tmp_path, x_display, tk_root):
    """`herd-agent pin --window` (what the menu item runs) opens a window showing the PIN the
    agent accepts; closing it ends the command. The test reads the other program's window over
    the X server with Tk's `send`, as it would read any Tk application."""
    env = dict(os.environ, DISPLAY=x_display)
    env.pop("WAYLAND_DISPLAY", None)
    proc = subprocess.Popen([sys.executable, "-m", "agent.main", "--state-dir", str(tmp_path),
                             "pin", "--window"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        tk_root.withdraw()
        assert tk_app_shown(tk_root, "herd-agent-pin", ".body.pin", proc), proc.communicate()
        text = tk_root.tk.call("send", "herd-agent-pin", ".body.pin cget -text")
        assert text.replace(" ", "") == PinFile(tmp_path).current()
        # the person presses Close (after the reply, so the send itself gets its answer)
        tk_root.tk.call("send", "herd-agent-pin", "after idle {.body.buttons.close invoke}")
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        assert out == ""  # the PIN was in the window, not in the terminal
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
