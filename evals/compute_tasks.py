"""Phrasings of ``extreme``, ``arithmetic``, ``aggregate``, ``compare`` (p1-p3 dev, p4-p6 test)."""

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
    unique_best,
    yes_no,
)
from .contexts import (
    log_sample,
    log_texts,
    module_pick,
    pkg_pick,
    record_dicts,
    records,
    word_stats,
)
from .pyfacts import facts, public
from .sources import concat, depends_names


def _robust_best(strict: dict[str, int], loose: dict[str, int]) -> str:
    """The unique best under both ways of counting (else Skip)."""
    best = unique_best(strict)
    if unique_best(loose) != best:
        raise Skip("depends on how one counts")
    return best


def _nonblank(text: str) -> int:
    return sum(1 for line in text.split("\n") if line.strip())


def _shared_words(docs: dict[str, str]) -> dict[str, dict[str, int]]:
    """``{word: {document: occurrences}}`` for words (5+ letters) in at least two documents."""
    stats = {n: word_stats(t)[0] for n, t in docs.items()}
    words = Counter(w for occ in stats.values() for w in occ)
    return {w: {n: occ[w] for n, occ in stats.items()} for w in sorted(words) if words[w] >= 2}


def _far_pair(rng: random.Random, names: list[str]) -> tuple[str, str]:
    """Two names, one from the first third of ``names`` and one from the last third."""
    third = len(names) // 3
    if third < 1:
        raise Skip("too few")
    return pick(rng, names[:third]), pick(rng, names[-third:])


# ---------------------------------------------------------------- extreme


@phrasing("extreme/p1", "dev")
def most_functions_file(split: str, rng: random.Random, i: int) -> Draft:
    """Which file of a package (dict) has the most top-level functions?  Unique winner,
    whether or not functions defined inside module-level if/try blocks are counted."""
    idx = pkg_pick(split, rng, min_files=3)
    strict = {p: len(f.top_funcs) for p, f in idx.facts.items()}
    loose = {p: sum(fn.scope == "module" for fn in f.funcs) for p, f in idx.facts.items()}
    path = _robust_best(strict, loose)
    q = (f"`context` holds the package `{idx.name}` as a dict from file path to source. "
         "Which file has the most top-level functions? Answer with the file name only.")
    return file_answer(f"stdlib:{idx.name}", q, dict(idx.files), path, idx.files)


@phrasing("extreme/p2", "dev")
def largest_in_section(split: str, rng: random.Random, i: int) -> Draft:
    """Among dpkg records (raw text) of Section S, which has the largest Installed-Size?"""
    recs = records(split)
    sections = Counter(r.fields.get("Section", "") for r in recs)
    sec = pick(rng, sorted(s for s, n in sections.items() if s and n >= 3))
    sizes = {r.name: r.size() for r in recs if r.fields.get("Section") == sec}
    name = unique_best(sizes)
    q = (f"Among the packages in this dpkg status text whose Section is `{sec}`, which one has "
         "the largest Installed-Size? Give the package name.")
    return name_answer("dpkg-status", q, sources.dpkg_text(split), name, sorted(sizes))


@phrasing("extreme/p3", "dev")
def longest_function(split: str, rng: random.Random, i: int) -> Draft:
    """Which function or method of one module (str) spans the most lines (``def`` line to
    its last line)?  Unique winner whose name is defined once in the file."""
    name, text = module_pick(split, rng)
    funcs = facts(text).funcs
    defs = Counter(f.name for f in funcs)
    lengths = {f.name: f.length for f in funcs if defs[f.name] == 1}
    if len(lengths) < len(funcs) // 2:
        raise Skip("too many repeated names")
    best = unique_best(lengths)
    if max(f.length for f in funcs) != lengths[best]:
        raise Skip("a repeated name is as long")
    runner_up = sorted(lengths, key=lambda n: lengths[n])[-2]
    q = (f"`context` is the source of `{name}`. Which function or method in it spans the most "
         "lines, from its `def` line to its last line? Answer with the function's name.")
    return name_answer(f"stdlib:{name[:-3]}", q, text, best, [runner_up])


