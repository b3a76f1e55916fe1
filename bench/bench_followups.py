"""Follow-up questions: a second task that refers to the first one's answer, asked with
the session's conversation (``RLM.run(..., history=...)``) and without it.

Run by hand (the real model: about 30-40 minutes for all pairs on 2 CPU cores):

    .venv/bin/python bench/bench_followups.py [--pairs N] [--rows] [--model M]
        [--max-iterations N (default 8)] [--set KEY=VALUE ...] [--chain N (default 6)]
        [--save FILE.jsonl] [--skip-without]
    .venv/bin/python bench/bench_followups.py --compare BEFORE.jsonl AFTER.jsonl

The pairs (:func:`load_pairs`, at least 20) are built at load time from the eval's dev
sources on this machine (``evals/``: the standard library, ``/usr/share/common-licenses``,
``/var/lib/dpkg/status``, Debian changelogs): a first question ("Which file defines
``f``?", "Which package is the largest?", "Which classes inherit from ``E``?") and a
second one that refers to its answer ("that file", "that package", "those"), each
expected answer computed by code and judged with ``evals.checks``.  Every pair draws its
targets with ``random.Random(f"{SEED}/followups/{id}/{attempt}")`` and is drawn again
when the draw would be ambiguous (ties, a name defined twice, a count that depends on how
one counts).  The phrasings are the bench's own, not the eval's.

For each pair (``--pairs N``: the first N) the first question is run once with a new
:class:`~rlm_kernel.engine.session.conversation.Conversation`; its result is recorded
(``conv.record``) and the second question is run twice, one after the other: *with* the
conversation (the same executor, ``history=conv``) and *without* it (a new executor, no
history: what a user gets who asks the follow-up alone).  Every run goes through
``rlm_kernel.RLM`` (``--model``; default the embedded local model) at temperature 0 with
``--max-iterations`` steps; ``--set KEY=VALUE`` (repeatable) overrides any ``RLMConfig``
field (parsed by ``bench_accuracy.parse_settings``).

Then one conversation is chained over the first questions of the first ``--chain`` pairs
(0: skipped), and after 0, 1, 3 and 6 earlier tasks a probe task (the first question of
the next pair, stopped after its first model call) reports the prompt tokens of its
first root call, beside the characters of the history section told to the model and the
characters it would take uncompacted.

Printed on stdout: the settings; with ``--rows`` one line per pair as it finishes (id,
first ok, second ok with | without, steps and seconds each way, expected -> answers;
``--save FILE.jsonl`` writes each pair's outcome with its runs' steps as a JSON line);
then a table with one row per source kind and a TOTAL row: ``pairs | first correct |
second correct with conversation | without | mean steps with | without | mean seconds
with | without | mean prompt tokens of the second question's first root call with |
without | their ratio | second runs that copy an earlier step with | without`` (a
root reply whose code, without comments and spacing, is one of the first run's steps,
whether it ran or a repetition check kept it from running: a follow-up that re-runs the
first task instead of answering its own question); then the chain's table (earlier tasks | prompt tokens | history
chars | uncompacted chars); how often the second answer was right when the first one
was (each way) and how many second questions are yes/no; and the number of runs that
ended in an error.  A failing run never stops the bench: it counts as wrong.  Ctrl-C
stops it and prints the tables of the pairs done so far.

``--skip-without`` leaves out the run without the conversation (its columns show ``-``):
for measuring a change to what a follow-up is told, which that run never sees.
``--compare BEFORE.jsonl AFTER.jsonl`` prints two ``--save`` files side by side, one row
per pair in both (the second question with the conversation: right, answer, steps,
seconds, prompt tokens of its first root call; whether the first was right) and the
totals: run the bench in a copy of the tree before the change
(``git worktree add DIR REV``, then ``DIR/bench/bench_followups.py --save``) and in this
one, on the same pairs.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import copy
import io
import json
import random
import re
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # rlm_kernel and evals
sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_accuracy (sibling module)

from bench_accuracy import one_line, our_config, parse_settings  # noqa: E402

from evals import checks  # noqa: E402
from evals.base import Skip, Unavailable, need, pick, unique_best  # noqa: E402
from evals.contexts import record_dicts, records, word_stats  # noqa: E402
from evals.pyfacts import PkgIndex, facts, pkg_index, plain_lines, public  # noqa: E402
from evals.sources import (  # noqa: E402
    Changelog,
    changelogs,
    concat,
    depends_names,
    licenses,
    stdlib_modules,
)
from rlm_kernel import RLM, RLMConfig  # noqa: E402
from rlm_kernel.engine.repetition import without_comments  # noqa: E402
from rlm_kernel.engine.session.conversation import Conversation  # noqa: E402
from rlm_kernel.executors import PlainExecutor  # noqa: E402
from rlm_kernel.models import is_embedded  # noqa: E402
from rlm_kernel.termination import extract_code_blocks  # noqa: E402

SEED = 20250611
SPLIT = "dev"  # the eval's dev sources: rows of the test split are never shown
ATTEMPTS = 80
KINDS = ("stdlib", "dpkg", "licences", "changelogs")
REFERS = re.compile(r"\b(that|those|them|it|its|this|these|the same)\b", re.IGNORECASE)
"""Words by which a second question points back at the first one's answer."""
CHAIN_POINTS = (0, 1, 3, 6)
"""Earlier tasks after which the chain's probe is measured (those up to ``--chain``)."""

Check = Callable[[str | None], bool]


# -- pairs ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Answer:
    """An expected answer as text and its check."""

    text: str
    check: Check = field(repr=False, compare=False)
    names: tuple[str, ...] = ()  # the name(s) a second question must not repeat


@dataclass(frozen=True)
class Pair:
    """A first question and a second one about its answer, over one ``context``."""

    id: str           # "<nn>-<shape>", stable and unique
    kind: str         # one of KINDS
    source: str       # "stdlib:<unit>", "dpkg-status", "licenses", "debian-changelogs"
    first: str
    second: str
    context: Any = field(repr=False, compare=False)
    expected1: str = ""
    expected2: str = ""
    check1: Check = field(default=lambda a: False, repr=False, compare=False)
    check2: Check = field(default=lambda a: False, repr=False, compare=False)
    names1: tuple[str, ...] = ()  # the first answer's name(s), absent from ``second``


Draw = tuple[str, str, str, Any, Answer, Answer]
"""What a pair maker returns: (source, first, second, context, answer 1, answer 2)."""


def number(value: int, question: str) -> Answer:
    """A positive integer the question does not write (else :class:`Skip`)."""
    if value <= 0 or value in checks.integers(question):
        raise Skip("zero, or the number is in the question")
    return Answer(str(value), checks.number_check(value, question))


def numbers(values: Sequence[int], question: str) -> Answer:
    """Any of ``values`` (the same count taken two defensible ways)."""
    values = sorted(set(values))
    for v in values:
        number(v, question)
    return Answer(" or ".join(map(str, values)),
                  lambda a: any(checks.check_number(a, v, question) for v in values))


def file_name(path: str, names: Sequence[str]) -> Answer:
    """A file of the context, by path or base name (its base name unique)."""
    base = path.rsplit("/", 1)[-1]
    if sum(n.rsplit("/", 1)[-1] == base for n in names) != 1:
        raise Skip("base name not unique")
    return Answer(path, checks.file_check(path, names), (path, base))


