"""Phrasings of the kinds ``locate``, ``count`` and ``needle`` (p1-p3 dev, p4-p6 test)."""

from __future__ import annotations

import random
import re
from collections import Counter

from . import sources
from .base import (
    Draft,
    Skip,
    file_answer,
    name_answer,
    need,
    number,
    phrasing,
    pick,
    quote_line,
)
from .contexts import (
    WORDS,
    big,
    module_pick,
    needle_line,
    pkg_pick,
    record_dicts,
    records,
    word_stats,
)
from .pyfacts import enclosing_function, facts, plain_lines, public
from .sources import concat, depends_names

# ---------------------------------------------------------------- locate


@phrasing("locate/p1", "dev")
def locate_function_file(split: str, rng: random.Random, i: int) -> Draft:
    """Which file of a stdlib package (dict) defines the top-level function X?  X is public,
    defined at top level in exactly one file, and ``def X`` occurs once in the package."""
    idx = pkg_pick(split, rng)
    owners = idx.owners()
    name = pick(rng, sorted(n for n, ps in owners.items() if len(ps) == 1 and public(n)
                            and idx.def_counts[n] == 1))
    q = (f"`context` maps file paths to the source code of the Python package `{idx.name}`. "
         f"Which file defines the function `{name}`? Answer with the file name only.")
    return file_answer(f"stdlib:{idx.name}", q, dict(idx.files), owners[name][0], idx.files)


# Lines naming a licence would give the answer away.
_NAMES_LICENCE = re.compile(r"(?i)\bversion\s+\d|\bv\d|\bgnu\b|gpl|mozilla|apache|artistic|"
                            r"creative\s+commons|cc0|documentation\s+license|public\s+license")


def _unique_text_line(text: str, whole: str, rng: random.Random, low: int = 30,
                      high: int = 90, avoid: re.Pattern[str] | None = None) -> tuple[int, str]:
    """A (1-based number, stripped line) of ``text`` that occurs once in ``whole``."""
    cands = [(n + 1, s) for n, raw in enumerate(text.split("\n"))
             if low <= len(s := raw.strip()) <= high and len(WORDS.findall(s)) >= 2
             and (avoid is None or not avoid.search(s))]
    lineno, line = pick(rng, cands)
    if whole.count(line) != 1:
        raise Skip("line not unique")
    return lineno, line


@phrasing("locate/p2", "dev")
def locate_licence_line(split: str, rng: random.Random, i: int) -> Draft:
    """Which licence (str, ``=== LICENSE FILE: NAME`` headers) contains a given line?  The
    line occurs exactly once in the whole context and does not name a licence."""
    docs = need(sources.licenses(split))
    text = concat(docs, "licence")
    name = pick(rng, sorted(docs))
    _, line = _unique_text_line(docs[name], text, rng, avoid=_NAMES_LICENCE)
    q = ("`context` holds several licence texts one after another, each introduced by a line "
         f"`=== LICENSE FILE: NAME`. Which licence contains the line{quote_line(line)}"
         "Reply with the licence's name as written in its header.")
    return file_answer("licenses", q, text, name, docs)


@phrasing("locate/p3", "dev")
def locate_class_line(split: str, rng: random.Random, i: int) -> Draft:
    """On which line of one stdlib module (str) is the ``class C`` statement?  C is not
    decorated and ``class C`` occurs once in the file."""
    name, text = module_pick(split, rng, plain=True)
    cls = pick(rng, [c for c in facts(text).classes if public(c.name) and not c.decorated
                     and len(re.findall(rf"\bclass\s+{c.name}\b", text)) == 1])
    q = (f"Here is one Python source file, `{name}`, as a single string. On which line "
         f"(counting from 1) is the class `{cls.name}` defined? Give just the line number.")
    return number(f"stdlib:{name[:-3]}", q, text, cls.lineno, form="line number")


@phrasing("locate/p4", "test")
def locate_class_path(split: str, rng: random.Random, i: int) -> Draft:
    """Which file of a stdlib package (str, ``### FILE:`` headers) declares class C?
    ``class C`` occurs once in the package."""
    idx = pkg_pick(split, rng)
    cands = sorted((c.name, p) for p, f in idx.facts.items() for c in f.classes
                   if public(c.name) and idx.class_counts[c.name] == 1)
    cls, path = pick(rng, cands)
    q = (f"The source files of the package `{idx.name}` are concatenated in `context`; each "
         "one begins with a `### FILE: <path>` line. A class called "
         f"`{cls}` is declared in one of them. Give the path of that file.")
    return file_answer(f"stdlib:{idx.name}", q, concat(idx.files, "hash"), path, idx.files,
                       form="path")


