"""The wheel's build step: compile the translations (``.ts`` → ``.qm``) into the package.

Everything else is declared in ``pyproject.toml``. The installed app then needs no tool to show
Chinese, however it is started (#37); PySide6-Essentials, which ships ``lrelease``, is a build
requirement for that reason.
"""

from __future__ import annotations

import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from gui import qm_compiler  # noqa: E402  (Qt-free: the build needs no display)


class BuildPyWithTranslations(build_py):
    """``build_py`` that also puts a stamped ``.qm`` beside each ``.ts`` it copies."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return  # a source checkout compiles on first run, into the user's cache
        source = HERE / "resources" / "translations"
        target = Path(self.build_lib) / "resources" / "translations"
        tool = qm_compiler.lrelease_tool()
        if tool is None:
            raise SystemExit("cannot build llama-herd: Qt's lrelease was not found; install "
                             "PySide6-Essentials in the build environment (pyproject.toml lists it)")
        wanted = sorted(source.glob("*.ts"))
        built = qm_compiler.compile_folder(source, target, tool)
        if len(built) != len(wanted):
            raise SystemExit(f"cannot build llama-herd: lrelease compiled {len(built)} of "
                             f"{len(wanted)} translation files (see the warnings above)")


setup(cmdclass={"build_py": BuildPyWithTranslations})
