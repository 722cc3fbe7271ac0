"""llama-herd's master side: the desktop app (``gui.app``, ``gui.widgets``), its Qt-free core
(``gui.cluster``) and the headless commands (``gui.cli``)."""

__version__ = "0.1.0"
