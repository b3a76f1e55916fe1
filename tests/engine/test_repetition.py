"""Repetition: the detector (pure) and the loop's two-stage reaction, driven by a
scripted model (the real model's loops are in tests/test_e2e_local.py-style slow tests
below)."""

from __future__ import annotations

import json.decoder
from pathlib import Path

import pytest

from rlm_kernel import RLM, RLMConfig
from rlm_kernel.engine.events import Event
from rlm_kernel.engine.prompts import repeated_step
from rlm_kernel.engine.repetition import (
    MIN_OUTPUT_CHARS,
    Repetition,
    RepetitionDetector,
    code_shape,
    error_line,
    normalise_code,
    result_shape,
    signature,
)
from rlm_kernel.models.scripted import ScriptedModel
from tests.replies import block
from tests.scripted import scripted_rlm

TRACE = "Traceback (most recent call last):\n  File \"<step>\", line 1\n"


# -- normalising ------------------------------------------------------------------------
@pytest.mark.parametrize("a, b", [
    ('hits = search("class ", context)\nprint(hits)',
     "# look again\nfound = search( 'class ' , context )   # same\nfound"),
    ("for i in range(3):\n    print(i)", "for j in range(3):\n  print(j)  # loop"),
    ("x = len(context)\nprint('n', x)", "n = len(context)\n('n', n)"),
    ("print(len(context))", "len(context)\n\n\n"),
])
def test_spellings_of_one_step_normalise_alike(a, b):
    assert normalise_code(a) == normalise_code(b)


@pytest.mark.parametrize("a, b", [
    ('hits = search("class ")', 'hits = search("def ")'),
    ("print(hits[:5])", "print(hits[:10])"),
    ("print(context[:100])", "print(data[:100])"),  # a name read, not bound: kept
    ("x = 1", "x = 2"),
])
def test_different_steps_stay_different(a, b):
    assert normalise_code(a) != normalise_code(b)


@pytest.mark.parametrize("code", [
    'hits = search("x")\nprint(hits)', "print(x", "def f(a):\n    return a  # c\nf(1)",
    "", "   \n# only a comment\n",
])
def test_normalising_is_idempotent(code):
    once = normalise_code(code)
    assert normalise_code(once) == once


def test_code_that_does_not_parse_loses_comments_and_layout():
    assert normalise_code("print(x  # open\n") == normalise_code("print(x\n")
    assert normalise_code("print(x") != normalise_code("print(y")


def test_error_line_is_the_exception_line_not_the_traceback():
    out = TRACE + "    1/0\nZeroDivisionError: division by zero\n"
    assert error_line(out) == "ZeroDivisionError: division by zero"
    assert error_line("step stopped after 120 s\n\n") == "step stopped after 120 s"
    assert error_line("") == ""


def test_short_outputs_are_not_compared():
    assert signature("print(hits)", "[]", True).output == ""
    long = "x" * MIN_OUTPUT_CHARS
    assert signature("print(hits)", long, True).output == long
    failed = signature("1/0", TRACE + "ZeroDivisionError: division by zero", False)
    assert failed.output == "" and failed.error == "ZeroDivisionError: division by zero"
    assert signature("", "", False, reply="I  think\nso").code == "text: I think so"


# -- the detector -----------------------------------------------------------------------
def test_the_second_time_is_a_repetition_and_names_the_first_step():
    det = RepetitionDetector(2)
    assert det.observe(1, signature('hits = search("a")\nprint(hits)', "a" * 30, True)) is None
    assert det.observe(2, signature("print(len(context))", "b" * 30, True)) is None
    rep = det.observe(3, signature('found = search("a")  # again\nfound', "c" * 30, True))
    assert rep == Repetition(step=1, what=("code",))


def test_different_code_with_the_same_output_or_error_repeats():
    det = RepetitionDetector(2)
    out = "{'doc': 'a.py', 'line': 3, 'text': 'class A:'}"
    det.observe(1, signature("print(hits)", out, True))
    assert det.observe(2, signature("print(hits[:3])", out, True)).what == ("output",)
    err = TRACE + "NameError: name 'data' is not defined"
    det.observe(3, signature("print(data)", err, False))
    rep = det.observe(4, signature("len(data)", err, False))
    assert rep.step == 3 and rep.what == ("error",)
    assert rep.error == "NameError: name 'data' is not defined"
    assert "same error: NameError" in repeated_step(rep)


def test_searches_that_each_find_nothing_are_not_a_repetition():
    det = RepetitionDetector(2)
    for step, pattern in enumerate(["foo", "bar", "baz"], start=1):
        assert det.observe(step, signature(f"print(search({pattern!r}))", "[]", True)) is None


