"""The drafts lesson: what a trained draft costs, the data the target writes for it, and drafts trained here."""