@phrasing("extreme/p4", "test")
def most_word_licence(split: str, rng: random.Random, i: int) -> Draft:
    """Which licence (list of {name, text} dicts) uses word W most often (whole word,
    any case)?  W occurs in at least two licences; unique winner."""
    docs = need(sources.licenses(split))
    shared = _shared_words(docs)
    word = pick(rng, [w for w, c in shared.items()
                      if sorted(c.values())[-1] > sorted(c.values())[-2]])
    best = unique_best(shared[word])
    q = ("`context` is a list of licence documents, each a dict with keys `name` and `text`. "
         f"Which document uses the word \"{word}\" most often (whole word, ignoring case)? "
         "Reply with its `name`.")
    return name_answer("licenses", q, [{"name": n, "text": t} for n, t in docs.items()],
                       best, docs)


@phrasing("extreme/p5", "test")
def most_entries(split: str, rng: random.Random, i: int) -> Draft:
    """Which changelog of a sample (dict) has the most entries?  Unique winner."""
    sample = log_sample(split, rng)
    counts = {f: len(c.entries) for f, c in sample.items()}
    best = unique_best(counts)
    runner_up = sorted(counts, key=lambda f: counts[f])[-2]
    q = ("`context` maps Debian package names to the text of their changelog.Debian files. "
         "Whose changelog has the most entries?")
    return name_answer("debian-changelogs", q, log_texts(sample), best, [runner_up])


@phrasing("extreme/p6", "test")
def most_methods_class(split: str, rng: random.Random, i: int) -> Draft:
    """Which class of a package (dict) defines the most methods directly in its body?
    Unique winner (also counting methods inside if/try blocks); ``class C`` occurs once."""
    idx = pkg_pick(split, rng)
    classes = [c for f in idx.facts.values() for c in f.classes]
    names = Counter(c.name for c in classes)
    strict = {c.name: len(c.methods) for c in classes if names[c.name] == 1}
    loose = {c.name: len(c.methods) + c.conditional_methods for c in classes
             if names[c.name] == 1}
    if len(strict) < len(classes) // 2 or max(strict.values(), default=0) < max(
            (len(c.methods) for c in classes), default=0):
        raise Skip("repeated class names")
    best = _robust_best(strict, loose)
    if idx.class_counts[best] != 1:
        raise Skip("class name not unique")
    q = (f"Which class in the package `{idx.name}` (`context` maps its file paths to their "
         "source) defines the largest number of methods directly in its body? Name the class.")
    runner_up = sorted(strict, key=lambda n: strict[n])[-2]
    return name_answer(f"stdlib:{idx.name}", q, dict(idx.files), best, [runner_up])


# ---------------------------------------------------------------- arithmetic


@phrasing("arithmetic/p1", "dev")
def add_function_counts(split: str, rng: random.Random, i: int) -> Draft:
    """Sum of the top-level function counts of two files far apart in a package (dict)."""
    idx = pkg_pick(split, rng, min_files=3)
    paths = [p for p, f in idx.facts.items() if f.plain_top and f.top_funcs]
    a, b = _far_pair(rng, paths)
    total = len(idx.facts[a].top_funcs) + len(idx.facts[b].top_funcs)
    q = (f"Add up the number of top-level functions in `{a}` and in `{b}` (functions nested in "
         "classes or other functions do not count). What is the total?")
    return number(f"stdlib:{idx.name}", q, dict(idx.files), total)


@phrasing("arithmetic/p2", "dev")
def add_sizes(split: str, rng: random.Random, i: int) -> Draft:
    """Sum of the Installed-Size of two dpkg records far apart in the raw status text."""
    recs = records(split)
    a, b = _far_pair(rng, [r.name for r in recs])
    by = {r.name: r for r in recs}
    q = (f"What do the Installed-Size values of the packages `{a}` and `{b}` add up to? "
         "Reply with a number.")
    return number("dpkg-status", q, sources.dpkg_text(split), by[a].size() + by[b].size())


