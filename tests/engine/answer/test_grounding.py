"""The grounding check: a FINAL whose value no code produced is sent back once."""

from __future__ import annotations

import time

import pytest

from rlm_kernel import RLM
from rlm_kernel.cli import build_parser
from rlm_kernel.engine.answer.grounding import SCAN_CHARS, finding, is_literal_final
from rlm_kernel.engine.options import config_overrides
from rlm_kernel.models.scripted import ScriptedModel
from tests.replies import block
from tests.scripted import scripted_rlm

NOT_FOUND = "does not appear in any output of your code or in any variable"


# -- the pure function ------------------------------------------------------------------
@pytest.mark.parametrize("code", ['FINAL(hits[0]["doc"])', "FINAL(len(found))",
                                  'FINAL_VAR("x")', 'FINAL(f"{n} files")',
                                  "answer = pick()\nFINAL(answer)"])
def test_an_expression_over_names_is_grounded(code):
    assert not is_literal_final(code, "foo.py")
    assert finding(code, "foo.py", [], {}) is None


@pytest.mark.parametrize("code, value", [('FINAL("foo.py")', "foo.py"), ("FINAL(42)", 42),
                                         ("FINAL(-3)", -3), ("FINAL(['a', 'b'])", ["a", "b"]),
                                         ("FINAL({'n': 1})", {"n": 1}),
                                         ("FINAL(answer='x')", "x"),
                                         ('FINAL("a" + "b")', "ab")])
def test_an_argument_that_reads_no_name_is_a_literal(code, value):
    assert is_literal_final(code, value)
    assert finding(code, value, [], {}) is not None


def test_the_literal_is_the_branch_that_gave_the_value():
    code = "if hits:\n    FINAL(hits[0])\nelse:\n    FINAL('nothing')"
    assert is_literal_final(code, "nothing")
    assert not is_literal_final(code, "a.py")  # the computed branch ran
    assert not is_literal_final("%time x = 1\nFINAL(x)", 1)  # IPython lines are skipped
    assert is_literal_final("%time x = 1\nFINAL('q')", "q")
    assert not is_literal_final("print(", "q")  # code that does not parse: not judged


def test_a_value_of_no_plain_type_never_comes_from_a_literal():
    class Answer(str):
        pass

    assert not is_literal_final('FINAL("a")', Answer("a"))
    assert finding('FINAL("a")', Answer("a"), [], {}) is None


def test_the_finding_names_the_answer():
    assert finding('FINAL("foo.py")', "foo.py", ["a.py\nb.py"], {}) == \
        f"The answer 'foo.py' {NOT_FOUND}."
    assert finding('FINAL(["a.py", "zz.py"])', ["a.py", "zz.py"], ["a.py"], {}) == \
        f"The answer ['a.py', 'zz.py'] has 'zz.py', which {NOT_FOUND}."


def test_numbers_match_printed_tokens_with_thousands_separators():
    assert finding("FINAL(1234)", 1234, ["rows: 1,234"], {}) is None
    assert finding("FINAL(1234)", 1234, ["rows: 1234.0"], {}) is None
    assert finding("FINAL(-5)", -5, ["change -5"], {}) is None
    assert finding("FINAL(1234)", 1234, ["rows: 12345"], {}) is not None  # not a part
    assert finding("FINAL(234)", 234, ["rows: 1,234"], {}) is not None
    assert finding("FINAL(42)", 42, ["x42y? no: 7"], {}) is None  # a token inside a word
    assert finding('FINAL("1,234")', "1,234", ["n=1234"], {}) is None  # text read as number
    assert finding('FINAL("45%")', "45%", ["rate 45.0"], {}) is None


def test_floats_match_to_their_own_printed_precision():
    assert finding("FINAL(3.14)", 3.14, ["pi = 3.14159"], {}) is None
    assert finding("FINAL(3.0)", 3.0, ["n = 3"], {}) is None
    assert finding("FINAL(3.14)", 3.14, ["pi = 3.1"], {}) is not None  # digits not shown
    assert finding("FINAL(3.2)", 3.2, ["pi = 3.14159"], {}) is not None
    assert finding("FINAL(0.5)", 0.5, ["1 0"], {}) is not None


def test_numbers_match_numeric_variables_and_lengths():
    assert finding("FINAL(42)", 42, [], {"n": 42}) is None
    assert finding("FINAL(3.14)", 3.14, [], {"mean": 3.14159}) is None
    assert finding("FINAL(3)", 3, [], {"found": ["a", "b", "c"]}) is None  # len(found)
    assert finding("FINAL(9)", 9, [], {"counts": [1, 9]}) is None  # a member
    assert finding("FINAL(9)", 9, [], {"flag": True, "_n": 9}) is not None


