"""The Textual UI: app (composition and bindings), controller (the run), supervisor (servers), recording."""