@phrasing("locate/p5", "test")
def locate_description(split: str, rng: random.Random, i: int) -> Draft:
    """Which dpkg package (list of record strings) has a given line in its long
    description?  The line occurs once in all the records."""
    recs = records(split)
    whole = "\n\n".join(r.raw for r in recs)
    rec = pick(rng, [r for r in recs if "\n" in r.fields.get("Description", "")])
    body = rec.fields["Description"].split("\n", 1)[1]
    _, line = _unique_text_line(body, whole, rng)
    q = ("`context` is a list of package records from a Debian system, one string per "
         "installed package. Which package's description contains this sentence?"
         + quote_line(line))
    return name_answer("dpkg-status", q.rstrip(), [r.raw for r in recs], rec.name)


@phrasing("locate/p6", "test")
def locate_licence_lineno(split: str, rng: random.Random, i: int) -> Draft:
    """The 1-based number of a line (occurring once) in one licence given as a list of lines."""
    docs = need(sources.licenses(split))
    name = pick(rng, sorted(n for n, t in docs.items() if plain_lines(t)))
    lineno, line = _unique_text_line(docs[name], docs[name], rng, 25, 90)
    q = (f"`context` is the licence text {name} split into a list of lines. What is the "
         "1-based line number of the line that reads as follows (ignoring surrounding "
         f"spaces)?{quote_line(line)}Respond with a number.")
    return number("licenses", q, docs[name].split("\n"), lineno, form="line number")


# ---------------------------------------------------------------- count


@phrasing("count/p1", "dev")
def count_top_functions(split: str, rng: random.Random, i: int) -> Draft:
    """How many top-level functions does file F of a package (dict) define?  Counted with
    ``ast`` over the module body; F has no conditionally defined functions or classes."""
    idx = pkg_pick(split, rng)
    path = pick(rng, [p for p, f in idx.facts.items() if f.plain_top
                      and 2 <= len(f.top_funcs) <= 60])
    q = (f"How many functions are defined at the top level of `{path}` (not inside a class or "
         "another function; `async def` counts too)? Reply with a number.")
    return number(f"stdlib:{idx.name}", q, dict(idx.files), len(idx.facts[path].top_funcs))


@phrasing("count/p2", "dev")
def count_section(split: str, rng: random.Random, i: int) -> Draft:
    """How many dpkg records (raw status text) have ``Section: S``?"""
    recs = records(split)
    sections = Counter(r.fields.get("Section", "") for r in recs)
    sec = pick(rng, sorted(s for s, n in sections.items() if s and n >= 2))
    q = (f"`context` is the text of a dpkg status file. How many packages in it have "
         f"`Section: {sec}`? Answer with the number only.")
    return number("dpkg-status", q, sources.dpkg_text(split), sections[sec])


def _signed_by(entries: tuple[sources.Entry, ...], signer: str) -> int:
    """Entries signed off by ``signer``; Skip if a substring search would count differently."""
    exact = sum(e.signer == signer for e in entries)
    loose = sum(signer in e.text.rsplit("\n", 1)[-1] for e in entries)
    if exact != loose:
        raise Skip("signer name ambiguous")
    return exact


@phrasing("count/p3", "dev")
def count_signed(split: str, rng: random.Random, i: int) -> Draft:
    """How many entries of one changelog (list of entry strings) did person P sign off?"""
    logs = need(sources.changelogs(split))
    log = logs[pick(rng, sorted(f for f, c in logs.items() if 4 <= len(c.entries) <= 300))]
    signer = pick(rng, sorted({e.signer for e in log.entries}))
    q = (f"`context` is a list of the entries of the Debian changelog of `{log.folder}`, newest "
         f"first. In how many entries is the sign-off line (` -- Name <email>  date`) by {signer}?")
    return number("debian-changelogs", q, [e.text for e in log.entries],
                  _signed_by(log.entries, signer))


@phrasing("count/p4", "test")
def count_classes(split: str, rng: random.Random, i: int) -> Draft:
    """How many ``class`` statements (any nesting level) does file F of a package (dict) have?"""
    idx = pkg_pick(split, rng)
    path = pick(rng, [p for p, f in idx.facts.items() if 2 <= len(f.classes) <= 80])
    q = (f"In the file `{path}`, how many `class` statements are there, counting nested "
         "classes as well? A number, please.")
    return number(f"stdlib:{idx.name}", q, dict(idx.files), len(idx.facts[path].classes))


@phrasing("count/p5", "test")
def count_word_lines(split: str, rng: random.Random, i: int) -> Draft:
    """On how many lines of licence D (dict of licences) does word W occur (whole word,
    any case)?  Between 2 and 40 lines."""
    docs = need(sources.licenses(split))
    name = pick(rng, sorted(docs))
    lines = word_stats(docs[name])[1]
    word = pick(rng, sorted(w for w, n in lines.items() if 2 <= n <= 40))
    q = (f"Take the document `{name}` in `context`. On how many of its lines does the word "
         f"\"{word}\" occur as a whole word, in any letter case?")
    return number("licenses", q, dict(docs), lines[word])


