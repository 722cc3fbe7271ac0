"""How the master shows a node's key and takes a node's PIN, for the views (#33).

The widgets reach the agent only through the core: these are the agent's own definitions
(the PIN's length and how a typed PIN is read, a key fingerprint's display form), handed on
from here so that a PIN typed in the app is read exactly as the agent reads it.
"""

from __future__ import annotations

from agent.identity import display_fingerprint
from agent.pairing import normalise_pin
from agent.protocol import PIN_DIGITS

__all__ = ["PIN_DIGITS", "display_fingerprint", "normalise_pin"]
