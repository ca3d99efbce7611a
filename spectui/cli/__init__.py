"""The command line: `spectui` opens the TUI; subcommands run headless. Nothing imports this package."""

try:
    from spectui.cli.main import main
except KeyboardInterrupt:  # Ctrl+C while the `spectui` script loads the command line: exit 130, no traceback
    raise SystemExit(130) from None

__all__ = ["main"]
