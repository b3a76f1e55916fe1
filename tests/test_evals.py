"""The generalisation eval (``evals/``): its splits, its sources and its answer checks.

Fast: builds both splits (a few seconds) and never runs a model.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from evals import KINDS, SEED, Task, checks, load_split, sources
from evals import tasks as tasks_module

ROOT = Path(__file__).resolve().parents[1]
REQUIRED_KINDS = {"locate", "count", "extreme", "multi-hop", "arithmetic", "aggregate",
                  "needle", "structure", "records", "yes-no", "compare"}
FORMS = {"str": str, "dict": dict, "list": list}


@pytest.fixture(scope="module")
def splits() -> dict[str, list[Task]]:
    """Both splits.  The four sources come with every Debian system that has Python
    (base-files, dpkg, the packages' docs): a missing one fails, naming it."""
    missing = [name for name, found in (
        ("stdlib", sources.stdlib_units("dev") and sources.stdlib_units("test")),
        ("licences", sources.licenses("dev") and sources.licenses("test")),
        ("dpkg status", sources.dpkg_records("dev") and sources.dpkg_records("test")),
        ("changelogs", sources.changelogs("dev") and sources.changelogs("test")),
    ) if not found]
    if missing:
        pytest.fail(f"eval sources missing on this machine: {', '.join(missing)} "
                    "(the eval needs a Debian system with Python)")
    return {s: load_split(s) for s in ("dev", "test")}


@pytest.fixture(scope="module")
def every(splits: dict[str, list[Task]]) -> list[Task]:
    return splits["dev"] + splits["test"]


def _digest(tasks: list[Task]) -> str:
    text = "\n".join(f"{t.id}\t{t.phrasing}\t{t.question}\t{t.expected}" for t in tasks)
    return hashlib.sha256(text.encode()).hexdigest()


# ---------------------------------------------------------------- the splits


def test_enough_tasks_kinds_and_ids(splits: dict[str, list[Task]], every: list[Task]) -> None:
    assert len(every) >= 150
    assert REQUIRED_KINDS <= set(KINDS) and len(KINDS) >= 11
    assert isinstance(SEED, int)
    for split, tasks in splits.items():
        per_kind = Counter(t.kind for t in tasks)
        assert set(per_kind) == set(KINDS), split
        assert min(per_kind.values()) >= 5, (split, per_kind)
        assert all(t.split == split and t.id.startswith(f"{split}-{t.kind}-") for t in tasks)
    ids = [t.id for t in every]
    assert len(ids) == len(set(ids))
    for t in every:
        assert t.question.strip() and t.expected.strip() and t.source
        assert t.phrasing.startswith(t.kind + "/")


def test_phrasings_vary_and_dev_test_do_not_share_any(splits: dict[str, list[Task]]) -> None:
    used = {s: defaultdict(set) for s in splits}
    forms = {s: defaultdict(set) for s in splits}
    for split, tasks in splits.items():
        for t in tasks:
            used[split][t.kind].add(t.phrasing)
            forms[split][t.kind].add(t.answer_form)
        for kind in KINDS:
            assert len(used[split][kind]) >= 3, (split, kind, used[split][kind])
            assert len(tasks_module.phrasings(split, kind)) >= 3
    dev_ids = {p for ps in used["dev"].values() for p in ps}
    test_ids = {p for ps in used["test"].values() for p in ps}
    assert not dev_ids & test_ids
    # Same kind, same split: the phrasings' question texts differ beyond a swapped word.
    for split, tasks in splits.items():
        by_phrasing = {t.phrasing: t.question for t in tasks}
        for kind in KINDS:
            starts = {by_phrasing[p][:30] for p in used[split][kind]}
            assert len(starts) == len(used[split][kind]), (split, kind)
    # Across both splits a kind asks for more than one answer form (where that makes sense).
    varied = [k for k in KINDS if len(forms["dev"][k] | forms["test"][k]) > 1]
    assert len(varied) >= 6, varied


def test_context_forms_and_sizes(splits: dict[str, list[Task]]) -> None:
    for split, tasks in splits.items():
        assert {t.context_form for t in tasks} == set(FORMS), split
        for t in tasks:
            assert isinstance(t.context, FORMS[t.context_form]), t.id
        sizes = [t.context_chars for t in tasks]
        assert max(sizes) >= 3_000_000, split
        assert min(sizes) <= 20_000, split
        for t in tasks:
            if t.kind == "needle":
                assert t.context_chars >= 3_000_000, t.id


def test_needles_are_deep(splits: dict[str, list[Task]]) -> None:
    """A needle quoted in the question is found once, well past the start of the context."""
    checked = 0
    for t in splits["dev"] + splits["test"]:
        if t.kind != "needle" or "\n\n    " not in t.question:
            continue
        line = t.question.split("\n\n    ")[1].split("\n\n")[0]
        text = t.context if isinstance(t.context, str) else "\n".join(
            t.context.values() if isinstance(t.context, dict) else t.context)
        assert text.count(line) == 1, t.id
        assert text.index(line) > 0.2 * len(text), t.id
        checked += 1
    assert checked >= 8


def test_sources_are_disjoint_between_splits(splits: dict[str, list[Task]]) -> None:
    dev_units, test_units = sources.stdlib_units("dev"), sources.stdlib_units("test")
    assert dev_units and test_units and not dev_units & test_units
    assert not (dev_units | test_units) & sources.RESERVED
    assert not set(sources.licenses("dev")) & set(sources.licenses("test"))
    dev_pkgs = {r.name for r in sources.dpkg_records("dev")}
    test_pkgs = {r.name for r in sources.dpkg_records("test")}
    assert not dev_pkgs & test_pkgs
    assert not set(sources.changelogs("dev")) & set(sources.changelogs("test"))
    for split, tasks in splits.items():
        assert len({t.source.split(":")[0] for t in tasks}) >= 3, split
        for t in tasks:
            if t.source.startswith("stdlib:") and t.source != "stdlib:all":
                assert t.source[7:] in sources.stdlib_units(split), t.id
            if isinstance(t.context, dict):
                keys = set(t.context)
                allowed = {"licenses": set(sources.licenses(split)),
                           "dpkg-status": {r.name for r in sources.dpkg_records(split)},
                           "debian-changelogs": set(sources.changelogs(split))}.get(t.source)
                if allowed is not None:
                    assert keys <= allowed, t.id
                else:
                    tops = {k.split("/")[0].removesuffix(".py") for k in keys}
                    assert tops <= sources.stdlib_units(split), t.id
            text = t.question + str(t.expected)
            assert not re.search(r"\b(email|json)/", text), t.id


def test_deterministic_and_fast(splits: dict[str, list[Task]]) -> None:
    for split in ("dev", "test"):
        t0 = time.perf_counter()
        fresh = list(tasks_module._build.__wrapped__(split, SEED))
        assert time.perf_counter() - t0 < 30
        assert _digest(fresh) == _digest(load_split(split))
    assert _digest(load_split("dev", SEED + 1)) != _digest(load_split("dev"))


def test_same_tasks_in_another_process_with_another_hash_seed(
        splits: dict[str, list[Task]]) -> None:
    code = ("import hashlib, evals\n"
            "for s in ('dev', 'test'):\n"
            "    ts = evals.load_split(s)\n"
            "    text = '\\n'.join(f'{t.id}\\t{t.phrasing}\\t{t.question}\\t{t.expected}' "
            "for t in ts)\n"
            "    print(hashlib.sha256(text.encode()).hexdigest())\n")
    env = dict(os.environ, PYTHONHASHSEED="12345", PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout.split()
    assert out == [_digest(load_split("dev")), _digest(load_split("test"))]


# ---------------------------------------------------------------- every task's check


def _wrong_answers(t: Task, every: list[Task]) -> list[str]:
    wrong = ["0", "I could not find it.", ""]
    if t.answer_form == "yes/no":
        wrong += ["no" if t.expected == "yes" else "yes", "maybe"]
    elif t.expected.isdigit():
        wrong += [str(int(t.expected) + 1), f"{t.expected}0", "Either 1 or 2."]
    else:
        same_form = [o.expected for o in every if o.answer_form == t.answer_form
                     and t.expected.lower() not in o.expected.lower()
                     and o.expected.lower() not in t.expected.lower()]
        wrong += same_form[:3]
        wrong += [o.expected for o in every if o.answer_form == "line number"][:1]
    return wrong


def test_every_check_accepts_the_expected_answer_and_rejects_wrong_ones(
        every: list[Task]) -> None:
    for t in every:
        assert t.check(t.expected), t.id
        assert t.check(f"  {t.expected}\n"), t.id
        assert not t.check(None), t.id
        for wrong in _wrong_answers(t, every):
            assert not t.check(wrong), (t.id, t.expected, wrong)


def test_every_check_accepts_a_sentence_around_the_answer(every: list[Task]) -> None:
    for t in every:
        if t.answer_form == "yes/no":
            sentence = f"{t.expected.capitalize()}, according to the context."
        elif t.answer_form == "text":
            sentence = f"It is {t.expected}."
        elif t.answer_form == "path":
            sentence = f"The file is `{t.expected}`."
        else:
            sentence = f"The answer is {t.expected}."
        assert t.check(sentence), (t.id, sentence)


def test_file_answers_accept_the_base_name_and_reject_other_files(every: list[Task]) -> None:
    for t in every:
        if t.answer_form == "path":
            assert t.check(t.expected.rsplit("/", 1)[-1]), t.id
            assert t.check("Lib/" + t.expected), t.id


# ---------------------------------------------------------------- checkers


def test_check_number() -> None:
    assert checks.check_number("The count is 429", 429)
    assert checks.check_number("429", 429)
    assert checks.check_number("429.0", 429)
    assert checks.check_number("1,234", 1234)
    assert checks.check_number("There are 1,234 of them.", 1234)
    assert checks.check_number("**17**", 17)
    assert not checks.check_number("[(1588, 'x'), (1614, 'y')]", 1614)
    assert not checks.check_number("42 or 43", 42)
    assert not checks.check_number("4290", 429)
    assert not checks.check_number("1.2.3", 2)
    assert not checks.check_number("12.5", 12)
    assert not checks.check_number(None, 1)
    assert not checks.check_number("", 1)
    # Integers that appear in the question do not count against the answer.
    q = "How many functions does version 3 of `cp1252.py` define?"
    assert checks.check_number("Version 3 of cp1252.py defines 17 functions", 17, q)
    assert not checks.check_number("Version 3 of cp1252.py defines 17 functions", 17)
    assert checks.check_number("cp1252.py defines 17 functions", 17)  # 1252 is part of a name
    assert checks.integers("v2 x3 1,000 7.0 8.5 9") == {1000, 7, 9}


def test_check_file() -> None:
    names = ["pkg/parse.py", "pkg/util.py", "pkg/sub/parser.py"]
    assert checks.check_file("pkg/parse.py", "pkg/parse.py", names)
    assert checks.check_file("parse.py", "pkg/parse.py", names)
    assert checks.check_file("It is defined in `pkg\\parse.py`.", "pkg/parse.py", names)
    assert checks.check_file("/usr/lib/python3/pkg/parse.py", "pkg/parse.py", names)
    assert not checks.check_file("parser.py", "pkg/parse.py", names)
    assert not checks.check_file("parse.py or util.py", "pkg/parse.py", names)
    assert not checks.check_file("42", "pkg/parse.py", names)
    assert not checks.check_file(None, "pkg/parse.py", names)
    lic = ["GPL-2", "GPL-3", "LGPL-2.1"]
    assert checks.check_file("GPL-2.", "GPL-2", lic)
    assert not checks.check_file("LGPL-2.1", "GPL-2", lic)
    assert not checks.check_file("GPL-3", "GPL-2", lic)


def test_check_name() -> None:
    assert checks.check_name("The class is `TestCase`.", "TestCase")
    assert checks.check_name("testcase", "TestCase")
    assert not checks.check_name("TestCaseMixin", "TestCase")
    assert not checks.check_name("libfoo-dev", "libfoo")
    assert checks.check_name("libfoo is larger", "libfoo", others=["libbar"])
    assert not checks.check_name("libfoo is larger than libbar", "libfoo", others=["libbar"])
    assert checks.check_name("Debian Python Team", "Debian Python Team")
    assert checks.check_name("@abstractmethod", "abc.abstractmethod",
                             alternatives=["abstractmethod"])
    assert checks.check_name("abc.abstractmethod", "abc.abstractmethod")
    assert not checks.check_name("classmethod", "abc.abstractmethod",
                                 alternatives=["abstractmethod"])
    assert not checks.check_name(None, "x")


def test_check_yes_no() -> None:
    assert checks.check_yes_no("Yes.", True)
    assert checks.check_yes_no("'yes'", True)
    assert checks.check_yes_no("True", True)
    assert checks.check_yes_no(" No, it does not.", False)
    assert checks.check_yes_no("false", False)
    assert not checks.check_yes_no("no", True)
    assert not checks.check_yes_no("Maybe yes", True)
    assert not checks.check_yes_no("", True)
    assert not checks.check_yes_no(None, False)


def test_check_text() -> None:
    assert checks.check_text("1.2-3", "1.2-3")
    assert checks.check_text("Version `1.2-3`.", "1.2-3")
    assert not checks.check_text("1.2-3.1", "1.2-3")
    assert not checks.check_text("11.2-3", "1.2-3")
    assert checks.check_text("Mon, 02  Jan 2023 13:06:21 +0100", "Mon, 02 Jan 2023 13:06:21 +0100")
    assert not checks.check_text("1.2-3 " + "x" * 200, "1.2-3")
    assert not checks.check_text(None, "1.2-3")


def test_stable_split_uses_no_salted_hash() -> None:
    assert sources.stable_split("bash") == sources.stable_split("bash")
    assert {sources.stable_split(f"pkg{i}") for i in range(20)} == {"dev", "test"}
    digest = hashlib.sha256(b"bash").digest()[0]
    assert sources.stable_split("bash") == ("dev", "test")[digest % 2]


def test_each_load_gets_its_own_contexts(splits: dict[str, list[Task]]) -> None:
    first = next(t for t in load_split("dev") if isinstance(t.context, dict))
    first.context.clear()
    again = next(t for t in load_split("dev") if t.id == first.id)
    assert again.context and again.check(again.expected)


@pytest.mark.parametrize("style", sorted(sources.HEADERS))
def test_the_helpers_find_every_header_shape_of_the_eval(style):
    from rlm_kernel.context.documents import search_lines, split_documents

    files = {"Apache-2.0": "Apache terms\nend", "pkg/mod.py": "x = 1\n", "GPL 3": "gpl\nend"}
    text = sources.concat(files, style)
    docs = split_documents(text)
    assert list(docs) == list(files)
    assert [d.strip() for d in docs.values()] == [f.strip() for f in files.values()]
    assert [h["doc"] for h in search_lines(text, "end")] == ["Apache-2.0", "GPL 3"]
