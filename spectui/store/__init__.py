"""What spectui keeps: locations, settings, sessions, the notebook, themes, prompt sets and profiles."""