def name(expected: str, others: Sequence[str] = ()) -> Answer:
    """A name; none of ``others`` may appear beside it."""
    others = [o for o in others if o.lower() != expected.lower()]
    if any(checks.check_name(expected, o) for o in others):
        raise Skip("the name contains another candidate")
    return Answer(expected, checks.name_check(expected, others), (expected,))


def names(expected: Sequence[str], others: Sequence[str] = ()) -> Answer:
    """Several names, all of them and none of ``others``."""
    want = sorted(set(expected))
    rest = [o for o in others if o not in want]
    if len(want) < 2 or any(checks.check_name(w, o) for w in want for o in rest):
        raise Skip("too few, or a name contains another candidate")
    return Answer(", ".join(want),
                  lambda a: all(checks.check_name(a, w, rest) for w in want), tuple(want))


def text(expected: str) -> Answer:
    """A short text (a version)."""
    if len(expected.strip()) < 2:
        raise Skip("too short to check")
    return Answer(expected, checks.text_check(expected))


def yes_no(value: bool) -> Answer:
    return Answer("yes" if value else "no", checks.yes_no_check(value))


MAKERS: list[tuple[str, str, Callable[[random.Random], Draw]]] = []


def pair(pid: str, kind: str) -> Callable[[Callable[[random.Random], Draw]],
                                           Callable[[random.Random], Draw]]:
    """Register ``make(rng) -> Draw`` as pair ``pid`` of source ``kind``."""
    def register(make: Callable[[random.Random], Draw]) -> Callable[[random.Random], Draw]:
        MAKERS.append((pid, kind, make))
        return make
    return register


# -- stdlib: packages as {path: source}, modules as one string ---------------------------------
def _package(name_: str) -> PkgIndex:
    idx = pkg_index(name_)
    need(idx.files)
    return idx


def _column0_defs(source: str) -> int:
    """``def`` / ``async def`` at column 0: how a text search counts top-level functions."""
    return len(re.findall(r"^(?:async\s+)?def\s", source, re.M))


def _class_nodes(source: str) -> list[ast.ClassDef]:
    return [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ClassDef)]


