"""spectui's engine: server backends, stream labelling, byte comparison, figures and probes.

Nothing in this package imports textual or rich; the headless CLI and the TUI both drive it.
"""