def test_strings_match_case_and_white_space_insensitively():
    outputs = ["Found:   The Old\n  Man and the Sea (1952)"]
    assert finding('FINAL("the old man and the sea")', "the old man and the sea",
                   outputs, {}) is None
    assert finding('FINAL("\'The Old Man and the Sea.\'")', "'The Old Man and the Sea.'",
                   outputs, {}) is None  # quotes and a trailing period stripped
    assert finding('FINAL("The Old Woman")', "The Old Woman", outputs, {}) is not None


def test_lists_and_dicts_need_every_member():
    assert finding('FINAL(["a.py", "b.py"])', ["a.py", "b.py"], ["b.py a.py"], {}) is None
    assert finding("FINAL({'a': 3, 'b': 'x.py'})", {"a": 3, "b": "x.py"}, ["3 x.py"],
                   {}) is None  # values only: keys are labels
    assert finding("FINAL([])", [], [], {}) is None
    assert finding("FINAL((1, 2))", (1, 2), ["1"], {}) is not None


@pytest.mark.parametrize("value", [True, False, None, "yes", "No.", "TRUE", "false", ""])
def test_judgements_are_exempt(value):
    assert finding(f"FINAL({value!r})", value, [], {}) is None


def test_a_final_in_prose_counts_as_a_literal():
    assert is_literal_final("", "foo.py")
    assert finding("", "foo.py", ["x"], {}) is not None
    assert finding("", "foo.py", ["see foo.py"], {}) is None
    found = {"a": 1}  # FINAL(found) in prose: the variable's own value
    assert finding("", found, [], {"found": found}) is None


def test_the_namespace_is_searched_but_not_its_reserved_or_session_names():
    ns = {"context": "line 1\nThe answer is Foo.PY here", "docs": ["x", {"k": "v"}],
          "index": {"bar.py": 3}}
    assert finding('FINAL("foo.py")', "foo.py", [], ns) is None
    assert finding('FINAL("bar.py")', "bar.py", [], ns) is None  # a dict's key
    assert finding('FINAL("v")', "v", [], ns) is None  # one level of nesting
    assert finding('FINAL("zz.py")', "zz.py", [], ns) is not None
    code = 'FINAL("zz.py")'
    assert finding(code, "zz.py", [], {"In": [code], "_i1": code, "_": "zz.py",
                                      "rlm_answer": "zz.py"}) is not None


