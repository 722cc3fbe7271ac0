"""Entry script of the frozen ``herd-agent`` (PyInstaller needs a file, not an entry point)."""

import multiprocessing
import sys

from agent.main import main

if __name__ == "__main__":
    multiprocessing.freeze_support()
    sys.exit(main())