def test_a_higher_limit_waits_for_more_occurrences():
    det = RepetitionDetector(3)
    assert det.repeats_code("print(1)") is None
    det.observe(1, signature("print(1)", "", True))
    assert det.repeats_code("print(1)") is None
    assert det.observe(2, signature("print(1)", "", True)) is None
    assert det.repeats_code("print(1)  # again") == Repetition(1, ("code",))
    assert det.observe(3, signature("print(1)", "", True)) == Repetition(1, ("code",))
    with pytest.raises(ValueError, match="at least 2"):
        RepetitionDetector(1)


def test_one_detector_counts_only_its_own_runs_steps():
    with pytest.raises(TypeError):
        RepetitionDetector(2, earlier_code=['hits = search("x")'])  # no earlier tasks
    first, again = RepetitionDetector(2), RepetitionDetector(2)
    step = signature('hits = search("def encode")\nprint(hits)', "x" * 30, True)
    assert first.observe(1, step) is None
    assert again.repeats_code('hits = search("def encode")') is None
    assert again.observe(1, step) is None


# -- near repeats: the same step but for its numbers -------------------------------------
PROBE = "n = len(context) + {}\nprint('probing the data once more, attempt', n, 'of many')"


@pytest.mark.parametrize("a, b", [
    (PROBE.format(0), PROBE.format(7)),  # a counter in a literal
    ("probe_3 = len(context)\nprint(probe_3)", "probe_4 = len(context)\nprint(probe_4)"),
    ("print(attempt_3)", "print(attempt_12)"),  # a name read, but for its digits
    ("print('attempt 3 of 9')", "print('attempt 4 of 9')"),  # digits in a string
    ("print(context[0:1000])", "print(context[1000:2000])"),  # another slice: same shape
    ("print(x", "print(x  # unclosed\n"),
])
def test_code_shapes_mask_every_number(a, b):
    assert code_shape(a) == code_shape(b)


@pytest.mark.parametrize("a, b", [
    ('search("class ", context)', 'search("def ", context)'),  # another search text
    ("print(context[:100])", "print(data[:100])"),  # another variable
    ("print(len(context))", "print(sum(context))"),  # another helper
    ("a = 1\nb = 2\nprint(a, b)", "a = 1\nb = 2\nprint(b, a)"),  # bound names kept apart
])
def test_code_shapes_keep_what_makes_another_step(a, b):
    assert code_shape(a) != code_shape(b)


def test_result_shapes_mask_numbers_ids_and_hashes():
    assert result_shape("attempt 501 of 12") == result_shape("attempt 7 of 3") == \
        "attempt # of #"
    assert result_shape("run 3f2a9c1e-1b2c-4d5e-8f90-123456789abc at 2026-11-28") == \
        "run # at #"
    assert result_shape("a deadbeefcafe word") == "a deadbeefcafe word"  # no digit: a word
    assert result_shape("") == ""


def test_a_near_repeat_needs_the_same_code_and_result_but_for_numbers():
    det = RepetitionDetector(2)
    out = "probing the data once more, attempt {} of many"
    assert det.observe(1, signature(PROBE.format(0), out.format(500), True)) is None
    rep = det.observe(2, signature(PROBE.format(1), out.format(501), True))
    assert rep == Repetition(step=1, what=("near",))
    assert repeated_step(rep) == "step 1 (same code and output but for their numbers)"
    # an exact repeat says so, not "near"
    assert det.observe(3, signature(PROBE.format(1), out.format(501), True)).what == (
        "code", "output")
    # the same code reading another slice shows other text: other work
    det = RepetitionDetector(2)
    text = Path(json.decoder.__file__).read_text()  # real text, with numbers in it
    for step, start in enumerate(range(0, 1500, 300), start=1):
        sig = signature(f"print(context[{start}:{start + 300}])", text[start:start + 300],
                        True)
        assert det.observe(step, sig) is None
    # a failing probe with a counter: the same code and error but for numbers
    det = RepetitionDetector(2)
    err = TRACE + "KeyError: 'part_{}'"
    det.observe(1, signature("print(parts['part_1'])", err.format(1), False))
    rep = det.observe(2, signature("print(parts['part_2'])", err.format(2), False))
    assert rep.what == ("near",) and rep.error == "KeyError: 'part_2'"


def test_short_or_silent_results_have_no_near_part():
    assert signature("print(search('foo'))", "[]", True).near == ""
    assert signature("x = context[0:100]", "", True).near == ""
    assert signature("", "", True, reply="Step 3: thinking").near == "text: Step #: thinking"
    assert signature("", "", True) == signature("", "", True, reply="  ")


