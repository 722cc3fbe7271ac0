"""Keeping herd-agent's resident memory small (the target is ≤ 40 MB RSS at idle).

Almost all of the agent's memory is the code of the modules it imports (aiohttp, zeroconf,
asyncio); two costs on top of that are avoidable and handled here:

* aiohttp builds two client TLS contexts when it is imported, and each loads the system's CA
  certificates (~1.6 MB of OpenSSL heap). The agent serves plain HTTP and never opens a TLS
  connection, so :func:`without_ca_store` points OpenSSL at an empty CA store while aiohttp is
  first imported.
* glibc keeps memory that start-up and request bursts freed in its heap; :func:`release_free_heap`
  hands it back to the OS (``malloc_trim``), about 0.7 MB after start-up.

Both are no-ops where they do not apply (other C libraries, Windows, macOS).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
from collections.abc import Iterator

#: OpenSSL's environment overrides of the default CA file and folder.
_CA_ENV = ("SSL_CERT_FILE", "SSL_CERT_DIR")


@contextlib.contextmanager
def without_ca_store() -> Iterator[None]:
    """Within the block, OpenSSL's default CA store is empty (restored on exit).

    Only for imports that create TLS contexts the process will never use, such as aiohttp's
    client defaults in a process that only serves plain HTTP. A context made in the block cannot
    verify any server. Windows and macOS take their CA certificates from the system store rather
    than from these variables, so there it changes nothing.
    """
    saved = {k: os.environ.get(k) for k in _CA_ENV}
    for k in _CA_ENV:
        os.environ[k] = os.devnull
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _glibc_malloc_trim():
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None).malloc_trim  # the process's own C library; musl has none
    except (OSError, AttributeError):
        return None


_malloc_trim = _glibc_malloc_trim()


def release_free_heap() -> bool:
    """Return the C heap's free memory to the OS; False where the C library cannot."""
    if _malloc_trim is None:
        return False
    _malloc_trim(0)
    return True
