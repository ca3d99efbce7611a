"""The TUI's screens: diff, labs, profiles, sessions, theory."""
