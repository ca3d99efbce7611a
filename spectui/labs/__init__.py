"""The labs: prefix caching, the concurrency sweep, the theory of speculation, KV cache sizes."""
