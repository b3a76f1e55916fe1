"""Phrasings of ``multi-hop``, ``structure``, ``records`` and ``yes-no`` (p1-p3 dev, p4-p6 test)."""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Callable

from . import sources
from .base import (
    Draft,
    Skip,
    name_answer,
    need,
    number,
    phrasing,
    pick,
    quote_line,
    text_answer,
    yes_no,
)
from .contexts import (
    WORDS,
    log_sample,
    log_texts,
    module_pick,
    pkg_pick,
    record_dicts,
    records,
    word_stats,
)
from .pyfacts import Func, PkgIndex, facts, public
from .sources import concat, depends_names

# ---------------------------------------------------------------- multi-hop


@phrasing("multi-hop/p1", "dev")
def method_owner_size(split: str, rng: random.Random, i: int) -> Draft:
    """The one class (package as dict) defining method m: how many methods does it define
    directly in its body?  ``def m`` and ``class C`` each occur once in the package."""
    idx = pkg_pick(split, rng)
    cands = sorted((m, c.name, len(c.methods)) for f in idx.facts.values() for c in f.classes
                   for m in c.methods if public(m) and idx.def_counts[m] == 1
                   and idx.class_counts[c.name] == 1 and c.conditional_methods == 0
                   and len(c.methods) >= 2)
    method, _, n = pick(rng, cands)
    q = (f"Exactly one class in this package defines a method called `{method}`. How many "
         "methods (def statements directly in that class's body) does that class define in "
         "total? Reply with a number.")
    return number(f"stdlib:{idx.name}", q, dict(idx.files), n)


@phrasing("multi-hop/p2", "dev")
def only_dependent_version(split: str, rng: random.Random, i: int) -> Draft:
    """The only dpkg package (dict name -> record) whose Depends names X: its Version."""
    recs = records(split)
    users: dict[str, list[sources.PkgRecord]] = {}
    for r in recs:
        for d in depends_names(r.fields.get("Depends", "")):
            users.setdefault(d, []).append(r)
    dep = pick(rng, sorted(d for d, rs in users.items() if len(rs) == 1))
    if sum(dep in r.fields.get("Depends", "") for r in recs) != 1:
        raise Skip("a text search would find more")
    q = (f"Exactly one package in `context` lists `{dep}` in its Depends field. Which version "
         "of that package is installed? Give the version string.")
    return text_answer("dpkg-status", q, {r.name: r.raw for r in recs},
                       users[dep][0].fields["Version"])


@phrasing("multi-hop/p3", "dev")
def entry_version_of_line(split: str, rng: random.Random, i: int) -> Draft:
    """The one changelog entry (sample as dict) containing a given line: its version."""
    sample = log_sample(split, rng)
    whole = "\n".join(c.text for c in sample.values())
    log = sample[pick(rng, sorted(sample))]
    entry = pick(rng, log.entries)
    body = entry.text.split("\n")[1:-1]
    line = pick(rng, [s for raw in body if 25 <= len(s := raw.strip()) <= 90
                      and len(WORDS.findall(s)) >= 2])
    if whole.count(line) != 1 or entry.version in line:
        raise Skip("line not unique")
    q = (f"One changelog entry in `context` contains the line{quote_line(line)}"
         "What version does that entry's header line give?")
    return text_answer("debian-changelogs", q, log_texts(sample), entry.version)


@phrasing("multi-hop/p4", "test")
def classes_beside_function(split: str, rng: random.Random, i: int) -> Draft:
    """The file (package as str, ``--- path ---``) defining top-level function f: how many
    module-level classes does it define?  At least one; no conditional definitions."""
    idx = pkg_pick(split, rng)
    cands = sorted((f.name, p) for p, fs in idx.facts.items() if fs.plain_top and fs.top_classes
                   for f in fs.top_funcs if public(f.name) and idx.def_counts[f.name] == 1)
    func, path = pick(rng, cands)
    q = (f"Find the file that defines the function `{func}`. How many classes are defined at the "
         "top level of that same file?")
    return number(f"stdlib:{idx.name}", q, concat(idx.files, "dashes"),
                  len(idx.facts[path].top_classes))


@phrasing("multi-hop/p5", "test")
def maintainer_of_description(split: str, rng: random.Random, i: int) -> Draft:
    """Who maintains the dpkg package (list of field dicts) with description summary S?
    S is the first Description line of exactly one package."""
    recs = records(split)
    summaries = Counter(r.fields.get("Description", "").split("\n")[0] for r in recs)
    rec = pick(rng, [r for r in recs if summaries[r.fields.get("Description", "")
                                                 .split("\n")[0]] == 1
                     and len(r.fields["Description"].split("\n")[0]) >= 15])
    summary = rec.fields["Description"].split("\n")[0]
    q = (f"Who maintains the package described as \"{summary}\"? Give the maintainer's name "
         "without the e-mail address.")
    return name_answer("dpkg-status", q, record_dicts(recs), rec.maintainer_name())