@phrasing("count/p6", "test")
def count_dependents(split: str, rng: random.Random, i: int) -> Draft:
    """How many dpkg packages (list of field dicts) name X in their Depends field?"""
    recs = records(split)
    deps = Counter(d for r in recs for d in depends_names(r.fields.get("Depends", "")))
    dep = pick(rng, sorted(d for d, n in deps.items() if n >= 2))
    q = ("Each item of `context` is one installed Debian package as a dict of its control "
         f"fields. How many packages name `{dep}` in their `Depends` field (an alternative "
         "after `|` counts; version constraints and `:any` qualifiers do not matter)? Give "
         "the count as an integer.")
    return number("dpkg-status", q, record_dicts(recs), deps[dep])


# ---------------------------------------------------------------- needle


@phrasing("needle/p1", "dev")
def needle_file(split: str, rng: random.Random, i: int) -> Draft:
    """Which file holds a line (occurring once) deep inside all the split's stdlib files
    concatenated (str, several MB, ``### FILE:`` headers)?"""
    b = big(split, "hash")
    path, _, line = needle_line(b, rng)
    q = ("`context` is a few megabytes of Python source: many files concatenated, each "
         f"starting with `### FILE: <path>`. Exactly one line reads{quote_line(line)}"
         "Which file is it in? Answer with the file name only.")
    return file_answer("stdlib:all", q, b.text, path, b.files)


@phrasing("needle/p2", "dev")
def needle_constant(split: str, rng: random.Random, i: int) -> Draft:
    """What integer is assigned to the module-level constant NAME, deep inside the split's
    stdlib files (str)?  ``NAME =`` occurs once in the whole text; the value is >= 8."""
    b = big(split, "hash")
    n = len(b.text)
    cands = sorted((name, value) for p, t in b.files.items()
                   if 0.25 * n <= b.offset[p] <= 0.9 * n
                   for name, value, _ in facts(t).constants
                   if name.isupper() and len(name) > 4 and value >= 8)
    name, value = pick(rng, cands)
    if len(re.findall(rf"\b{name}\s*=(?!=)", b.text)) != 1:
        raise Skip("assigned more than once")
    q = (f"Somewhere in this large text of Python modules, a module-level constant `{name}` is "
         "assigned an integer. What is its value?")
    return number("stdlib:all", q, b.text, value)


@phrasing("needle/p3", "dev")
def needle_lineno(split: str, rng: random.Random, i: int) -> Draft:
    """On which line of its file (dict of all the split's stdlib files) is a given line?"""
    b = big(split, "hash")
    path, lineno, line = needle_line(b, rng)
    q = ("One of the files in `context` (a dict from path to Python source) contains the line"
         f"{quote_line(line)}Which line number of that file is it on (the first line is 1)?")
    return number("stdlib:all", q, dict(b.files), lineno, form="line number")


@phrasing("needle/p4", "test")
def needle_comment(split: str, rng: random.Random, i: int) -> Draft:
    """Which file holds a comment line (occurring once) deep inside the split's stdlib files
    concatenated (str, ``--- path ---`` headers)?  Answer: the path."""
    b = big(split, "dashes")
    path, _, line = needle_line(b, rng, lambda p, n, s: s.startswith("# "))
    q = ("In this concatenation of source files (each preceded by a `--- path ---` line) the "
         f"following comment appears once:{quote_line(line)}Give the path of the file it is in.")
    return file_answer("stdlib:all", q, b.text, path, b.files, form="path")


@phrasing("needle/p5", "test")
def needle_index(split: str, rng: random.Random, i: int) -> Draft:
    """At which 0-based index of a list of all lines of the split's stdlib files
    (``=== path ===`` headers) is a given line?"""
    b = big(split, "equals")
    path, lineno, line = needle_line(b, rng)
    index = b.line[path] + lineno - 1
    lines = b.text.split("\n")
    assert lines[index].strip() == line
    q = (f"`context` is a list of {len(lines):,} lines of Python code. At which position in the "
         f"list is the line below? Indexes start at 0.{quote_line(line)}")
    return number("stdlib:all", q.rstrip(), lines, index, form="index")


@phrasing("needle/p6", "test")
def needle_function(split: str, rng: random.Random, i: int) -> Draft:
    """Which function contains a line (occurring once) deep inside the split's stdlib files
    concatenated (str)?  The innermost enclosing ``def``, found with ``ast``."""
    b = big(split, "dashes")

    def inside(path: str, lineno: int, line: str) -> bool:
        func = enclosing_function(b.files[path], lineno)
        return (func is not None and public(func.name) and func.name not in line
                and not line.startswith(("def ", "async def ", "@")))

    path, lineno, line = needle_line(b, rng, inside)
    func = enclosing_function(b.files[path], lineno)
    assert func is not None
    q = (f"Which function's body contains the line{quote_line(line)}"
         "(It is somewhere in `context`, a long string of Python files.) What is the "
         "function's name?")
    return name_answer("stdlib:all", q, b.text, func.name)
