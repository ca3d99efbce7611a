"""The Textual UI: app (composition and global keys), screens/compare (the comparison screen owns its run),
supervisor (servers), recording."""
