"""The certificate built on the run session: prove, derive, verify, regress, merge and render."""
