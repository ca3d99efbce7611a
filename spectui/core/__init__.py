"""The core: errors, events, shared types, byte comparison, figures, the one run loop, reports. No I/O of its own."""
