"""Synthetic-data sizes for the corpus programs.

Each program draws its inputs at a realistic size; CORPUS_SCALE (a float, default 1) shrinks every
size for a quick run (the CPU check of the programs runs them at a small fraction of their size).
"""

import os


def scaled(n, minimum=8):
    """n scaled by CORPUS_SCALE, at least `minimum` (and never more than n)."""
    try:
        scale = float(os.environ.get("CORPUS_SCALE", "1") or 1)
    except ValueError:
        scale = 1.0
    return max(min(n, minimum), min(n, int(n * scale)))