@phrasing("arithmetic/p3", "dev")
def licence_line_difference(split: str, rng: random.Random, i: int) -> Draft:
    """How many more non-blank lines licence A has than licence B (str, ``=== NAME ===``)."""
    docs = need(sources.licenses(split))
    a, b = rng.sample(sorted(docs), 2)
    diff = _nonblank(docs[a]) - _nonblank(docs[b])
    if diff < 0:
        a, b, diff = b, a, -diff
    q = ("`context` contains several licence texts, each headed by a line `=== NAME ===`. How "
         f"many more non-blank lines does {a} have than {b}? Reply with the number only.")
    return number("licenses", q, concat(docs, "equals"), diff)


@phrasing("arithmetic/p4", "test")
def class_distance(split: str, rng: random.Random, i: int) -> Draft:
    """Difference of the line numbers of two ``class`` statements at least 200 lines apart
    in one module (str)."""
    name, text = module_pick(split, rng, plain=True)
    classes = [c for c in facts(text).classes if public(c.name)
               and len(re.findall(rf"\bclass\s+{c.name}\b", text)) == 1]
    a = pick(rng, classes)
    b = pick(rng, [c for c in classes if c.lineno - a.lineno >= 200])
    q = (f"In this Python file ({name}), how many lines further down is the `class {b.name}` "
         f"statement than the `class {a.name}` statement? Give the difference of their line "
         "numbers.")
    return number(f"stdlib:{name[:-3]}", q, text, b.lineno - a.lineno)


@phrasing("arithmetic/p5", "test")
def size_difference(split: str, rng: random.Random, i: int) -> Draft:
    """By how much the Installed-Size of X exceeds Y's (list of field dicts, far apart)."""
    recs = records(split)
    a, b = _far_pair(rng, [r.name for r in recs])
    by = {r.name: r.size() for r in recs}
    if by[a] < by[b]:
        a, b = b, a
    q = f"By how many KiB does the Installed-Size of `{a}` exceed that of `{b}`?"
    return number("dpkg-status", q, record_dicts(recs), by[a] - by[b])


@phrasing("arithmetic/p6", "test")
def add_entries(split: str, rng: random.Random, i: int) -> Draft:
    """Total number of entries of two changelogs far apart in a sample (dict)."""
    sample = log_sample(split, rng)
    a, b = _far_pair(rng, list(sample))
    total = len(sample[a].entries) + len(sample[b].entries)
    q = (f"Count the entries in the changelogs of `{a}` and of `{b}`. How many entries do the "
         "two have together? Respond with digits only.")
    return number("debian-changelogs", q, log_texts(sample), total)


# ---------------------------------------------------------------- aggregate


@phrasing("aggregate/p1", "dev")
def files_defining(split: str, rng: random.Random, i: int) -> Draft:
    """In how many files of a package (dict) is a function or method named X defined (any
    level)?  At least 2 files; a text search for ``def X`` finds the same files."""
    idx = pkg_pick(split, rng, min_files=3)
    owners = idx.owners(top_only=False)
    name = pick(rng, sorted(n for n, ps in owners.items() if len(ps) >= 2 and len(n) > 4
                            and not re.match(r"_[^_]", n)))
    textual = sum(bool(re.search(rf"\bdef\s+{name}\b", t)) for t in idx.files.values())
    if textual != len(owners[name]):
        raise Skip("text search disagrees")
    q = (f"In how many of the files in `context` is there a function or method named `{name}` "
         "(at any level)? Reply with a number.")
    return number(f"stdlib:{idx.name}", q, dict(idx.files), len(owners[name]))


@phrasing("aggregate/p2", "dev")
def licences_mentioning(split: str, rng: random.Random, i: int) -> Draft:
    """How many licences (dict) mention word W (whole word, any case)?  Not all, at least 2."""
    docs = need(sources.licenses(split))
    shared = _shared_words(docs)
    word = pick(rng, [w for w, c in shared.items() if min(c.values()) == 0])
    n = sum(c > 0 for c in shared[word].values())
    q = (f"How many of the licence texts in `context` mention the word \"{word}\" at least "
         "once (as a whole word, any case)?")
    return number("licenses", q, dict(docs), n)


