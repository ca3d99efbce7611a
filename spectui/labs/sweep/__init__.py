"""The concurrency lesson: the sweep over levels and the speed-up it predicts at each."""
