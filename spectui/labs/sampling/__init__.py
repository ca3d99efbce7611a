"""The sampling lesson: exact under sampling, seeded and by two-sample tests."""
