"""Why Qt would not open a window on a Linux desktop, in words, before Qt tries.

PySide6's wheels carry Qt but not the X11 libraries its ``xcb`` platform plugin links against.
On a plain desktop some are often missing (``libxcb-icccm4``, ``libxcb-keysyms1`` …); Qt then
aborts with a message that names only ``xcb-cursor0``, installed or not. Here ``ldd`` on the
plugin lists what is not found, with the Debian/Ubuntu package of each one we know, so herd
can say what to install. Runs before any QApplication exists: no Qt module is imported.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

#: The Debian/Ubuntu package of the libraries Qt's xcb plugin (and Qt's GUI) need, by the
#: library's name without its version (``libxcb-icccm.so.4`` → ``libxcb-icccm``).
DEBIAN_PACKAGES = {
    "libxcb-icccm": "libxcb-icccm4",
    "libxcb-keysyms": "libxcb-keysyms1",
    "libxcb-cursor": "libxcb-cursor0",
    "libxcb-image": "libxcb-image0",
    "libxcb-render-util": "libxcb-render-util0",
    "libxcb-util": "libxcb-util1",
    "libxcb-xkb": "libxcb-xkb1",
    "libxcb-randr": "libxcb-randr0",
    "libxcb-shape": "libxcb-shape0",
    "libxcb-shm": "libxcb-shm0",
    "libxcb-sync": "libxcb-sync1",
    "libxcb-xfixes": "libxcb-xfixes0",
    "libxcb-render": "libxcb-render0",
    "libxcb-xinerama": "libxcb-xinerama0",
    "libxcb-xinput": "libxcb-xinput0",
    "libxcb-glx": "libxcb-glx0",
    "libxcb": "libxcb1",
    "libxkbcommon-x11": "libxkbcommon-x11-0",
    "libxkbcommon": "libxkbcommon0",
    "libX11-xcb": "libx11-xcb1",
    "libX11": "libx11-6",
    "libGL": "libgl1",
    "libEGL": "libegl1",
    "libOpenGL": "libopengl0",
    "libfontconfig": "libfontconfig1",
    "libfreetype": "libfreetype6",
    "libdbus-1": "libdbus-1-3",
    "libglib-2.0": "libglib2.0-0",
    "libgthread-2.0": "libglib2.0-0",
    "libSM": "libsm6",
    "libICE": "libice6",
}

_NOT_FOUND_RE = re.compile(r"^\s*(\S+)\s*=>\s*not found\s*$", re.MULTILINE)


def xcb_plugin() -> Path | None:
    """PySide6's X11 platform plugin (``…/PySide6/Qt/plugins/platforms/libqxcb.so``), if there."""
    try:
        import PySide6  # the package only: its Qt libraries are not loaded by this
    except ImportError:
        return None
    path = Path(PySide6.__file__).resolve().parent / "Qt" / "plugins" / "platforms" / "libqxcb.so"
    return path if path.is_file() else None


def missing_libraries(binary: Path) -> list[str]:
    """The libraries ``binary`` needs that the dynamic loader does not find (``ldd``), each once,
    in ``ldd``'s order; empty when all are there or ``ldd`` is not available."""
    ldd = shutil.which("ldd")
    if ldd is None:
        return []
    try:
        out = subprocess.run([ldd, str(binary)], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return list(dict.fromkeys(_NOT_FOUND_RE.findall(out)))


def debian_packages(libraries: list[str]) -> list[str]:
    """The Debian/Ubuntu packages that hold ``libraries``, as far as :data:`DEBIAN_PACKAGES`
    knows them (each once)."""
    out = []
    for lib in libraries:
        pkg = DEBIAN_PACKAGES.get(lib.split(".so", 1)[0])
        if pkg and pkg not in out:
            out.append(pkg)
    return out


def describe_missing(libraries: list[str]) -> str:
    """What to tell the person: the libraries missing, and the command that installs them."""
    packages = debian_packages(libraries)
    unknown = [lib for lib in libraries if lib.split(".so", 1)[0] not in DEBIAN_PACKAGES]
    lines = ["herd cannot open its window: Qt's X11 platform plugin (xcb) needs libraries this "
             "computer lacks:", "  " + " ".join(libraries)]
    if packages:
        lines += ["On Debian or Ubuntu, install them with:",
                  "  sudo apt install " + " ".join(packages)]
    if unknown:
        lines.append("Your distribution's package manager can tell which packages hold the others "
                     "(on Debian or Ubuntu: apt-file search " + unknown[0] + ").")
    lines.append("Then start herd again. The headless commands work without a window: herd --help.")
    return "\n".join(lines)


def uses_xcb(environ: os._Environ | dict = os.environ) -> bool:
    """Whether Qt will pick its X11 plugin here: on Linux, unless another platform is asked for
    (``QT_QPA_PLATFORM``) or the session is Wayland's."""
    if not sys.platform.startswith("linux"):
        return False
    asked = environ.get("QT_QPA_PLATFORM", "")
    if asked:
        return asked.split(":", 1)[0].split(";", 1)[0] == "xcb"
    return environ.get("XDG_SESSION_TYPE", "") != "wayland" or not environ.get("WAYLAND_DISPLAY")


def platform_problem(environ: os._Environ | dict = os.environ) -> str | None:
    """Words for the person when Qt's X11 plugin cannot load for want of libraries, else None."""
    if not uses_xcb(environ):
        return None
    plugin = xcb_plugin()
    missing = missing_libraries(plugin) if plugin is not None else []
    return describe_missing(missing) if missing else None
