"""The memory lesson: a model's shape, its KV cache, and whether a pair fits on one GPU."""
