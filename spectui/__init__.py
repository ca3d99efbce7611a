"""spectui: is the candidate server faster than the baseline, by how much, and are the bytes the same?"""

__version__ = "0.1.0"