@phrasing("multi-hop/p6", "test")
def newest_signer_count(split: str, rng: random.Random, i: int) -> Draft:
    """Changelog of P (sample as dict): who signed its newest entry, and how many of P's
    entries did that person sign off?"""
    sample = log_sample(split, rng)
    log = sample[pick(rng, sorted(f for f, c in sample.items() if len(c.entries) >= 3))]
    who = log.entries[0].signer
    n = sum(e.signer == who for e in log.entries)
    if n != sum(who in e.text.rsplit("\n", 1)[-1] for e in log.entries):
        raise Skip("name ambiguous")
    q = (f"Look up who signed off the most recent entry in the changelog of `{log.folder}`. How "
         "many entries of that changelog did the same person sign off?")
    return number("debian-changelogs", q, log_texts(sample), n)


# ---------------------------------------------------------------- structure


def _unique_top_funcs(idx: PkgIndex, ok: Callable[[Func], bool] = lambda f: True,
                      ) -> list[tuple[str, Func]]:
    """Public top-level functions whose ``def`` occurs once in the package, by name."""
    return sorted(((f.name, f) for fs in idx.facts.values() for f in fs.top_funcs
                   if public(f.name) and idx.def_counts[f.name] == 1 and ok(f)),
                  key=lambda nf: nf[0])


@phrasing("structure/p1", "dev")
def parameter_count(split: str, rng: random.Random, i: int) -> Draft:
    """How many parameters (all kinds) does top-level function f of a package (dict) take?"""
    idx = pkg_pick(split, rng)
    name, func = pick(rng, _unique_top_funcs(idx, lambda f: len(f.params) >= 2))
    q = (f"How many parameters does the function `{name}` accept? Count every parameter in its "
         "signature, including `*args`/`**kwargs`-style ones. Reply with a number.")
    return number(f"stdlib:{idx.name}", q, dict(idx.files), len(func.params))


@phrasing("structure/p2", "dev")
def base_class(split: str, rng: random.Random, i: int) -> Draft:
    """The single base class (a plain name, not ``object``) of class C in a module (str)."""
    name, text = module_pick(split, rng)
    cls = pick(rng, [c for c in facts(text).classes if public(c.name) and len(c.bases) == 1
                     and re.fullmatch(r"\w+", c.bases[0]) and c.bases[0] != "object"
                     and len(re.findall(rf"\bclass\s+{c.name}\b", text)) == 1])
    q = f"From which class does `{cls.name}` inherit in this module? Name the base class."
    return name_answer(f"stdlib:{name[:-3]}", q, text, cls.bases[0])


@phrasing("structure/p3", "dev")
def default_value(split: str, rng: random.Random, i: int) -> Draft:
    """The literal default value of parameter p of function f (``def f`` once in a package
    given as a dict).  Numbers >= 2, booleans and short one-line strings; not None."""
    idx = pkg_pick(split, rng)
    cands = []
    for fs in idx.facts.values():
        for f in fs.funcs:
            if not public(f.name) or idx.def_counts[f.name] != 1:
                continue
            for param, value in f.defaults:
                if isinstance(value, bool) or (isinstance(value, (int, float)) and value >= 2):
                    cands.append((f.name, param, repr(value)))
                elif isinstance(value, str) and 2 <= len(value) <= 30 and value.isprintable():
                    cands.append((f.name, param, value))
    func, param, value = pick(rng, sorted(cands))
    q = f"What is the default value of the parameter `{param}` of `{func}`?"
    return text_answer(f"stdlib:{idx.name}", q, dict(idx.files), value)


@phrasing("structure/p4", "test")
def decorator_name(split: str, rng: random.Random, i: int) -> Draft:
    """The one decorator (a dotted name) of function or method X in a package (str,
    ``### FILE:``); ``def X`` occurs once.  ``a.b`` may be answered as ``b``."""
    idx = pkg_pick(split, rng)
    cands = sorted((f.decorators[0], f.name) for fs in idx.facts.values() for f in fs.funcs
                   if public(f.name) and idx.def_counts[f.name] == 1 and len(f.decorators) == 1
                   and re.fullmatch(r"[\w.]+", f.decorators[0]))
    deco = pick(rng, sorted({d for d, _ in cands}))  # first the decorator, so not always @property
    func = pick(rng, [f for d, f in cands if d == deco])
    q = ("`context` joins Python files, each after a `### FILE: <path>` line. Which decorator "
         f"is applied to `{func}`? Just the decorator's name.")
    alternatives = [deco.rsplit(".", 1)[-1]] if "." in deco else []
    return name_answer(f"stdlib:{idx.name}", q, concat(idx.files, "hash"), deco,
                       alternatives=alternatives)


