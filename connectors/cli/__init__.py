"""The ``streamfair`` command line."""

from connectors.cli.commands import main

__all__ = ["main"]