@phrasing("aggregate/p3", "dev")
def section_total_size(split: str, rng: random.Random, i: int) -> Draft:
    """Total Installed-Size of the dpkg records (list of strings) in Section S (2-40 records)."""
    recs = records(split)
    sections = Counter(r.fields.get("Section", "") for r in recs)
    sec = pick(rng, sorted(s for s, n in sections.items() if s and 2 <= n <= 40))
    total = sum(r.size() for r in recs if r.fields.get("Section") == sec)
    q = (f"`context` is a list of dpkg status records. What is the total Installed-Size (KiB) "
         f"of all packages in section `{sec}`? Just the number.")
    return number("dpkg-status", q, [r.raw for r in recs], total)


@phrasing("aggregate/p4", "test")
def total_classes(split: str, rng: random.Random, i: int) -> Draft:
    """Total number of module-level classes across a package's files (str, ``==> path <==``);
    no file defines classes or functions inside module-level if/try blocks."""
    idx = pkg_pick(split, rng, ok=lambda x: all(f.plain_top for f in x.facts.values()))
    total = sum(len(f.top_classes) for f in idx.facts.values())
    q = (f"The files of the package `{idx.name}` are concatenated in `context`, each starting "
         "with a `==> path <==` line. Across all of them, how many classes are defined at "
         "module level (not nested in another class or in a function)?")
    return number(f"stdlib:{idx.name}", q, concat(idx.files, "arrows"), total)


@phrasing("aggregate/p5", "test")
def changelogs_signed(split: str, rng: random.Random, i: int) -> Draft:
    """In how many changelogs of a sample (dict) did person P sign off an entry?  At least 2;
    a text search of the sign-off lines gives the same number."""
    sample = log_sample(split, rng, 20, 40)
    signers = Counter(s for c in sample.values() for s in {e.signer for e in c.entries})
    who = pick(rng, sorted(s for s, n in signers.items() if n >= 2))
    loose = sum(any(who in e.text.rsplit("\n", 1)[-1] for e in c.entries)
                for c in sample.values())
    if loose != signers[who]:
        raise Skip("name ambiguous")
    q = (f"For how many of the packages in `context` (package name -> changelog text) was at "
         f"least one changelog entry signed off by {who}?")
    return number("debian-changelogs", q, log_texts(sample), signers[who])


@phrasing("aggregate/p6", "test")
def maintainer_total_size(split: str, rng: random.Random, i: int) -> Draft:
    """Total Installed-Size of the dpkg records (raw text) maintained by M (2+ packages,
    one e-mail address, the name not part of another maintainer's field)."""
    recs = records(split)
    by = Counter(r.maintainer_name() for r in recs)
    who = pick(rng, sorted(m for m, n in by.items() if m and n >= 2))
    mine = [r for r in recs if r.maintainer_name() == who]
    if (len({r.fields["Maintainer"] for r in mine}) != 1
            or sum(who in r.fields.get("Maintainer", "") for r in recs) != len(mine)):
        raise Skip("maintainer ambiguous")
    q = (f"What is the combined Installed-Size of every package whose Maintainer is {who}? "
         "Give the figure in KiB as written in the records (no unit conversion).")
    return number("dpkg-status", q, sources.dpkg_text(split), sum(r.size() for r in mine))


# ---------------------------------------------------------------- compare


@phrasing("compare/p1", "dev")
def more_classes_file(split: str, rng: random.Random, i: int) -> Draft:
    """Which of two files of a package (dict) defines more module-level classes?"""
    idx = pkg_pick(split, rng)
    paths = [p for p, f in idx.facts.items() if f.plain_top and idx.unique_base(p)]
    a, b = sorted(rng.sample(paths, 2)) if len(paths) >= 2 else (None, None)
    if a is None or b is None:
        raise Skip("too few files")
    ca, cb = (len(idx.facts[p].top_classes) for p in (a, b))
    if ca == cb:
        raise Skip("tie")
    q = (f"Which of these two files defines more classes at module level: `{a}` or `{b}`? "
         "Answer with the file name.")
    return file_answer(f"stdlib:{idx.name}", q, dict(idx.files), a if ca > cb else b, idx.files)


