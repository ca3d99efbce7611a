"""The TUI's widgets: token view, side panes, banner, live panel, logs."""