def _own_methods(node: ast.ClassDef) -> list[str]:
    return [n.name for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _once(source: str, kw: str, ident: str) -> bool:
    """``class X`` / ``def X`` occurs exactly once in the text."""
    return len(re.findall(rf"\b{kw}\s+{re.escape(ident)}\b", source)) == 1


def def_file_pair(package: str) -> Callable[[random.Random], Draw]:
    """Which file defines top-level function f? -> how many top-level functions does that
    file define?  The file has no conditional definitions and a column-0 text search
    counts the same functions as ``ast``."""
    def make(rng: random.Random) -> Draw:
        idx = _package(package)
        cands = sorted((f.name, p) for p, fs in idx.facts.items()
                       if fs.plain_top and 2 <= len(fs.top_funcs) <= 40
                       and _column0_defs(idx.files[p]) == len(fs.top_funcs)
                       for f in fs.top_funcs if public(f.name) and idx.def_counts[f.name] == 1)
        func, path = pick(rng, cands)
        q1 = (f"`context` is a dict that maps each file of the `{package}` package to its "
              f"source code. Which file holds the definition of the top-level function "
              f"`{func}`? Reply with its path.")
        q2 = ("How many functions are defined at module level in that file (methods and "
              "nested functions do not count)?")
        return (f"stdlib:{package}", q1, q2, dict(idx.files), file_name(path, list(idx.files)),
                number(len(idx.facts[path].top_funcs), q2))
    return make


def method_owner_pair(package: str) -> Callable[[random.Random], Draw]:
    """Which class has method m? -> how many methods in its own body?  ``def m`` and
    ``class C`` occur once in the package; no methods inside if/try blocks of C."""
    def make(rng: random.Random) -> Draw:
        idx = _package(package)
        cands = sorted((m, c.name, len(c.methods)) for f in idx.facts.values()
                       for c in f.classes for m in c.methods
                       if public(m) and idx.def_counts[m] == 1 and idx.class_counts[c.name] == 1
                       and c.conditional_methods == 0 and 2 <= len(c.methods) <= 40)
        method, cls, n = pick(rng, cands)
        q1 = (f"The files of the `{package}` package are in `context` (path -> source). Only "
              f"one class among them has a method called `{method}`. What is that class "
              "called?")
        q2 = ("Count the methods written directly in that class's body (inherited ones do not "
              "count). How many are there?")
        return f"stdlib:{package}", q1, q2, dict(idx.files), name(cls), number(n, q2)
    return make


pair("01-def-file/top-functions", "stdlib")(def_file_pair("wsgiref"))
pair("02-method-owner/method-count", "stdlib")(method_owner_pair("xmlrpc"))


@pair("03-most-classes-file/has-function", "stdlib")
def most_classes_file(rng: random.Random) -> Draw:
    """Which file defines the most module-level classes (the same winner counting classes
    in module-level if/try blocks)? -> does it define top-level function f?  (No: f is a
    top-level function of another file.)"""
    idx = _package("wsgiref")
    strict = {p: len(f.top_classes) for p, f in idx.facts.items()}
    loose = {p: sum(c.scope == "module" for c in f.classes) for p, f in idx.facts.items()}
    best = unique_best(strict)
    if unique_best(loose) != best:
        raise Skip("depends on how one counts")
    want = False  # the yes/no pairs: two yes, two no
    mine = {f.name for f in idx.facts[best].top_funcs}
    pool = sorted(mine if want else {f.name for p, fs in idx.facts.items() if p != best
                                     for f in fs.top_funcs} - mine)
    func = pick(rng, [f for f in pool
                      if public(f) and (want or f"def {f}" not in idx.files[best])])
    q1 = ("`context` maps the paths of a Python package's files to their source. Which file "
          "has the greatest number of classes defined at module level?")
    q2 = f"Is there also a top-level function named `{func}` in that file? Answer yes or no."
    return ("stdlib:wsgiref", q1, q2, dict(idx.files), file_name(best, list(idx.files)),
            yes_no(want))


@pair("04-most-parameters/last-parameter", "stdlib")
def most_parameters(rng: random.Random) -> Draw:
    """Which top-level function of file F takes the most parameters (unique)? -> the name of
    its last parameter."""
    idx = _package("http")
    path = pick(rng, sorted(p for p, f in idx.facts.items() if len(f.top_funcs) >= 4))
    funcs = [f for f in idx.facts[path].top_funcs if idx.def_counts[f.name] == 1]
    best = unique_best({f.name: len(f.params) for f in funcs})
    module_level = [f for f in idx.facts[path].funcs if f.scope == "module"]
    if max(len(f.params) for f in module_level) != max(len(f.params) for f in funcs):
        raise Skip("a conditionally defined function is as long")
    func = next(f for f in funcs if f.name == best)
    last = func.params[-1]
    if len(last) < 3:
        raise Skip("parameter name too short to check")
    q1 = (f"`context` holds the `http` package (path -> source). Among the functions defined "
          f"at the top level of `{path}`, which one accepts the most parameters?")
    q2 = "What is the name of the last parameter in its signature?"
    others = [p for p in func.params[:-1] if len(p) >= 4]
    return "stdlib:http", q1, q2, dict(idx.files), name(best), name(last, others)


@pair("05-exception-classes/docstring", "stdlib")
def exception_classes(rng: random.Random) -> Draw:
    """Which classes of a module list ``Exception`` itself as a base? -> which one of those
    has a docstring (exactly one does)?"""
    mods = stdlib_modules(SPLIT)
    fits = {}
    for mod, source in sorted(mods.items()):
        nodes = [c for c in _class_nodes(source)
                 if "Exception" in [ast.unparse(b) for b in c.bases] and _once(source, "class",
                                                                             c.name)]
        documented = [c.name for c in nodes if ast.get_docstring(c)]
        if len(nodes) >= 2 and len(documented) == 1:
            fits[mod] = ([c.name for c in nodes], documented[0])
    mod = pick(rng, sorted(fits))
    found, doc = fits[mod]
    others = sorted({c.name for c in _class_nodes(mods[mod])} - set(found))
    q1 = (f"`context` is the source of `{mod}` as one string. Which of its classes have "
          "`Exception` itself among their direct base classes? Name them all.")
    q2 = "Which one of those classes has a docstring?"
    return (f"stdlib:{mod[:-3]}", q1, q2, mods[mod], names(found, others),
            name(doc, [c for c in found if c != doc]))


@pair("06-subclasses/own-init", "stdlib")
def subclasses_init(rng: random.Random) -> Draw:
    """Which classes of a module inherit directly (and only) from class B of the same
    module? -> how many of those define their own ``__init__`` (some, not all)?"""
    mods = stdlib_modules(SPLIT)
    fits = []
    for mod in ("configparser.py", "optparse.py", "smtplib.py"):
        source = mods.get(mod)
        if source is None:
            continue
        nodes = _class_nodes(source)
        defined = {c.name for c in nodes}
        for base in sorted(defined):
            subs = [c for c in nodes if [ast.unparse(b) for b in c.bases] == [base]]
            with_init = sum("__init__" in _own_methods(c) for c in subs)
            mentions = len(re.findall(rf"\bclass\s+\w+\(\s*{base}\s*[,)]", source))
            if 3 <= len(subs) <= 8 and 0 < with_init < len(subs) and mentions == len(subs):
                fits.append((mod, base, [c.name for c in subs], with_init))
    mod, base, subs, n = pick(rng, sorted(fits))
    q1 = (f"Here is `{mod}` as a single string. List the classes in it that are derived "
          f"directly from `{base}` (and from nothing else).")
    q2 = "How many of those classes define an `__init__` method of their own?"
    others = sorted({c.name for c in _class_nodes(mods[mod])} - set(subs) - {base})
    return f"stdlib:{mod[:-3]}", q1, q2, mods[mod], names(subs, others), number(n, q2)


@pair("07-longest-function/parameters", "stdlib")
def longest_function(rng: random.Random) -> Draw:
    """The longest function or method of a module (unique, its name defined once) -> how
    many parameters it declares (self, *args and **kwargs included)."""
    mods = stdlib_modules(SPLIT)
    mod = pick(rng, sorted(m for m, t in mods.items() if 15_000 <= len(t) <= 60_000))
    source = mods[mod]
    funcs = facts(source).funcs
    defs = Counter(f.name for f in funcs)
    lengths = {f.name: f.length for f in funcs if defs[f.name] == 1}
    best = unique_best(lengths)
    if max(f.length for f in funcs) != lengths[best]:
        raise Skip("a repeated name is as long")
    func = next(f for f in funcs if f.name == best)
    if len(func.params) < 2:
        raise Skip("too few parameters")
    q1 = (f"`context` is the text of the module `{mod}`. Name the function or method that "
          "occupies the most lines, counted from its `def` line through its final line.")
    q2 = ("How many parameters does it declare? Count `self` if it has one, and any "
          "`*args`/`**kwargs`.")
    runner_up = sorted(lengths, key=lengths.__getitem__)[-2]
    return (f"stdlib:{mod[:-3]}", q1, q2, source, name(best, [runner_up]),
            number(len(func.params), q2))


@pair("08-most-methods-class/underscore", "stdlib")
def most_methods_class(rng: random.Random) -> Draw:
    """The class of a module with the most methods in its own body (unique; ``class C``
    once; no conditional methods) -> how many of them start with an underscore."""
    mods = stdlib_modules(SPLIT)
    mod = pick(rng, sorted(m for m, t in mods.items() if 8_000 <= len(t) <= 60_000))
    source = mods[mod]
    classes = facts(source).classes
    best = unique_best({c.name: len(c.methods) for c in classes if _once(source, "class",
                                                                          c.name)})
    cls = next(c for c in classes if c.name == best)
    if cls.conditional_methods or len(cls.methods) != max(len(c.methods) for c in classes):
        raise Skip("conditional methods, or a repeated class name is as large")
    private = sum(m.startswith("_") for m in cls.methods)
    if not 0 < private < len(cls.methods):
        raise Skip("none or all private")
    q1 = (f"`context` holds the module `{mod}` as text. Which class in it has the largest "
          "number of methods written directly in its body?")
    q2 = ("How many of that class's own methods have a name beginning with an underscore "
          "(dunder methods included)?")
    return f"stdlib:{mod[:-3]}", q1, q2, source, name(best), number(private, q2)


@pair("09-base-class/defined-here", "stdlib")
def base_class_here(rng: random.Random) -> Draw:
    """The single base class (a plain name) of class C of a module -> is that base class
    defined in the same module?  (Yes.)"""
    mods = stdlib_modules(SPLIT)
    mod = pick(rng, sorted(m for m, t in mods.items() if 8_000 <= len(t) <= 80_000))
    source = mods[mod]
    classes = facts(source).classes
    defined = {c.name for c in classes}
    want = True  # the yes/no pairs: two yes, two no
    cls = pick(rng, [c for c in classes if public(c.name) and len(c.bases) == 1
                     and re.fullmatch(r"[A-Za-z]\w+", c.bases[0])
                     and c.bases[0] not in ("object", "Exception")
                     and (c.bases[0] in defined) == want and _once(source, "class", c.name)])
    base = cls.bases[0]
    if want and not _once(source, "class", base):
        raise Skip("the base is defined twice")
    q1 = f"`context` is the module `{mod}`. Which class does `{cls.name}` inherit from?"
    q2 = "Is that base class defined in this same module? Yes or no."
    return f"stdlib:{mod[:-3]}", q1, q2, source, name(base), yes_no(want)


pair("10-def-file/top-functions", "stdlib")(def_file_pair("importlib"))
pair("11-method-owner/method-count", "stdlib")(method_owner_pair("concurrent"))


# -- dpkg status records ---------------------------------------------------------------------
def _raw(recs: Sequence[Any]) -> str:
    return "\n\n".join(r.raw for r in recs) + "\n"


@pair("12-largest-package/version", "dpkg")
def largest_version(rng: random.Random) -> Draw:
    """The package with the largest Installed-Size among one section's records (raw text)
    -> its Version."""
    recs = records(SPLIT)
    sections = Counter(r.fields.get("Section", "") for r in recs)
    sec = pick(rng, sorted(s for s, n in sections.items() if s and 8 <= n <= 40))
    mine = [r for r in recs if r.fields.get("Section") == sec]
    best = unique_best({r.name: r.size() for r in mine})
    rec = next(r for r in mine if r.name == best)
    q1 = ("`context` is an excerpt of a dpkg status file, one paragraph per package. Which "
          "of these packages needs the most disk space according to its Installed-Size?")
    q2 = "Which version of that package is installed?"
    return ("dpkg-status", q1, q2, _raw(mine), name(best, [r.name for r in mine]),
            text(rec.fields["Version"]))


@pair("13-dependents/largest", "dpkg")
def dependents_largest(rng: random.Random) -> Draw:
    """Which packages (list of field dicts) name X in their Depends (3-6 of them; a text
    search of the Depends fields finds the same)? -> which of those is the largest?"""
    recs = records(SPLIT)
    users: dict[str, list[Any]] = {}
    for r in recs:
        for d in depends_names(r.fields.get("Depends", "")):
            users.setdefault(d, []).append(r)
    dep = pick(rng, sorted(d for d, rs in users.items() if 3 <= len(rs) <= 6 and len(d) >= 4))
    mine = users[dep]
    loose = [r for r in recs if re.search(rf"(?<![\w.+-]){re.escape(dep)}(?![\w.+-])",
                                          r.fields.get("Depends", ""))]
    if len(loose) != len(mine):
        raise Skip("a text search would find others")
    best = unique_best({r.name: r.size() for r in mine})
    q1 = (f"Every item of `context` is one installed package's control fields, as a dict. "
          f"Which packages mention `{dep}` in their `Depends` field?")
    q2 = "Of those, which has the largest Installed-Size?"
    others = [r.name for r in recs if r not in mine and r.name != dep]
    return ("dpkg-status", q1, q2, record_dicts(recs), names([r.name for r in mine], others),
            name(best, [r.name for r in mine]))


@pair("14-maintainer/package-count", "dpkg")
def maintainer_count(rng: random.Random) -> Draw:
    """The Maintainer (name, no e-mail) of package P (dict name -> record) -> how many
    packages that maintainer has (2-20; one e-mail; the name in no other Maintainer)."""
    recs = records(SPLIT)
    by = Counter(r.maintainer_name() for r in recs)
    rec = pick(rng, [r for r in recs if len(r.maintainer_name()) >= 6
                     and 2 <= by[r.maintainer_name()] <= 20])
    who = rec.maintainer_name()
    mine = [r for r in recs if r.maintainer_name() == who]
    if (len({r.fields["Maintainer"] for r in mine}) != 1
            or sum(who in r.fields.get("Maintainer", "") for r in recs) != len(mine)):
        raise Skip("maintainer ambiguous")
    q1 = (f"`context` maps package names to their dpkg status records. Who is the Maintainer "
          f"of `{rec.name}`? Just the name, without the e-mail address.")
    q2 = "How many packages in `context` are maintained by that same maintainer?"
    return ("dpkg-status", q1, q2, {r.name: r.raw for r in recs}, name(who),
            number(len(mine), q2))


@pair("15-smallest-in-section/dependencies", "dpkg")
def smallest_dependencies(rng: random.Random) -> Draw:
    """The smallest package (Installed-Size) of section S (list of record strings) -> how
    many packages its Depends field names (comma entries = names, 2 or more)."""
    recs = records(SPLIT)
    sections = Counter(r.fields.get("Section", "") for r in recs)
    sec = pick(rng, sorted(s for s, n in sections.items() if s and 4 <= n <= 30))
    mine = [r for r in recs if r.fields.get("Section") == sec]
    best = unique_best({r.name: r.size() for r in mine}, largest=False)
    rec = next(r for r in mine if r.name == best)
    deps = rec.fields.get("Depends", "")
    n = len(depends_names(deps))
    if n < 2 or n != len(deps.split(",")):
        raise Skip("few dependencies, or alternatives make the count ambiguous")
    q1 = (f"`context` is a list of dpkg status records, one string per package. Among the "
          f"packages filed in section `{sec}`, which one has the smallest Installed-Size?")
    q2 = "How many packages does it name in its Depends field?"
    return ("dpkg-status", q1, q2, [r.raw for r in recs], name(best, [r.name for r in mine]),
            number(n, q2))


@pair("16-essential/total-size", "dpkg")
def essential_total(rng: random.Random) -> Draw:
    """Which packages of a run of records (raw text) are ``Essential: yes`` (3-6)? -> their
    total Installed-Size."""
    recs = records(SPLIT)
    size = rng.randint(60, 140)
    start = rng.randrange(0, max(1, len(recs) - size))
    mine = recs[start:start + size]
    ess = [r for r in mine if r.fields.get("Essential") == "yes"]
    if not 3 <= len(ess) <= 6:
        raise Skip("too few or too many essential packages")
    q1 = ("`context` is a piece of a dpkg status file. Which of the packages in it are "
          "marked `Essential: yes`?")
    q2 = ("What do the Installed-Size values of those packages add up to? Add the numbers "
          "as they are written.")
    others = [r.name for r in mine if r not in ess]
    return ("dpkg-status", q1, q2, _raw(mine), names([r.name for r in ess], others),
            number(sum(r.size() for r in ess), q2))


@pair("17-version/pre-depends", "dpkg")
def version_pre_depends(rng: random.Random) -> Draw:
    """Which package (dict name -> record) is at version V (unique)? -> does it have a
    Pre-Depends field?  (No.)"""
    recs = records(SPLIT)
    whole = _raw(recs)
    want = False  # the yes/no pairs: two yes, two no
    rec = pick(rng, [r for r in recs if ("Pre-Depends" in r.fields) == want
                     and len(r.fields["Version"]) >= 4
                     and len(re.findall(rf"\b{re.escape(r.fields['Version'])}\b", whole)) == 1])
    q1 = (f"`context` maps package names to dpkg status records. Which package is installed "
          f"at version `{rec.fields['Version']}`?")
    q2 = "Does that package's record have a `Pre-Depends` field? Yes or no."
    return "dpkg-status", q1, q2, {r.name: r.raw for r in recs}, name(rec.name), yes_no(want)


# -- licence texts ----------------------------------------------------------------------------
# Phrases naming a licence would give the first answer away.
_NAMES_LICENCE = re.compile(r"(?i)\bversion\s+\d|\bv\d|gnu|gpl|mozilla|apache|artistic|bsd|"
                            r"creative\s+commons|cc0|documentation\s+license|public\s+license|"
                            r"lesser|library|berkeley|regents|netscape|free\s+software")


def _docs() -> dict[str, str]:
    return dict(need(licenses(SPLIT)))


@pair("18-phrase/line-count", "licences")
def phrase_lines(rng: random.Random) -> Draw:
    """Which licence (dict) contains a phrase (4-6 words of one line, in no other licence,
    naming none)? -> how many lines it has (``splitlines`` or ``split("\\n")``)."""
    docs = _docs()
    lic = pick(rng, sorted(n for n, t in docs.items() if plain_lines(t)))
    line = pick(rng, [s for raw in docs[lic].split("\n") if len((s := raw.strip()).split()) >= 6
                      and not _NAMES_LICENCE.search(s)])
    words = line.split()
    k = rng.randint(4, 6)
    at = rng.randrange(0, len(words) - k + 1)
    phrase = " ".join(words[at:at + k])
    if len(phrase) < 20 or sum(phrase in t for t in docs.values()) != 1 \
            or not re.search(r"[A-Za-z]{4}", phrase):
        raise Skip("phrase too short or not unique")
    q1 = f"Which licence in `context` (name -> text) contains the words \"{phrase}\"?"
    q2 = "How many lines long is that licence text?"
    body = docs[lic]
    return ("licenses", q1, q2, docs, file_name(lic, list(docs)),
            numbers([len(body.splitlines()), len(body.split("\n"))], q2))


@pair("19-most-uses/lines-with-word", "licences")
def most_uses(rng: random.Random) -> Draw:
    """The licence (dict) where word W occurs most often (whole word, any case; W in 3 or
    more; unique winner) -> on how many lines of it W occurs."""
    docs = _docs()
    stats = {n: word_stats(t) for n, t in docs.items()}
    words = sorted({w for occ, _ in stats.values() for w in occ
                    if sum(w in o for o, _ in stats.values()) >= 3})
    word = pick(rng, words)
    best = unique_best({n: occ[word] for n, (occ, _) in stats.items()})
    lines = stats[best][1][word]
    if lines < 2 or word in best.lower():
        raise Skip("too rare, or the word names the licence")
    q1 = (f"In which of the licences in `context` does the word \"{word}\" occur the greatest "
          "number of times (as a whole word, in any letter case)?")
    q2 = "On how many different lines of that licence does the word appear?"
    return "licenses", q1, q2, docs, file_name(best, list(docs)), number(lines, q2)


@pair("20-licences-with-word/shortest", "licences")
def word_shortest(rng: random.Random) -> Draw:
    """Which licences (dict) contain word W (2-4 of them)? -> the shortest of those, in
    characters."""
    docs = _docs()
    occ = {n: word_stats(t)[0] for n, t in docs.items()}
    word = pick(rng, sorted({w for o in occ.values() for w in o
                             if 2 <= sum(w in x for x in occ.values()) <= 4}))
    have = [n for n in docs if word in occ[n]]
    shortest = min(have, key=lambda n: len(docs[n]))
    q1 = (f"Which of the licence texts in `context` contain the word \"{word}\" (whole word, "
          "ignoring case)? List their names.")
    q2 = "Which of those is the shortest one, by number of characters?"
    others = [n for n in docs if n not in have]
    return "licenses", q1, q2, docs, names(have, others), name(shortest, have)


@pair("21-most-nonblank/has-word", "licences")
def most_nonblank(rng: random.Random) -> Draw:
    """The licence (one string, ``=== LICENSE FILE: NAME`` headers) with the most non-blank
    lines -> does word W occur in it?  (Yes: W is one of its words.)"""
    docs = _docs()
    best = unique_best({n: sum(1 for x in t.split("\n") if x.strip()) for n, t in docs.items()})
    mine = set(word_stats(docs[best])[0])
    want = True  # the yes/no pairs: two yes, two no
    pool = mine if want else {w for t in docs.values() for w in word_stats(t)[0]} - mine
    word = pick(rng, sorted(w for w in pool if len(w) >= 6))
    q1 = ("`context` joins several licence texts, each after a line `=== LICENSE FILE: NAME`. "
          "Which licence has the most non-blank lines?")
    q2 = f"Does the word \"{word}\" occur in that licence (whole word, any case)? Yes or no."
    return ("licenses", q1, q2, concat(docs, "licence"), file_name(best, list(docs)),
            yes_no(want))


# -- Debian changelogs ------------------------------------------------------------------------
def _logs() -> dict[str, Changelog]:
    return dict(need(changelogs(SPLIT)))


def _log_sample(rng: random.Random, low: int = 8, high: int = 10,
                max_chars: int = 15_000) -> dict[str, Changelog]:
    logs = _logs()
    small = sorted(f for f, c in logs.items() if 1_500 <= len(c.text) <= max_chars)
    if len(small) < low:
        raise Skip("too few changelogs")
    return {f: logs[f] for f in sorted(rng.sample(small, rng.randint(low, high)))}


def _signed(entries: Sequence[Any], who: str) -> int:
    """Entries signed by ``who``; Skip if a substring search of the sign-off lines differs."""
    exact = sum(e.signer == who for e in entries)
    if exact != sum(who in e.text.rsplit("\n", 1)[-1] for e in entries):
        raise Skip("signer name ambiguous")
    return exact


@pair("22-most-entries/newest-signer", "changelogs")
def most_entries_signer(rng: random.Random) -> Draw:
    """The changelog of a sample (dict) with the most entries -> who signed its newest."""
    sample = _log_sample(rng)
    best = unique_best({f: len(c.entries) for f, c in sample.items()})
    q1 = ("`context` maps package names to the text of their Debian changelog. Which "
          "package's changelog is made of the largest number of entries?")
    q2 = "Who signed off the newest entry of that changelog? Give the person's name."
    return ("debian-changelogs", q1, q2, {f: c.text for f, c in sample.items()},
            name(best, list(sample)), name(sample[best].entries[0].signer))


@pair("23-version-entry/entry-count", "changelogs")
def version_entries(rng: random.Random) -> Draw:
    """Which changelog of a sample (dict) has an entry for version V (``(V)`` in one text
    only, V nowhere else)? -> how many entries that changelog has (3 or more)."""
    sample = _log_sample(rng)
    folder = pick(rng, sorted(f for f, c in sample.items() if len(c.entries) >= 3))
    version = pick(rng, [e.version for e in sample[folder].entries[1:] if len(e.version) >= 4])
    if sum(version in c.text for c in sample.values()) != 1 \
            or sample[folder].text.count(f"({version})") != 1:
        raise Skip("version not unique")
    q1 = (f"`context` maps package names to Debian changelogs. Which package's changelog has "
          f"an entry for version `{version}`?")
    q2 = "How many entries does that changelog contain in total?"
    return ("debian-changelogs", q1, q2, {f: c.text for f, c in sample.items()},
            name(folder, list(sample)), number(len(sample[folder].entries), q2))


@pair("24-top-signer/latest-version", "changelogs")
def top_signer_version(rng: random.Random) -> Draw:
    """Who signed off the most entries of one changelog (str; unique; not the newest
    entry's signer)? -> the version of that person's most recent entry."""
    logs = _logs()
    log = logs[pick(rng, sorted(f for f, c in logs.items() if 8 <= len(c.entries) <= 80
                                and len(c.text) <= 40_000))]
    counts = {s: _signed(log.entries, s) for s in {e.signer for e in log.entries}}
    who = unique_best(counts)
    if log.entries[0].signer == who:
        raise Skip("the newest entry is theirs: the follow-up would be trivial")
    version = next(e.version for e in log.entries if e.signer == who)
    q1 = (f"`context` is the Debian changelog of `{log.folder}`. Which person signed off the "
          "largest number of its entries?")
    q2 = "What is the version of the most recent entry that this person signed off?"
    return "debian-changelogs", q1, q2, log.text, name(who), text(version)


@pair("25-oldest-signer/entry-count", "changelogs")
def oldest_signer_count(rng: random.Random) -> Draw:
    """Who signed off the oldest entry of one changelog (list of entry strings, newest
    first)? -> how many entries that person signed off (2 or more, not all)."""
    logs = _logs()
    log = logs[pick(rng, sorted(f for f, c in logs.items() if 6 <= len(c.entries) <= 120
                                and len(c.text) <= 60_000))]
    who = log.entries[-1].signer
    n = _signed(log.entries, who)
    if not 2 <= n < len(log.entries):
        raise Skip("one entry, or all of them")
    q1 = (f"`context` lists the entries of the Debian changelog of `{log.folder}`, one string "
          "per entry, newest first. Who signed off the oldest entry?")
    q2 = "How many of the entries did that same person sign off altogether?"
    return "debian-changelogs", q1, q2, [e.text for e in log.entries], name(who), number(n, q2)


# -- building the set -------------------------------------------------------------------------
def _draw(pid: str, make: Callable[[random.Random], Draw]) -> Draw:
    for attempt in range(ATTEMPTS):
        try:
            return make(random.Random(f"{SEED}/followups/{pid}/{attempt}"))
        except Unavailable:
            raise
        except Skip:
            continue
    raise Unavailable(f"no draw for {pid}")


def refers_back(p: Pair) -> bool:
    """The second question points back (``that``, ``those``, ``it`` ...) and does not name
    the first answer."""
    return bool(REFERS.search(p.second)) and not any(
        checks.check_name(p.second, n) for n in p.names1)


@cache
def _build() -> tuple[Pair, ...]:
    pairs = []
    for pid, kind, make in MAKERS:
        try:
            source, q1, q2, context, a1, a2 = _draw(pid, make)
        except Unavailable:
            continue
        p = Pair(pid, kind, source, q1, q2, context, a1.text, a2.text, a1.check, a2.check,
                 a1.names or (a1.text,))
        if not refers_back(p):
            raise AssertionError(f"{pid}: the second question must refer to the first answer")
        pairs.append(p)
    return tuple(pairs)


def load_pairs() -> list[Pair]:
    """The pairs that this machine's sources allow, in id order; fresh copies of the
    contexts on every call (a run that changes its ``context`` cannot change a later one)."""
    return [replace(p, context=copy.deepcopy(p.context)) for p in _build()]


# -- running ----------------------------------------------------------------------------------
@dataclass
class Outcome:
    """One run of one question."""

    correct: bool
    answer: str | None
    steps: int
    seconds: float
    first_prompt_tokens: int  # prompt tokens of the run's first root call (0: none made)
    stopped_by: str
    told_history: bool  # its first root prompt told the earlier tasks
    error: str | None = None
    trace: list[dict[str, str]] | None = None  # steps (reasoning, code, output), for --save
    copied: int = 0  # steps whose code is, normalised, a step of the pair's first run
    written: list[str] = field(default_factory=list)  # code of every root reply (run or not)
    wrote_copy: int = 0  # root replies whose code is a step of the first run (run or not)


@dataclass
class PairOutcome:
    pair: Pair
    first: Outcome
    with_conv: Outcome
    without: Outcome


NewRLM = Callable[[RLMConfig], RLM]
"""Builds the RLM a run uses from its config (the real model, or a scripted one in tests)."""


def judge(check: Check, answer: str | None) -> bool:
    try:
        return bool(check(answer))
    except Exception:  # noqa: BLE001 - a broken checker must not stop the bench
        return False


def first_root_tokens(res: Any) -> int:
    """Prompt tokens of the run's first top-level root-model call (``LLMCall.role`` is
    ``"root"`` for a step, ``"sub"`` for ``llm_query``, ``"final"`` for the answer-now call)."""
    return next((c.prompt_tokens for c in res.calls if c.role == "root" and c.depth == 0), 0)


def run_one(rlm: RLM, question: str, context: Any, check: Check, executor: PlainExecutor,
            history: Conversation | None) -> tuple[Outcome, Any]:
    """One run; never raises (but Ctrl-C).  (outcome, result or None)."""
    start = time.perf_counter()
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            res = rlm.run(question, context=context, executor=executor, history=history)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - recorded as a wrong answer
        return Outcome(False, None, 0, time.perf_counter() - start, 0, "error", False,
                       f"{type(exc).__name__}: {exc}"), None
    if res.stopped_by == "interrupt":
        raise KeyboardInterrupt
    first = res.root_prompts[0][-1]["content"] if res.root_prompts else ""
    answer = None if res.answer is None else str(res.answer)
    trace = [{"reasoning": e.reasoning, "code": e.code, "output": e.output[:1500]}
             for e in res.history]
    written = ["\n\n".join(extract_code_blocks(x.get("response", ""))[:1])
               for x in res.exchanges if x.get("role") == "root" and x.get("depth") == 0]
    return Outcome(judge(check, answer), answer, res.steps, time.perf_counter() - start,
                   first_root_tokens(res), res.stopped_by,
                   "Earlier tasks in this session" in first, res.error, trace,
                   written=written), res


SKIPPED = "skipped"
"""``Outcome.stopped_by`` of a run ``--skip-without`` did not make."""


def run_pair(p: Pair, new_rlm: NewRLM, config: RLMConfig, *,
             without_history: bool = True) -> PairOutcome:
    """The first question with a new conversation, then the second one with it (the same
    executor, ``history=conv``) and without it (a new executor, no history; not run when
    ``without_history`` is False: its outcome says :data:`SKIPPED`)."""
    rlm = new_rlm(config)
    ex, conv = PlainExecutor(), Conversation()
    first, res = run_one(rlm, p.first, p.context, p.check1, ex, conv)
    if res is not None:
        conv.record(res, ex.namespace, key="1")
    with_conv, _ = run_one(rlm, p.second, p.context, p.check2, ex, conv)
    if without_history:
        without, _ = run_one(rlm, p.second, copy.deepcopy(p.context), p.check2,
                             PlainExecutor(), None)
    else:
        without = Outcome(False, None, 0, 0.0, 0, SKIPPED, False)
    earlier = {without_comments(s["code"]) for s in first.trace or ()} - {""}
    for run in (with_conv, without):
        run.copied = sum(without_comments(s["code"]) in earlier for s in run.trace or ())
        run.wrote_copy = sum(without_comments(c) in earlier for c in run.written)
    return PairOutcome(p, first, with_conv, without)


def saved(o: PairOutcome) -> dict[str, Any]:
    """A pair's outcome as JSON-ready data (``--save``): the pair without its context."""
    p = o.pair
    return {"id": p.id, "kind": p.kind, "source": p.source, "first": p.first,
            "second": p.second, "expected1": p.expected1, "expected2": p.expected2,
            **{name: asdict(run) for name, run in (("first_run", o.first),
                                                   ("with", o.with_conv),
                                                   ("without", o.without))}}


@dataclass
class ChainPoint:
    earlier: int           # tasks in the conversation before the probe
    prompt_tokens: int     # of the probe's first root call
    section_chars: int     # the history section as told (compacted)
    uncompacted_chars: int  # every earlier task in full, nothing left out


def run_chain(pairs: Sequence[Pair], n: int, new_rlm: NewRLM, config: RLMConfig,
              points: Sequence[int] = CHAIN_POINTS) -> list[ChainPoint]:
    """One conversation over the first questions of ``pairs[:n]`` (one executor, as in a
    notebook); after ``k`` of them (k in ``points``), a probe (the first question of
    ``pairs[n]``, stopped after its first model call) measures the first prompt."""
    rlm = new_rlm(config)
    probe_rlm = new_rlm(config.replace(max_llm_calls=1, max_step_tokens=8))
    probe = pairs[n]
    ex, conv = PlainExecutor(), Conversation()
    out = []
    for k in range(n + 1):
        if k in points:
            outcome, _ = run_one(probe_rlm, probe.first, copy.deepcopy(probe.context),
                                 probe.check1, PlainExecutor(), conv)
            section = conv.prompt_section() or ""
            full = Conversation(conv.tasks, keep_full=len(conv) + 1,
                                max_chars=10**9).prompt_section() or ""
            out.append(ChainPoint(k, outcome.first_prompt_tokens, len(section), len(full)))
        if k < n:
            p = pairs[k]
            _, res = run_one(rlm, p.first, copy.deepcopy(p.context), p.check1, ex, conv)
            if res is not None:
                conv.record(res, ex.namespace, key=p.id)
    return out


# -- the tables -------------------------------------------------------------------------------
def _mean(values: Sequence[float]) -> float:
    return statistics.mean(values) if values else 0.0


ROW_HEAD = (f"{'pair':<34} {'1st':<3} {'2nd':>3} | {'w/o':<3} {'steps':>5} {'seconds':^11} "
            "expected 1 -> answer ; expected 2 -> answer with | without [stopped by]")


def print_row(o: PairOutcome) -> None:
    ok = {True: "yes", False: "NO"}
    w, wo = o.with_conv, o.without
    wo_ok = "-" if wo.stopped_by == SKIPPED else ok[wo.correct]
    line = (f"{one_line(o.pair.id, 34):<34} {ok[o.first.correct]:<3} {ok[w.correct]:>3} | "
            f"{wo_ok:<3} {w.steps:>2}|{wo.steps:<2} {w.seconds:>5.0f}|{wo.seconds:<5.0f} "
            f"{one_line(o.pair.expected1, 30)} -> {one_line(o.first.answer, 40)} ; "
            f"{one_line(o.pair.expected2, 24)} -> {one_line(w.answer, 40)} | "
            f"{one_line(wo.answer, 40)} [{w.stopped_by}|{wo.stopped_by}]"
            f" copies ran {w.copied}|{wo.copied} written {w.wrote_copy}|{wo.wrote_copy}")
    errors = [e for e in (o.first.error, w.error, wo.error) if e]
    if errors:
        line += f" error: {one_line(errors[0], 120)}"
    print(line, flush=True)


HEAD = (f"{'pairs':>5} {'1st ok':>7} | {'2nd ok':>13} | {'steps':>11} | {'seconds':>13} | "
        f"{'first prompt tokens':>23} | {'copy earlier':>13}")
SUB = (f"{'':>5} {'':>7} | {'with':>6} {'w/o':>6} | {'with':>5} {'w/o':>5} | {'with':>6} "
       f"{'w/o':>6} | {'with':>6} {'w/o':>6} {'ratio':>9} | {'with':>6} {'w/o':>6}")


def cells(group: Sequence[PairOutcome]) -> str:
    if not group:
        return f"{0:>5}"
    n = len(group)
    w = [o.with_conv for o in group]
    wo = [o.without for o in group if o.without.stopped_by != SKIPPED]
    if not wo:  # --skip-without
        return (f"{n:>5} {f'{sum(o.first.correct for o in group)}/{n}':>7} | "
                f"{f'{sum(o.correct for o in w)}/{n}':>6} {'-':>6} | "
                f"{_mean([o.steps for o in w]):>5.2f} {'-':>5} | "
                f"{_mean([o.seconds for o in w]):>6.1f} {'-':>6} | "
                f"{_mean([o.first_prompt_tokens for o in w]):>6.0f} {'-':>6} {'-':>9} | "
                f"{f'{sum(o.copied + o.wrote_copy > 0 for o in w)}/{n}':>6} {'-':>6}")
    tw, two = _mean([o.first_prompt_tokens for o in w]), _mean([o.first_prompt_tokens for o in wo])
    ratio = f"{tw / two:.2f}x" if two else "-"
    return (f"{n:>5} {f'{sum(o.first.correct for o in group)}/{n}':>7} | "
            f"{f'{sum(o.correct for o in w)}/{n}':>6} {f'{sum(o.correct for o in wo)}/{n}':>6} | "
            f"{_mean([o.steps for o in w]):>5.2f} {_mean([o.steps for o in wo]):>5.2f} | "
            f"{_mean([o.seconds for o in w]):>6.1f} {_mean([o.seconds for o in wo]):>6.1f} | "
            f"{tw:>6.0f} {two:>6.0f} {ratio:>9} | "
            f"{f'{sum(o.copied + o.wrote_copy > 0 for o in w)}/{n}':>6} "
            f"{f'{sum(o.copied + o.wrote_copy > 0 for o in wo)}/{n}':>6}")


def print_table(outcomes: Sequence[PairOutcome]) -> None:
    kinds = [k for k in KINDS if any(o.pair.kind == k for o in outcomes)]
    width = max([len("TOTAL"), *(len(k) for k in kinds)])
    print("second question: with the conversation (same executor, history=conv) | without "
          "(new executor, no history); copy earlier: second runs with a reply whose code is, "
          "without comments and spacing, a step of the first run (whether it ran or a "
          "repetition check stopped it)")
    print(f"{'kind':<{width}} | {HEAD}")
    print(f"{'':<{width}} | {SUB}")
    rule = "-" * (width + 3 + len(SUB))
    print(rule)
    for kind in kinds:
        print(f"{kind:<{width}} | {cells([o for o in outcomes if o.pair.kind == kind])}")
    print(rule)
    print(f"{'TOTAL':<{width}} | {cells(outcomes)}")


def print_chain(points: Sequence[ChainPoint], probe: Pair) -> None:
    print(f"\nprompt tokens of a task's first root call after N earlier tasks in one "
          f"conversation (probe: the first question of {probe.id}, stopped after that call)")
    print(f"{'earlier tasks':>13} | {'prompt tokens':>13} | {'history chars':>13} | "
          f"{'uncompacted chars':>17}")
    print("-" * 66)
    for pt in points:
        print(f"{pt.earlier:>13} | {pt.prompt_tokens:>13} | {pt.section_chars:>13} | "
              f"{pt.uncompacted_chars:>17}")
    conv = Conversation()
    print(f"compaction is what keeps it flat: the newest {conv.keep_full} tasks are told in "
          f"full, older ones in one line each, the section at most {conv.max_chars:,} "
          "characters (the rest stays in rlm_history)")


def compare(before: str, after: str) -> None:
    """Print two ``--save`` files side by side, pair by pair (the pairs in both, in the
    order of ``before``): whether the second question was right with the conversation,
    its answer, steps, seconds and the prompt tokens of its first root call, then the
    totals.  For a change to what a follow-up is told, measured before and after on the
    same pairs (``--compare BEFORE.jsonl AFTER.jsonl``)."""
    def load(path: str) -> dict[str, dict[str, Any]]:
        with open(path, encoding="utf-8") as f:
            return {row["id"]: row for row in map(json.loads, filter(str.strip, f))}

    old, new = load(before), load(after)
    ids = [i for i in old if i in new]
    ok = {True: "yes", False: "NO"}
    print(f"second question with the conversation: {before} | {after} "
          f"({len(ids)} pairs in both)")
    print(f"{'pair':<34} {'expected':<16} | {'right':^9} | {'answer':^33} | {'steps':^5} | "
          f"{'seconds':^9} | {'prompt tokens':^11} | 1st right")
    for i in ids:
        a, b = old[i]["with"], new[i]["with"]
        print(f"{one_line(i, 34):<34} {one_line(old[i]['expected2'], 16):<16} | "
              f"{ok[a['correct']]:>4}|{ok[b['correct']]:<4} | "
              f"{one_line(a['answer'], 16):>16}|{one_line(b['answer'], 16):<16} | "
              f"{a['steps']:>2}|{b['steps']:<2} | {a['seconds']:>4.0f}|{b['seconds']:<4.0f} | "
              f"{a['first_prompt_tokens']:>5}|{b['first_prompt_tokens']:<5} | "
              f"{ok[old[i]['first_run']['correct']]}|{ok[new[i]['first_run']['correct']]}")
    n = len(ids)

    def total(rows: dict[str, dict[str, Any]], key: str) -> float:
        return _mean([rows[i]["with"][key] for i in ids])

    right = (f"{sum(old[i]['with']['correct'] for i in ids)}/{n}|"
             f"{sum(new[i]['with']['correct'] for i in ids)}/{n}")
    print(f"{'TOTAL':<34} {'':<16} | {right:^9} | {'':^33} | "
          f"{total(old, 'steps'):.1f}|{total(new, 'steps'):.1f} | "
          f"{total(old, 'seconds'):.0f}|{total(new, 'seconds'):.0f} | "
          f"{total(old, 'first_prompt_tokens'):.0f}|{total(new, 'first_prompt_tokens'):.0f} | "
          f"{sum(old[i]['first_run']['correct'] for i in ids)}|"
          f"{sum(new[i]['first_run']['correct'] for i in ids)}")


# -- main -------------------------------------------------------------------------------------
def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--pairs", type=int, default=None, metavar="N",
                        help="run the first N pairs (default: all)")
    parser.add_argument("--model", default=None, help="litellm model (default: embedded)")
    parser.add_argument("--max-iterations", type=int, default=8)
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                        help="RLMConfig override (repeatable)")
    parser.add_argument("--chain", type=int, default=6, metavar="N",
                        help="first questions chained into one conversation for the prompt "
                             "size measurement (0: skip; default 6)")
    parser.add_argument("--rows", action="store_true", help="print one line per pair")
    parser.add_argument("--save", default=None, metavar="FILE.jsonl",
                        help="write each pair's outcome (answers, steps' code) as a JSON line")
    parser.add_argument("--skip-without", action="store_true",
                        help="do not ask the second question without the conversation "
                             "(a change to what follow-ups are told leaves it as it was)")
    parser.add_argument("--compare", nargs=2, default=None, metavar=("BEFORE", "AFTER"),
                        help="print two --save files side by side and exit (no model)")
    args = parser.parse_args(argv)
    if args.compare:
        return args
    if args.pairs is not None and args.pairs < 1:
        parser.error("--pairs must be at least 1")
    if args.chain < 0:
        parser.error("--chain must be 0 or more")
    try:
        args.settings = parse_settings(args.sets)
        args.config = our_config(args)
    except (ValueError, TypeError) as exc:
        parser.error(str(exc))
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.compare:
        compare(*args.compare)
        return 0
    pairs = load_pairs()
    if len(pairs) <= args.chain:
        print(f"bench_followups: --chain {args.chain} needs more than {args.chain} pairs "
              f"({len(pairs)} on this machine)", file=sys.stderr)
        return 2
    chosen = pairs[:args.pairs] if args.pairs else pairs
    model_name = args.model or "embedded"
    if is_embedded(args.model):
        from rlm_kernel.models.local.server import ensure_server

        short = args.model.split("/", 1)[1] if args.model and "/" in args.model else None
        server = ensure_server(short)  # started once, before any timing
        model_name = f"embedded {server.model} at {server.api_base} (n_ctx {server.n_ctx})"
    cfg = args.config
    counts = ", ".join(f"{k} {sum(p.kind == k for p in chosen)}" for k in KINDS)
    print(f"{len(chosen)} pairs over the eval's {SPLIT} sources ({counts}); "
          f"chain of {args.chain} tasks")
    print(f"model: {model_name}; temperature {cfg.temperature:g}; "
          f"max iterations {cfg.max_iterations}")
    if args.settings:
        print("settings: " + ", ".join(f"{k}={v!r}" for k, v in args.settings.items()))
    print(flush=True)

    def new_rlm(config: RLMConfig) -> RLM:
        return RLM(args.model, config=config)

    outcomes: list[PairOutcome] = []
    chain: list[ChainPoint] = []
    interrupted = False
    tty = sys.stderr.isatty()
    save = open(args.save, "w", encoding="utf-8") if args.save else None
    if args.rows:
        print(ROW_HEAD, flush=True)
    try:
        for n, p in enumerate(chosen, 1):
            outcomes.append(run_pair(p, new_rlm, cfg, without_history=not args.skip_without))
            if save is not None:
                save.write(json.dumps(saved(outcomes[-1]), default=str) + "\n")
                save.flush()
            if args.rows:
                print_row(outcomes[-1])
            else:
                print(f"[{n}/{len(chosen)}] pairs", file=sys.stderr, end="\r" if tty else "\n",
                      flush=True)
        if args.chain:
            print(f"[chain of {args.chain}]", file=sys.stderr, flush=True)
            chain = run_chain(pairs, args.chain, new_rlm, cfg)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        if save is not None:
            save.close()
    print()
    print_table(outcomes)
    if chain:
        print_chain(chain, pairs[args.chain])
    right = [o for o in outcomes if o.first.correct]
    print(f"\nsecond question correct when the first answer was right: with "
          f"{sum(o.with_conv.correct for o in right)}/{len(right)}, without "
          f"{sum(o.without.correct for o in right)}/{len(right)}; yes/no second questions "
          f"(a guess is right half the time): {sum(p.expected2 in ('yes', 'no') for p in chosen)}"
          f" of {len(chosen)}")
    runs = [r for o in outcomes for r in (o.first, o.with_conv, o.without)]
    print(f"runs that ended in an error: {sum(r.stopped_by == 'error' for r in runs)} of "
          f"{len(runs)}; second runs whose first prompt told the earlier task: with "
          f"{sum(o.with_conv.told_history for o in outcomes)}/{len(outcomes)}, without "
          f"{sum(o.without.told_history for o in outcomes)}/{len(outcomes)}")
    if interrupted:
        print(f"interrupted: pairs done {len(outcomes)}/{len(chosen)}")
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