@phrasing("structure/p5", "test")
def method_count(split: str, rng: random.Random, i: int) -> Draft:
    """How many methods does class C of a module (list of lines) define directly in its
    body?  At least 2; ``class C`` occurs once; no methods inside if/try blocks."""
    name, text = module_pick(split, rng)
    cls = pick(rng, [c for c in facts(text).classes if public(c.name) and len(c.methods) >= 2
                     and c.conditional_methods == 0
                     and len(re.findall(rf"\bclass\s+{c.name}\b", text)) == 1])
    q = ("`context` holds the lines of a Python module as a list. How many methods does the "
         f"class `{cls.name}` define directly in its body?")
    return number(f"stdlib:{name[:-3]}", q, text.split("\n"), len(cls.methods))


@phrasing("structure/p6", "test")
def second_parameter(split: str, rng: random.Random, i: int) -> Draft:
    """The name of the second positional parameter of top-level function f (package as dict)."""
    idx = pkg_pick(split, rng)
    name, func = pick(rng, _unique_top_funcs(
        idx, lambda f: len(f.positional) >= 2 and len(f.positional[1]) >= 3))
    first, second = func.positional[:2]
    q = f"What is the name of the second parameter of the function `{name}`?"
    # Naming the first parameter too is wrong (a dump of the signature is no answer).
    others = [first] if len(first) >= 4 else []
    return name_answer(f"stdlib:{idx.name}", q, dict(idx.files), second, others)


# ---------------------------------------------------------------- records


@phrasing("records/p1", "dev")
def package_version(split: str, rng: random.Random, i: int) -> Draft:
    """The Version of dpkg package P (dict name -> record)."""
    recs = records(split)
    rec = pick(rng, recs)
    q = f"What version of `{rec.name}` is installed according to these records?"
    return text_answer("dpkg-status", q, {r.name: r.raw for r in recs}, rec.fields["Version"])


@phrasing("records/p2", "dev")
def entry_count(split: str, rng: random.Random, i: int) -> Draft:
    """How many entries does one changelog (str) have?  At least 3."""
    logs = need(sources.changelogs(split))
    log = logs[pick(rng, sorted(f for f, c in logs.items()
                                if len(c.entries) >= 3 and len(c.text) <= 300_000))]
    q = (f"`context` is the Debian changelog of `{log.folder}`. How many entries does it "
         "contain? Reply with a number.")
    return number("debian-changelogs", q, log.text, len(log.entries))


@phrasing("records/p3", "dev")
def package_maintainer(split: str, rng: random.Random, i: int) -> Draft:
    """The Maintainer name (no e-mail) of dpkg package P (list of field dicts)."""
    recs = records(split)
    rec = pick(rng, [r for r in recs if len(r.maintainer_name()) >= 4])
    q = f"Who is the maintainer of the package `{rec.name}`? Give the name only, no e-mail address."
    return name_answer("dpkg-status", q, record_dicts(recs), rec.maintainer_name())


@phrasing("records/p4", "test")
def newest_date(split: str, rng: random.Random, i: int) -> Draft:
    """The date on the sign-off line of the newest entry of P's changelog (sample as dict)."""
    sample = log_sample(split, rng)
    log = sample[pick(rng, sorted(sample))]
    q = (f"When was the newest entry in `{log.folder}`'s changelog signed off? Give the date "
         "exactly as written on its ` -- ` line.")
    return text_answer("debian-changelogs", q, log_texts(sample), log.entries[0].date)


@phrasing("records/p5", "test")
def package_section(split: str, rng: random.Random, i: int) -> Draft:
    """The Section of dpkg package P (raw status text)."""
    recs = records(split)
    rec = pick(rng, [r for r in recs if r.fields.get("Section")])
    q = f"In which section is the package `{rec.name}` filed?"
    return name_answer("dpkg-status", q, sources.dpkg_text(split), rec.fields["Section"])


@phrasing("records/p6", "test")
def version_of_date(split: str, rng: random.Random, i: int) -> Draft:
    """Which version's entry (one changelog as a list of entry strings) was signed off on
    date D?  D occurs once in the changelog; not the newest entry."""
    logs = need(sources.changelogs(split))
    log = logs[pick(rng, sorted(f for f, c in logs.items() if 3 <= len(c.entries) <= 400))]
    entry = pick(rng, log.entries[1:])
    if log.text.count(entry.date) != 1:
        raise Skip("date not unique")
    q = ("`context` lists the entries of one Debian changelog, one string each. Which version "
         f"was uploaded in the entry signed off on {entry.date}? Give the version string.")
    return text_answer("debian-changelogs", q, [e.text for e in log.entries], entry.version)