@phrasing("compare/p2", "dev")
def larger_package(split: str, rng: random.Random, i: int) -> Draft:
    """Which of two dpkg packages (raw text) has the larger Installed-Size?"""
    recs = records(split)
    a, b = rng.sample(list(recs), 2)
    if a.size() == b.size():
        raise Skip("tie")
    best = a if a.size() > b.size() else b
    q = (f"Which package takes more disk space once installed (its Installed-Size), `{a.name}` "
         f"or `{b.name}`? Reply with just the package name.")
    return name_answer("dpkg-status", q, sources.dpkg_text(split), best.name, [a.name, b.name])


@phrasing("compare/p3", "dev")
def longer_licence(split: str, rng: random.Random, i: int) -> Draft:
    """Does licence A (dict) have more non-blank lines than licence B?  The counts differ
    by at least 10 %; yes and no alternate."""
    docs = need(sources.licenses(split))
    a, b = rng.sample(sorted(docs), 2)
    na, nb = _nonblank(docs[a]), _nonblank(docs[b])
    if abs(na - nb) < 0.1 * max(na, nb):
        raise Skip("too close")
    if (na > nb) != (i % 2 == 0):
        a, b, na, nb = b, a, nb, na
    q = f"Does the licence text `{a}` have more non-blank lines than `{b}`? Answer yes or no."
    return yes_no("licenses", q, dict(docs), na > nb)


@phrasing("compare/p4", "test")
def more_entries(split: str, rng: random.Random, i: int) -> Draft:
    """Which of two changelogs of a sample (dict) has more entries?"""
    sample = log_sample(split, rng)
    a, b = rng.sample(list(sample), 2)
    na, nb = len(sample[a].entries), len(sample[b].entries)
    if na == nb:
        raise Skip("tie")
    q = f"Between `{a}` and `{b}`, whose changelog in `context` lists more entries?"
    return name_answer("debian-changelogs", q, log_texts(sample), a if na > nb else b, [a, b])


@phrasing("compare/p5", "test")
def longer_function(split: str, rng: random.Random, i: int) -> Draft:
    """Is top-level function f longer (``def`` line to last line) than g in a package (str,
    ``<<< MODULE path >>>``)?  Lengths differ by at least 3 lines; yes and no alternate."""
    idx = pkg_pick(split, rng)
    funcs = sorted((f.name, f.length) for fs in idx.facts.values() for f in fs.top_funcs
                   if public(f.name) and idx.def_counts[f.name] == 1)
    if len(funcs) < 2:
        raise Skip("too few functions")
    (a, la), (b, lb) = rng.sample(funcs, 2)
    if abs(la - lb) < 3:
        raise Skip("too close")
    if (la > lb) != (i % 2 == 0):
        a, b, la, lb = b, a, lb, la
    q = (f"Is the function `{a}` longer than the function `{b}`, counting the lines from each "
         "`def` line to the function's last line? Reply yes or no.")
    return yes_no(f"stdlib:{idx.name}", q, concat(idx.files, "module"), la > lb)


@phrasing("compare/p6", "test")
def more_dependencies(split: str, rng: random.Random, i: int) -> Draft:
    """Which of two dpkg packages (list of field dicts) has more comma-separated entries in
    its Depends field?"""
    recs = [r for r in records(split) if r.fields.get("Depends")]
    a, b = rng.sample(recs, 2)
    na, nb = (len(r.fields["Depends"].split(",")) for r in (a, b))
    da, db = (len(depends_names(r.fields["Depends"])) for r in (a, b))
    if na == nb or da == db or (na > nb) != (da > db):
        raise Skip("tie, or depends on how one counts")
    q = (f"Of the two packages `{a.name}` and `{b.name}`, which declares more dependencies in "
         "its `Depends` field (count the comma-separated entries)?")
    return name_answer("dpkg-status", q, record_dicts(records(split)),
                       a.name if na > nb else b.name, [a.name, b.name])
