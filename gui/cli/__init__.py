"""Headless ``herd`` commands. Each module here registers its own sub-commands."""
