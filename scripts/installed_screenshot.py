"""Screenshot of the app as installed, in a real X window (#37: the Chinese window of an
installed app once came up without any text).

The app is started from a venv it was installed into (``pip install .``, not editable) by the
venv's path, with a desktop launcher's ``PATH`` (no venv, no Qt tools), on a private Xvfb screen
of a laptop's size; the whole screen is grabbed once the window has drawn.

    python -m venv /tmp/herd-venv && /tmp/herd-venv/bin/pip install .
    python scripts/installed_screenshot.py --venv /tmp/herd-venv [--lang zh_CN] [--out FILE]

Chinese text needs a CJK font (e.g. Debian's fonts-wqy-microhei).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCREEN = (1366, 768)
#: What a desktop launcher gives a program: system folders only.
DESKTOP_PATH = os.pathsep.join(["/usr/local/bin", "/usr/bin", "/bin"])

# Run by the venv's Python on the Xvfb screen: grab the screen until two grabs in a row are the
# same (the window has finished drawing), then save it.
GRAB = """
import sys, time
from PySide6.QtGui import QGuiApplication
app = QGuiApplication(sys.argv[:1])
screen = app.primaryScreen()
last = None
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    app.processEvents()
    image = screen.grabWindow(0).toImage()
    if last is not None and image == last:
        sys.exit(0 if image.save(sys.argv[1]) else 1)
    last = image
    time.sleep(1)
sys.exit("the screen did not settle within 60 s")
"""


def start_xvfb() -> tuple[subprocess.Popen, str]:
    """A private Xvfb of :data:`SCREEN`'s size; returns it and its display name once it is ready."""
    read_fd, write_fd = os.pipe()
    xvfb = subprocess.Popen(["Xvfb", "-displayfd", str(write_fd), "-nolisten", "tcp",
                             "-screen", "0", f"{SCREEN[0]}x{SCREEN[1]}x24"],
                            pass_fds=(write_fd,), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(write_fd)
    with os.fdopen(read_fd) as numbers:
        number = numbers.readline().strip()  # written once the server accepts clients
    if not number.isdigit():
        xvfb.kill()
        raise SystemExit("Xvfb did not start (apt-get install xvfb)")
    return xvfb, f":{number}"


def window_shown(env: dict, title: str) -> bool:
    """Whether a window called ``title`` is on the screen (by ``xwininfo``)."""
    r = subprocess.run(["xwininfo", "-root", "-tree"], capture_output=True, text=True, env=env)
    return f'"{title}"' in r.stdout


def screenshot(venv: Path, lang: str, out: Path) -> None:
    """Open the installed app in ``lang`` on a fresh screen and save the screen to ``out``."""
    herd = venv / "bin" / "herd"
    if not herd.is_file():
        raise SystemExit(f"{herd} not found: install llama-herd into {venv} first (pip install .)")
    xvfb, display = start_xvfb()
    app = None
    try:
        with tempfile.TemporaryDirectory() as tmp:
            env = {"HOME": os.environ.get("HOME", tmp), "DISPLAY": display, "QT_QPA_PLATFORM": "xcb",
                   "PATH": DESKTOP_PATH, "LANG": "C.UTF-8", "HERD_CONFIG_DIR": f"{tmp}/config"}
            for var in ("XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME"):
                env[var] = f"{tmp}/{var.lower()}"
            app = subprocess.Popen([str(herd), "--lang", lang, "--mdns-interfaces", "127.0.0.1",
                                    "--quit-after", "120"], env=env)
            deadline = time.monotonic() + 60
            while not window_shown(env, "llama-herd"):
                if app.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("the app's window did not come up")
                time.sleep(0.2)
            out.parent.mkdir(parents=True, exist_ok=True)
            tmp_png = out.with_name(out.name + ".tmp.png")
            subprocess.run([str(venv / "bin" / "python"), "-c", GRAB, str(tmp_png)], env=env, check=True)
            tmp_png.replace(out)  # a failed grab leaves the old picture in place
    finally:
        if app is not None and app.poll() is None:
            app.terminate()  # the app closes its window cleanly on SIGTERM
            app.wait(timeout=30)
        xvfb.terminate()
        xvfb.wait(timeout=10)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--venv", type=Path, required=True, help="a venv llama-herd is installed in")
    parser.add_argument("--lang", default="zh_CN", choices=["en", "zh_CN"])
    parser.add_argument("--out", type=Path, help="default: docs/screenshots/LANG-installed-window.png")
    args = parser.parse_args()
    out = args.out or ROOT / "docs" / "screenshots" / f"{args.lang}-installed-window.png"
    screenshot(args.venv, args.lang, out)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
