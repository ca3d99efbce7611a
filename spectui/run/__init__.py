"""The run session: prompts → verdict → triage → draft probe → session record, for every driver."""