# -- the loop's two stages ----------------------------------------------------------------
def make(replies, **cfg) -> tuple[RLM, ScriptedModel, list[Event]]:
    """A scripted run with resampling after a repetition on (this module's subject;
    scripted runs: off)."""
    events: list[Event] = []
    cfg.setdefault("resample_temperature", RLMConfig().resample_temperature)
    return (*scripted_rlm(replies, events=events, **cfg), events)


def notices(events: list[Event]) -> list[tuple[int, str]]:
    return [(e.step, e.reason) for e in events if e.kind == "step_notice"]


def test_a_repeated_reply_is_shown_to_the_model_and_sampled_again_before_it_runs():
    search = block('hits = search("class ", context)\nprint(hits)')
    rlm, lm, events = make([search, block("hits = search('class ', context)  # again\nhits"),
                            block("print(len(hits))"), block("FINAL(len(hits))")])
    res = rlm.run("How many classes?", context="class A:\n  pass\nclass B:\n  pass\n")
    assert res.stopped_by == "final" and res.answer == "2"
    assert [e.code for e in res.history] == [
        'hits = search("class ", context)\nprint(hits)', "print(len(hits))", "FINAL(len(hits))"]
    assert lm.temperatures == [None, None, 0.7, None]
    told = lm.calls[2][-1]["content"]  # the resample's prompt: the repetition, plainly
    assert told.startswith("Your step repeats step 1 (same code).")
    assert "If you repeat a step again, the run stops." in told
    assert lm.calls[2][-2]["role"] == "assistant"
    assert notices(events) == [(2, "repeated")]


def test_a_second_repetition_ends_the_run_stuck_with_the_best_answer_so_far():
    fail = block("print(data)")
    rlm, lm, events = make([block("n = len(context)\nprint(n)"), fail,
                            block("len(data)  # try again"), block("print(data)"),
                            block("FINAL(n)"), block("print('never')")])
    res = rlm.run("How long?", context="hello world")
    # step 2 fails; step 3 fails the same way (told, sampled differently); step 4 is
    # the second repetition: stuck, then one "answer now" call
    assert res.stopped_by == "stuck"
    assert res.answer == "11" and res.answer_source == "forced"
    assert [e.code for e in res.history] == [
        "n = len(context)\nprint(n)", "print(data)", "len(data)  # try again",
        "print(data)", "FINAL(n)"]
    assert notices(events) == [(3, "repeated"), (4, "stuck")]
    # the stop is said once, by the run's end; the step's note says what it repeated
    told = [e.text for e in events if e.kind == "step_notice"]
    assert told[1] == ("This step repeats step 2 (same code, same error: NameError: name 'data' "
                       "is not defined) again.")
    assert not any("stop" in text for text in told)
    assert "NameError: name 'data' is not defined" in res.error
    assert res.error.startswith("step 4 repeats step 2")  # the stop reason says "stuck"
    assert lm.temperatures == [None, None, None, 0.7, None]
    third = lm.calls[3][-1]["content"]  # the message after step 3
    assert "Your step repeats step 2 (same error: NameError" in third
    last = lm.calls[4][-1]["content"]
    assert "again, so the run stops here" in last and "FINAL(answer)" in last
    finished = [e for e in events if e.kind == "run_finished"][0].result
    assert finished.stopped_by == "stuck"


def test_a_stuck_run_without_a_final_has_no_answer_and_keeps_its_trajectory():
    rlm, lm, _ = make([block("print(data)")] * 4 + ["I cannot tell."])
    res = rlm.run("q", context="x")
    assert res.stopped_by == "stuck" and res.answer is None and res.answer_source is None
    assert res.steps == 2  # step 2's first reply was told and sampled again; it repeated
    assert len(lm.calls) == 4  # step 1, step 2, its resample, the answer-now call


def test_the_walks_loops_end_within_three_steps_of_the_first_repetition():
    search = block('hits = search("class ", context)\nprint(hits[:20])')
    rlm, _, events = make([search] * 20, max_iterations=12)
    res = rlm.run("q", context="class A:\n  x = 1\nclass B:\n  y = 2\n" * 3)
    first = next(step for step, why in notices(events) if why == "repeated")
    assert res.stopped_by == "stuck" and res.steps - first <= 3
    assert res.llm_calls <= 5