def test_the_namespace_scan_is_capped_and_fast():
    big = "word " * (SCAN_CHARS // 5 - 2) + "needle    "  # SCAN_CHARS characters
    assert len(big) == SCAN_CHARS
    ns = {"context": big, "tail": "late"}
    t0 = time.perf_counter()
    assert finding('FINAL("needle")', "needle", [], ns) is None  # inside the cap
    assert finding('FINAL("late")', "late", [], ns) is not None  # beyond the cap
    assert finding("FINAL(123456)", 123456, [], {"xs": list(range(10**6))}) is not None
    assert time.perf_counter() - t0 < 5


# -- the loop ---------------------------------------------------------------------------
def make(replies, **cfg) -> tuple[RLM, ScriptedModel, list]:
    """A scripted run with grounding on (this module's subject; scripted runs: off)."""
    events: list = []
    cfg.setdefault("ground_answer", True)
    return (*scripted_rlm(replies, events=events, **cfg), events)


def test_an_ungrounded_final_gets_one_check_step_then_the_next_final_is_accepted(caplog):
    rlm, lm, events = make([block("print('a.py b.py')"), block("FINAL('foo.py')"),
                            block("FINAL('nope.py')")])
    with caplog.at_level("DEBUG", logger="rlm_kernel.engine.answer.grounding"):
        res = rlm.run("Which file?", context="x")
    [record] = [r for r in caplog.records if r.name == "rlm_kernel.engine.answer.grounding"]
    assert "'foo.py'" in record.getMessage()
    check = lm.calls[2][-1]["content"]
    assert f"The answer 'foo.py' {NOT_FOUND}." in check
    assert "Find it with code" in check and "The question: Which file?" in check
    assert res.root_prompts[2][-1]["content"] == check  # the record shows the message
    assert [e.code for e in res.history] == ["print('a.py b.py')", "FINAL('foo.py')",
                                             "FINAL('nope.py')"]
    assert res.answer == "nope.py" and res.stopped_by == "final"  # never a second check
    [event] = [e for e in events if e.kind == "answer_check"]
    assert (event.step, event.reason, event.answer) == (2, "grounding", "foo.py")
    assert event.finding in check


def test_the_check_step_can_correct_the_answer_with_code():
    rlm, lm, _ = make([block("FINAL(42)"), block("n = len(context)\nprint(n)\nFINAL(n)")])
    res = rlm.run("How long?", context="abc")
    assert res.answer_value == 3 and res.steps == 2


def test_a_grounded_final_costs_no_extra_step():
    rlm, lm, events = make([block("print(sorted(['b.py', 'a.py']))"), block("FINAL('a.py')")])
    res = rlm.run("Which file?", context="x")
    assert res.answer == "a.py" and res.steps == 2 and res.llm_calls == 2
    assert not [e for e in events if e.kind == "answer_check"]
    rlm, lm, _ = make([block("hits = ['z.py']\nFINAL(hits[0])")])
    assert rlm.run("q", context="x").llm_calls == 1


def test_ground_answer_false_turns_the_check_off():
    rlm, lm, events = make([block("FINAL('foo.py')")], ground_answer=False)
    res = rlm.run("Which file?", context="x")
    assert res.answer == "foo.py" and res.llm_calls == 1
    assert not [e for e in events if e.kind == "answer_check"]


def test_with_verify_answer_there_is_still_one_look_back():
    rlm, lm, events = make([block("FINAL('foo.py')"), block("FINAL('bar.py')")],
                           verify_answer=True)
    res = rlm.run("Which file?", context="x")
    assert res.answer == "bar.py" and res.steps == 2 and res.llm_calls == 2
    assert [e.reason for e in events if e.kind == "answer_check"] == ["grounding"]
    assert NOT_FOUND in lm.calls[1][-1]["content"]
    rlm, lm, events = make([block("print('a.py')"), block("FINAL('a.py')"),
                            block("FINAL('a.py')")], verify_answer=True)
    res = rlm.run("Which file?", context="x")  # grounded: the answer check looks back
    assert res.answer == "a.py" and res.steps == 3
    assert [e.reason for e in events if e.kind == "answer_check"] == ["verify"]


def test_at_the_step_limit_the_first_answer_is_kept():
    rlm, lm, _ = make([block("FINAL('foo.py')"), block("print('still looking')")],
                      max_iterations=2)
    res = rlm.run("q", context="x")
    assert res.answer == "foo.py" and res.stopped_by == "final" and res.llm_calls == 2
    rlm, lm, _ = make([block("print(1)"), block("FINAL('foo.py')")], max_iterations=2)
    res = rlm.run("q", context="x")  # the last step: no step left to look back
    assert res.answer == "foo.py" and res.llm_calls == 2


def test_a_child_run_is_not_checked():
    rlm, lm, events = make([block("a = rlm_query('inner', context='abc')\nprint(a)"),
                            block("FINAL('typed in the child')"), block("FINAL(a)")],
                           max_depth=1)
    res = rlm.run("outer", context="x")
    assert res.answer == "typed in the child" and res.llm_calls == 3
    assert not [e for e in events if e.kind == "answer_check"]


def test_a_prose_final_is_checked_too():
    rlm, lm, _ = make([block("print('a.py')"), 'The answer: FINAL("foo.py")',
                       block("FINAL('a.py')")])
    res = rlm.run("q", context="x")
    assert NOT_FOUND in lm.calls[2][-1]["content"]
    assert res.answer == "a.py"


def test_the_switch_reaches_the_command_line_the_magic_and_the_traits():
    from rlm_kernel.jupyter.magic import parse_line
    from rlm_kernel.jupyter.settings import RLMSettings

    args = build_parser().parse_args(["run", "--no-ground-answer", "q"])
    assert config_overrides(args)["ground_answer"] is False
    args = build_parser().parse_args(["run", "q"])
    assert "ground_answer" not in config_overrides(args)  # the default stays
    opts, question = parse_line("--no-ground-answer --verify-answer Is --no-ground-answer?")
    assert config_overrides(opts) == {"ground_answer": False, "verify_answer": True}
    assert question == "Is --no-ground-answer?"
    assert RLMSettings().run_config().ground_answer is True
    assert RLMSettings(ground_answer=False).run_config().ground_answer is False
