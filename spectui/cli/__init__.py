"""The command line: `spectui` opens the TUI; subcommands run headless. Nothing imports this package."""

from spectui.cli.main import main

__all__ = ["main"]
