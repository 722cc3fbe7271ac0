"""Entry script of the frozen ``herd`` desktop app (PyInstaller needs a file, not an entry point)."""

import multiprocessing
import sys

from gui.main import main

if __name__ == "__main__":
    multiprocessing.freeze_support()
    sys.exit(main())
