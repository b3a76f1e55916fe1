"""A generalisation eval for Recursive Language Models (not shipped in the wheel).

Questions of many kinds and phrasings about real documents on this machine (the
interpreter's standard library, Debian's licence texts, the dpkg database and Debian
changelogs), every expected answer computed by code, in a fixed dev/test split with
disjoint sources and disjoint phrasings.  ``python -m evals`` prints a summary.
"""

from __future__ import annotations

from .tasks import KINDS, SEED, Task, load_split

__all__ = ["Task", "load_split", "KINDS", "SEED"]