def test_a_probe_with_a_counter_is_stopped_within_three_steps_of_its_first_repeat():
    """fault case y10: the same probe every step with a counter in its code and output
    ran 12 of 12 steps; a near repeat is told, then stops the run."""
    rlm, lm, events = make([block(PROBE.format(i)) for i in range(40)], max_iterations=12)
    res = rlm.run("question", context="some data " * 50)
    first = next(step for step, why in notices(events) if why == "repeated")
    assert res.stopped_by == "stuck" and res.steps - first <= 3
    assert notices(events) == [(2, "repeated"), (3, "stuck")]
    assert "step 1 (same code and output but for their numbers)" in lm.calls[2][-1]["content"]
    assert res.error == ("step 3 repeats step 1 (same code and output but for their "
                         "numbers) after the model was told of a repetition")


def test_different_real_work_with_numbers_in_it_is_not_stopped():
    """Reading the data slice by slice, and counting one thing then another, change
    numbers or search texts in the same code: each step shows something new."""
    source = {f"json/{n}.py": Path(json.decoder.__file__).with_name(f"{n}.py").read_text()
              for n in ("decoder", "encoder", "scanner")}
    slices = [block(f"print(context['json/encoder.py'][{i}:{i + 1500}])")
              for i in range(0, 9000, 1500)]
    counts = [block(f"for name, src in context.items():\n    print(name, src.count({t!r}))")
              for t in ("class ", "def ", "import ")]
    rlm, lm, events = make([*slices, *counts, block("FINAL(3)")], max_iterations=12)
    res = rlm.run("How many files import something?", context=source)
    assert res.stopped_by == "final" and res.steps == 10
    assert notices(events) == [] and len(lm.calls) == 10


def test_repeat_limit_none_turns_it_off_and_a_check_step_may_repeat_its_final():
    rlm, lm, _ = make([block("print(1)")] * 3 + [block("FINAL(1)")], repeat_limit=None)
    res = rlm.run("q", context="x")
    assert res.stopped_by == "final" and res.steps == 4 and lm.temperatures == [None] * 4
    rlm, lm, _ = make([block("FINAL(5)"), block("FINAL(5)")], verify_answer=True)
    res = rlm.run("q", context="x")
    assert res.stopped_by == "final" and res.answer == "5" and res.steps == 2


# -- the time budget --------------------------------------------------------------------
def test_the_default_time_budget_fits_the_model_and_a_users_setting_wins():
    cfg = RLMConfig()
    embedded, provider = cfg.time_budget(embedded=True), cfg.time_budget(embedded=False)
    assert embedded is not None and provider is not None and embedded != provider
    assert cfg.replace(max_iterations=6).time_budget(True) < embedded
    assert cfg.replace(candidates=3).time_budget(True) == 3 * embedded
    assert cfg.replace(max_seconds=30.0).time_budget(True) == 30.0
    assert cfg.replace(auto_max_seconds=False).time_budget(True) is None


def test_the_time_budget_reaches_the_run():
    rlm, _, _ = make([block("FINAL(1)")])
    assert rlm._budget().max_seconds == RLMConfig().time_budget(embedded=True)
    rlm, _, _ = make([block("FINAL(1)")], model="openai/gpt-4.1-mini")
    assert rlm._budget().max_seconds == RLMConfig().time_budget(embedded=False)
    rlm, _, _ = make([block("FINAL(1)")], max_seconds=7.5)
    assert rlm._budget().max_seconds == 7.5


def test_the_settings_are_options_of_rlm_run():
    import argparse

    from rlm_kernel.engine.options import add_setting_options, config_overrides

    parser = argparse.ArgumentParser()
    add_setting_options(parser)
    args = parser.parse_args(["--repeat-limit", "3", "--no-auto-max-seconds"])
    assert config_overrides(args) == {"repeat_limit": 3, "auto_max_seconds": False}
    with pytest.raises(SystemExit):
        parser.parse_args(["--repeat-limit", "1"])


# -- the real embedded model ---------------------------------------------------------------
@pytest.mark.slow
def test_the_walks_hello_there_task_does_not_loop_on_the_embedded_model():
    """The walk's prose cell ``hello there`` with no data repeated one failing step 5
    times (310 s, no answer).  Now it ends with an answer, or stuck at most 3 steps
    after its first repetition; never at the step limit or after 5 failures in a row."""
    events: list[Event] = []
    res = RLM(observer=events.append, executor="in-process").run("hello there")
    told = [step for step, why in notices(events) if why == "repeated"]
    assert res.stopped_by in ("final", "stuck"), (res.stopped_by, res.error,
                                                  [e.code for e in res.history])
    if res.stopped_by == "stuck":
        assert told and res.steps - told[0] <= 3
        assert [why for _, why in notices(events)].count("stuck") == 1
    assert res.steps <= 6
