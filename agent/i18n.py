"""Translatable messages of the Qt-free core (doctor findings, launch failures, agent errors…).

The core — ``agent/`` and ``gui/cluster/`` — must not import Qt, yet the sentences it writes
reach the desktop app's user, who may read Chinese. So the core writes each such sentence as

    translate("Doctor", "The agent at {url} does not answer ({why}).").format(url=…, why=…)

* ``translate(context, template)`` returns the template in the user's language; by default (the
  CLI, the agent, the tests of the core) it returns it unchanged, so ``herd doctor`` and
  ``herd up`` speak English.
* The desktop app calls :func:`set_translator` with a function backed by Qt's translation
  catalogue (``gui/translations.py`` installs ``QCoreApplication.translate``), so the same call
  returns the Chinese template there. The core never learns Qt exists.
* Placeholders are named ``{…}`` fields filled *after* translating, so a translation may put them
  in another order. Their values stay as they are (addresses, numbers, llama.cpp's own output).
* ``pyside6-lupdate`` extracts every literal ``translate("Context", "…")`` call (implicitly joined
  string literals included) into ``resources/translations/herd_zh_CN.ts`` with the app's own
  strings. Templates kept in tables are marked with :func:`QT_TRANSLATE_NOOP`, which lupdate also
  knows, and passed through :func:`translate` where they are used.

Messages are translated when they are made (a finding, an exception), in whatever thread makes
them; ``QCoreApplication.translate`` may be called from any thread.
"""

from __future__ import annotations

from collections.abc import Callable

_translator: Callable[[str, str], str] | None = None


def set_translator(fn: Callable[[str, str], str] | None) -> None:
    """Use ``fn(context, template) → template in the user's language`` from now on (None: English)."""
    global _translator
    _translator = fn


def translate(context: str, template: str) -> str:
    """``template`` in the user's language (unchanged when no translator is set or it has none)."""
    fn = _translator
    if fn is None:
        return template
    try:
        text = fn(context, template)
    except Exception:  # a broken catalogue must not hide the message itself
        return template
    return text or template


def QT_TRANSLATE_NOOP(context: str, template: str) -> str:  # noqa: N802 - the name lupdate knows
    """Mark ``template`` for extraction without translating it yet (for tables of templates)."""
    return template
