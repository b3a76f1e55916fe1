"""``bench/bench_followups.py``: its question pairs (built from the eval's sources, every
answer computed by code) and its with/without-conversation wiring, on a scripted model.

Fast: no model runs; the scripted model only shows the bench's mechanics.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from collections import Counter
from pathlib import Path

import pytest

from rlm_kernel import RLM, RLMConfig
from rlm_kernel.models.scripted import ScriptedModel
from tests.replies import block

BENCH = Path(__file__).resolve().parents[1] / "bench" / "bench_followups.py"


def _load():
    spec = importlib.util.spec_from_file_location("bench_followups", BENCH)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_followups"] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


bf = _load()


@pytest.fixture(scope="module")
def pairs():
    return bf.load_pairs()


def first_value(expected: str) -> str:
    """One accepted answer of an expected text (``"202 or 203"``: either count)."""
    return expected.split(" or ")[0]


def test_at_least_twenty_pairs_over_every_source_kind(pairs):
    assert len(pairs) >= 20
    assert len({p.id for p in pairs}) == len(pairs)
    assert {p.kind for p in pairs} == set(bf.KINDS)
    assert min(sum(p.kind == k for p in pairs) for k in bf.KINDS) >= 4


def test_each_second_question_refers_back_without_naming_the_first_answer(pairs):
    for p in pairs:
        assert bf.REFERS.search(p.second), p.id
        for name in p.names1:
            assert not re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", p.second,
                                 re.IGNORECASE), (p.id, name)
        assert p.first != p.second


def test_expected_answers_are_non_empty_and_pass_only_their_own_checks(pairs):
    for p in pairs:
        assert p.expected1.strip() and p.expected2.strip(), p.id
        assert p.check1(p.expected1), p.id
        assert p.check2(first_value(p.expected2)), p.id
        for check in (p.check1, p.check2):
            assert not check(None) and not check("I could not find it."), p.id
        assert p.context, p.id


def test_yes_no_follow_ups_are_balanced(pairs):
    """A model that always says yes must not score on the baseline."""
    yes_no = Counter(p.expected2 for p in pairs if p.expected2 in ("yes", "no"))
    assert yes_no["yes"] == yes_no["no"] >= 1
    assert sum(yes_no.values()) <= len(pairs) // 5


def test_the_answers_are_computed_from_the_sources(pairs):
    """Spot checks against a second computation: the def-file pairs with ast, the licence
    line count with str methods."""
    defs = [p for p in pairs if p.id.split("-", 1)[1].startswith("def-file/")]
    assert defs
    for p in defs:
        func = re.search(r"top-level function `(\w+)`", p.first).group(1)
        source = p.context[p.expected1]
        tree = ast.parse(source)
        tops = [n.name for n in tree.body
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        assert func in tops
        assert int(p.expected2) == len(tops)
    phrase = next(p for p in pairs if p.id.endswith("phrase/line-count"))
    words = re.search(r'"(.+)"', phrase.first).group(1)
    assert [n for n, t in phrase.context.items() if words in t] == [phrase.expected1]
    assert str(len(phrase.context[phrase.expected1].splitlines())) in phrase.expected2


def test_loading_gives_fresh_contexts(pairs):
    again = bf.load_pairs()
    assert [p.id for p in again] == [p.id for p in pairs]
    mutable = [(a, b) for a, b in zip(again, pairs, strict=True) if not isinstance(a.context, str)]
    assert mutable and all(a.context is not b.context and a.context == b.context
                           for a, b in mutable)


def scripted_rlm(lm: ScriptedModel):
    return lambda cfg: RLM(root_client=lm, sub_client=lm, config=cfg)


CONFIG = RLMConfig().replace(max_iterations=3, temperature=0.0, ground_answer=False)


def test_run_pair_asks_the_second_question_with_and_without_the_conversation(pairs):
    p = pairs[0]
    lm = ScriptedModel([
        block(f"found = {p.expected1!r}\nFINAL(found)"),
        # the same executor: what the first task left is still there
        block(f"assert found == {p.expected1!r}\nFINAL({first_value(p.expected2)!r})"),
        block('FINAL("no idea which one you mean")'),
    ])
    out = bf.run_pair(p, scripted_rlm(lm), CONFIG)

    assert len(lm.calls) == 3  # one root call per run
    with_prompt, without_prompt = lm.calls[1][-1]["content"], lm.calls[2][-1]["content"]
    assert "Earlier tasks in this session" in with_prompt
    assert (f"Task: {p.second}\n\nIt follows the previous task: {p.first}\n"
            f"Its answer: {p.expected1}") in with_prompt
    assert "Variables it left: found" in with_prompt
    assert "Earlier tasks in this session" not in without_prompt
    assert "Earlier tasks in this session" not in lm.calls[0][-1]["content"]
    assert f"Task: {p.second}" in with_prompt and f"Task: {p.second}" in without_prompt

    assert out.first.correct and out.with_conv.correct and not out.without.correct
    assert out.with_conv.told_history and not out.without.told_history
    assert not out.first.told_history
    assert out.with_conv.first_prompt_tokens == out.without.first_prompt_tokens == 10
    assert out.with_conv.steps == 1 and out.without.stopped_by == "final"


def test_a_failing_run_counts_as_wrong_and_the_bench_goes_on(pairs):
    p = pairs[0]
    lm = ScriptedModel([RuntimeError("provider down")] * 3)
    out = bf.run_pair(p, scripted_rlm(lm), CONFIG)
    assert not (out.first.correct or out.with_conv.correct or out.without.correct)
    assert out.with_conv.stopped_by == "error"


def test_the_chain_measures_the_probe_after_each_point(pairs):
    lm = ScriptedModel([])  # every reply: FINAL("out of script")
    points = bf.run_chain(pairs, 3, scripted_rlm(lm), CONFIG, points=(0, 1, 3))
    assert [pt.earlier for pt in points] == [0, 1, 3]
    assert points[0].section_chars == points[0].uncompacted_chars == 0
    assert 0 < points[1].section_chars < points[2].section_chars
    assert all(pt.uncompacted_chars >= pt.section_chars for pt in points)
    assert all(pt.prompt_tokens == 10 for pt in points)
    # probes at 0, 1, 3 and the three chained tasks: one root call each
    assert len(lm.calls) == 6
    probe = f"Task: {pairs[3].first}"
    assert [probe in c[-1]["content"] for c in lm.calls] == [True, False, True, False, False,
                                                             True]


def test_the_table_prints_per_kind_rows_and_a_total(pairs, capsys):
    lm = ScriptedModel([])
    out = bf.run_pair(pairs[0], scripted_rlm(lm), CONFIG)
    bf.print_table([out])
    bf.print_row(out)
    text = capsys.readouterr().out
    assert re.search(rf"^{pairs[0].kind}\s+\|\s+1\s+0/1 \|\s+0/1\s+0/1 \|", text, re.M), text
    assert re.search(r"^TOTAL\s+\|", text, re.M)
    assert pairs[0].id in text


def test_skip_without_and_compare_print_before_and_after_side_by_side(pairs, tmp_path, capsys):
    """``--skip-without`` asks the second question only with the conversation; ``--compare``
    prints two ``--save`` files pair by pair, then the totals."""
    import json

    p = pairs[0]
    right = block(f"FINAL({first_value(p.expected2)!r})")
    runs = {}
    for name, second in (("before", block("FINAL('all files: 14')")), ("after", right)):
        lm = ScriptedModel([block(f"found = {p.expected1!r}\nFINAL(found)"), second])
        runs[name] = bf.run_pair(p, scripted_rlm(lm), CONFIG, without_history=False)
        assert len(lm.calls) == 2  # the first question and the follow-up with history
        assert runs[name].without.stopped_by == bf.SKIPPED
        (tmp_path / f"{name}.jsonl").write_text(json.dumps(bf.saved(runs[name])) + "\n")
    assert not runs["before"].with_conv.correct and runs["after"].with_conv.correct
    bf.print_table([runs["after"]])
    table = capsys.readouterr().out
    assert re.search(r"^TOTAL\s+\|\s+1\s+1/1 \|\s+1/1\s+- \|", table, re.M), table

    assert bf.main(["--compare", str(tmp_path / "before.jsonl"),
                    str(tmp_path / "after.jsonl")]) == 0
    text = capsys.readouterr().out
    row = next(line for line in text.splitlines() if line.startswith(p.id))
    assert "NO|yes" in row and "all files: 14|" in row
    assert re.search(r"^TOTAL\s+\|\s+0/1\|1/1\s+\|", text, re.M), text
