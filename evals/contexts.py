"""Choosing pieces of a split's sources and shaping them into ``context`` values."""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

from . import sources
from .base import Skip, need, pick
from .pyfacts import PkgIndex, pkg_index, plain_lines
from .sources import Changelog, PkgRecord

__all__ = ["pkg_pick", "module_pick", "records", "record_dicts", "log_sample", "log_texts",
           "Big", "big", "needle_line", "WORDS", "word_stats"]

# Whole words of 5+ letters: ``w.lower() in set(WORDS.findall(text.lower()))`` iff
# ``re.search(rf"\b{w}\b", text, re.IGNORECASE)``.
WORDS = re.compile(r"\b[A-Za-z]{5,}\b")


@cache
def word_stats(text: str) -> tuple[Counter[str], Counter[str]]:
    """Lower-cased whole words of ``text``: (occurrences, number of lines containing each)."""
    occurrences: Counter[str] = Counter()
    lines: Counter[str] = Counter()
    for line in text.lower().split("\n"):
        words = WORDS.findall(line)
        occurrences.update(words)
        lines.update(set(words))
    return occurrences, lines


def pkg_pick(split: str, rng: random.Random, min_files: int = 2,
             ok: Callable[[PkgIndex], bool] | None = None) -> PkgIndex:
    """A random stdlib package of the split with at least ``min_files`` files."""
    names = need(sorted(sources.stdlib_packages(split)))
    idx = pkg_index(pick(rng, names))
    if len(idx.files) < min_files or (ok is not None and not ok(idx)):
        raise Skip("package does not fit")
    return idx


def module_pick(split: str, rng: random.Random, min_size: int = 8_000,
                max_size: int = 250_000, plain: bool = False) -> tuple[str, str]:
    """A random top-level stdlib module of the split: ``(file name, source)``."""
    mods = need(sources.stdlib_modules(split))
    name = pick(rng, [n for n, t in mods.items() if min_size <= len(t) <= max_size
                      and (plain_lines(t) or not plain)])
    return name, mods[name]


def records(split: str) -> tuple[PkgRecord, ...]:
    """The split's dpkg records (:class:`Unavailable` if there is no dpkg database)."""
    return need(sources.dpkg_records(split))


def record_dicts(recs: tuple[PkgRecord, ...]) -> list[dict[str, str]]:
    """Records as a list of ``{field: value}`` dicts (fresh copies)."""
    return [dict(r.fields) for r in recs]


def log_sample(split: str, rng: random.Random, low: int = 12, high: int = 30,
               max_chars: int = 150_000) -> dict[str, Changelog]:
    """A random sample of the split's changelogs (sorted by folder name)."""
    logs = need(sources.changelogs(split))
    small = sorted(f for f, c in logs.items() if len(c.text) <= max_chars)
    if len(small) < low:
        raise Skip("too few changelogs")
    chosen = rng.sample(small, min(len(small), rng.randint(low, high)))
    return {f: logs[f] for f in sorted(chosen)}


def log_texts(sample: dict[str, Changelog]) -> dict[str, str]:
    """``{package folder: changelog text}``."""
    return {f: c.text for f, c in sample.items()}


@dataclass(frozen=True)
class Big:
    """All of a split's stdlib files in one string, and where each file's text starts."""

    files: dict[str, str]
    text: str
    offset: dict[str, int]  # character offset of the file's first line in ``text``
    line: dict[str, int]    # index of the file's first line in ``text.split("\\n")``


@cache
def big(split: str, style: str) -> Big:
    """The split's stdlib files joined with :func:`sources.concat` header ``style``."""
    files = need(sources.all_stdlib_files(split))
    text = sources.concat(files, style)
    offset, line = {}, {}
    pos = nline = 0
    head = sources.HEADERS[style]
    for name, body in files.items():
        pos += len(head.format(name)) + 1
        nline += 1
        offset[name], line[name] = pos, nline
        body = body.rstrip("\n") + "\n"
        pos += len(body) + 1
        nline += body.count("\n") + 1
    return Big(files, text, offset, line)


def needle_line(b: Big, rng: random.Random, ok: Callable[[str, int, str], bool] | None = None,
                ) -> tuple[str, int, str]:
    """A line deep inside ``b`` (its file starts 25-90 % of the way in) that occurs once.

    Returns ``(path, 1-based line number in its file, the stripped line)``.
    """
    n = len(b.text)
    deep = [p for p in b.files if 0.25 * n <= b.offset[p] <= 0.9 * n
            and plain_lines(b.files[p])]
    path = pick(rng, deep)
    lines = b.files[path].split("\n")
    # The line must not give its file away (e.g. a comment naming the module).
    giveaways = {part.removesuffix(".py").lower() for part in path.split("/")} - {"__init__"}
    cands = [(i + 1, s) for i, raw in enumerate(lines) if 30 <= len(s := raw.strip()) <= 100
             and len(WORDS.findall(s)) >= 2 and "`" not in s and ".py" not in s
             and not any(g in s.lower() for g in giveaways)
             and (ok is None or ok(path, i + 1, s))]
    lineno, line = pick(rng, cands)
    if b.text.count(line) != 1:
        raise Skip("line not unique")
    return path, lineno, line
