"""Deterministic shares of a prompt set, for `spectui prove --shard I/N` across machines, and the prompts
of the set that the sampled pass covers. Both depend only on the set's order, never on the machine or
the clock, so N shard runs together cover the set exactly once and agree on which prompts are sampled.
"""

from __future__ import annotations

from dataclasses import dataclass

from spectui.core.errors import InputError


@dataclass(frozen=True)
class Shard:
    """Shard `index` of `of` (1-based: 1/3, 2/3, 3/3)."""

    index: int
    of: int

    def text(self) -> str:
        return f"{self.index}/{self.of}"

    def to_json(self) -> dict:
        return {"index": self.index, "of": self.of}

    def takes(self, position: int) -> bool:
        """Whether the prompt at `position` (0-based, in set order) is this shard's: round robin, so every
        shard gets a mix of the set's categories (sets are usually written category by category)."""
        return position % self.of == self.index - 1


def parse_shard(text: str | None) -> Shard | None:
    """`--shard I/N` → Shard; a one-line error for anything else."""
    if text is None:
        return None
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise InputError(f"--shard takes I/N (e.g. 2/3), not {text!r}") from None
    if n < 1 or not 1 <= i <= n:
        raise InputError(f"--shard {text}: I must be between 1 and N (shards are numbered 1/N … N/N)")
    return Shard(i, n)


def sampled_positions(count: int, k: int) -> list[int]:
    """The positions (0-based) of the `k` prompts of a set of `count` that the sampled pass runs: spread
    evenly over the set (first, then every count/k-th), so they span its categories."""
    if k <= 0 or count <= 0:
        return []
    k = min(k, count)
    return sorted({(j * count) // k for j in range(k)})