# ---------------------------------------------------------------- yes-no


@phrasing("yes-no/p1", "dev")
def file_defines(split: str, rng: random.Random, i: int) -> Draft:
    """Does file A of a package (dict) define top-level function f?  For "no", f is a
    top-level function of another file and ``def f`` does not occur in A."""
    idx = pkg_pick(split, rng)
    name, func = pick(rng, _unique_top_funcs(idx))
    owner = next(p for p, fs in idx.facts.items() if func in fs.top_funcs)
    want = i % 2 == 0
    path = owner if want else pick(rng, sorted(p for p in idx.files if p != owner))
    q = f"Is there a top-level function named `{name}` in `{path}`? Answer yes or no."
    return yes_no(f"stdlib:{idx.name}", q, dict(idx.files), want)


@phrasing("yes-no/p2", "dev")
def priority_is(split: str, rng: random.Random, i: int) -> Draft:
    """Is the Priority of dpkg package P (dict name -> record) X?  For "no", X is another
    priority that occurs in the records."""
    recs = records(split)
    rec = pick(rng, [r for r in recs if r.fields.get("Priority")])
    actual = rec.fields["Priority"]
    want = i % 2 == 0
    value = actual if want else pick(rng, sorted({r.fields.get("Priority", "") for r in recs}
                                                 - {actual, ""}))
    q = f"According to `context`, is the Priority of `{rec.name}` \"{value}\"? Yes or no."
    return yes_no("dpkg-status", q, {r.name: r.raw for r in recs}, want)


@phrasing("yes-no/p3", "dev")
def licence_has_word(split: str, rng: random.Random, i: int) -> Draft:
    """Does licence D (dict) contain word W (whole word, any case)?  For "no", W occurs in
    another licence."""
    docs = need(sources.licenses(split))
    name = pick(rng, sorted(docs))
    mine = set(word_stats(docs[name])[0])
    want = i % 2 == 0
    pool = mine if want else {w for t in docs.values() for w in word_stats(t)[0]} - mine
    word = pick(rng, sorted(pool))
    q = (f"Does the word \"{word}\" appear anywhere in the licence `{name}` (as a whole word, "
         "ignoring case)? Reply yes or no.")
    return yes_no("licenses", q, dict(docs), want)


@phrasing("yes-no/p4", "test")
def class_has_method(split: str, rng: random.Random, i: int) -> Draft:
    """Does class C of a module (str) define method m in its own body?  For "no", m is a
    method of another class of the same module."""
    name, text = module_pick(split, rng)
    classes = [c for c in facts(text).classes if public(c.name) and c.methods
               and c.conditional_methods == 0
               and len(re.findall(rf"\bclass\s+{c.name}\b", text)) == 1]
    cls = pick(rng, classes)
    want = i % 2 == 0
    pool = set(cls.methods) if want else {m for c in facts(text).classes for m in c.methods
                                          } - set(cls.methods)
    method = pick(rng, sorted(m for m in pool if public(m)))
    q = (f"Does the class `{cls.name}` in this file have its own method named `{method}` "
         "(defined in its body, not inherited)?")
    return yes_no(f"stdlib:{name[:-3]}", q, text, want)


@phrasing("yes-no/p5", "test")
def depends_on(split: str, rng: random.Random, i: int) -> Draft:
    """Does dpkg package P (list of record strings) list Q in its Depends field?  For "no",
    Q is a dependency of other packages and does not occur in P's record at all."""
    recs = records(split)
    rec = pick(rng, [r for r in recs if r.fields.get("Depends")])
    mine = depends_names(rec.fields["Depends"])
    want = i % 2 == 0
    if want:
        dep = pick(rng, mine)
    else:
        others = {d for r in recs for d in depends_names(r.fields.get("Depends", ""))}
        dep = pick(rng, sorted(d for d in others if d not in rec.raw))
    q = f"Is `{dep}` listed in the Depends field of the package `{rec.name}`?"
    return yes_no("dpkg-status", q, [r.raw for r in recs], want)


@phrasing("yes-no/p6", "test")
def signed_changelog(split: str, rng: random.Random, i: int) -> Draft:
    """Did person N sign off an entry of P's changelog (sample as dict)?  For "no", N signed
    entries of another changelog of the sample and does not occur in P's changelog."""
    sample = log_sample(split, rng)
    log = sample[pick(rng, sorted(sample))]
    want = i % 2 == 0
    if want:
        who = pick(rng, sorted({e.signer for e in log.entries}))
    else:
        who = pick(rng, sorted({e.signer for c in sample.values() for e in c.entries
                                if e.signer not in log.text}))
    q = f"Did {who} sign off any entry of the `{log.folder}` changelog? Answer yes or no."
    return yes_no("debian-changelogs", q, log_texts(sample), want)
