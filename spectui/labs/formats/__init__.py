"""The weight-formats lesson: which format of a model to serve, and whether speculation pays on it here."""
