"""How an answer was reached (``RLMResult.answer_source``): the rule that reads which
inputs a step's code read, each source kind on a scripted run (in-process and isolated
where the executor matters), the no-data task, the events, and one run of the real
embedded model on a task with no data."""

from __future__ import annotations

import pytest

from rlm_kernel import RLM
from rlm_kernel.engine.answer.sources import (
    ANSWER_SOURCE_KINDS,
    STOP_REASONS,
    TONES,
    RunEnding,
    answer_source,
    how_reached,
    inputs_read,
    is_plain,
    run_ending,
    voted_source,
)
from rlm_kernel.engine.events import Event
from rlm_kernel.engine.prompts import NO_DATA_NOTE
from rlm_kernel.engine.repl_functions import user_variables
from rlm_kernel.engine.result import ANSWER_SOURCES
from rlm_kernel.engine.session.conversation import Conversation
from rlm_kernel.executors import PlainExecutor, close_executor, new_executor
from rlm_kernel.models.scripted import ScriptedModel
from tests.replies import block
from tests.scripted import scripted_rlm

EXECUTORS = ["in-process", "isolated"]


def make(replies, **cfg) -> tuple[RLM, ScriptedModel, list[Event]]:
    events: list[Event] = []
    return (*scripted_rlm(replies, events=events, **cfg), events)


@pytest.fixture(params=EXECUTORS)
def executor(request):
    ex = new_executor(request.param)
    yield ex
    close_executor(ex)


# -- the rule: which inputs a step's code reads -----------------------------------------
@pytest.mark.parametrize("code, read", [
    ("print(len(context))", {"context"}),
    ("n = context[:10]\nprint(n)", {"context"}),
    ("def f():\n    return context\n", {"context"}),
    ("FINAL_VAR('context')", {"context"}),
    ("x = globals()['df']", {"df"}),
    ("hits = search('def f(')", {"context"}),  # the helper reads the main variable
    ("parts = split_documents()", {"context"}),
    ("rows = parse_records(Name='x')", {"context"}),
    ("hits = search('x', data=None)", {"context"}),
    ("hits = search('x', other)", set()),  # it reads `other`, not an input
    ("r = lookup('a')", {"lookup"}),  # a tool of the user's
    ("context = {'data': 'sample'}\nFINAL('data')", set()),  # stored, never loaded
    ("x = 2 + 2\nprint(x)", set()),
    ("%time n = len(context)", {"context"}),  # IPython lines are read without their magic
    ("print(contexts)", set()),  # a longer name is not the input
    ("", set()),
])
def test_the_rule_reads_loads_literals_helpers_and_tools(code, read):
    assert inputs_read(code, {"context", "df", "lookup"}, data_name="context") == read


def test_code_that_does_not_parse_counts_whole_words():
    assert inputs_read("print(context", {"context"}) == {"context"}
    assert inputs_read("print(contexts", {"context"}) == set()


def test_a_working_folder_is_read_by_its_helpers_and_by_files():
    folder = ("ls", "read")
    assert inputs_read("print(ls())", set(), folder=folder) == {"<folder>"}
    assert inputs_read("t = open('a.txt').read()", set(), folder=folder) == {"<folder>"}
    assert inputs_read("t = pathlib.Path('a').read_text()", set(), folder=folder) == {"<folder>"}
    assert inputs_read("print(1)", set(), folder=folder) == set()
    assert inputs_read("t = open('a.txt').read()", set()) == set()  # no folder: no input


def test_the_first_source_that_applies_wins():
    assert answer_source(read_input=False, ungrounded=True, forced=True) == "no_input"
    assert answer_source(read_input=True, ungrounded=True, forced=True) == "ungrounded"
    assert answer_source(read_input=True, forced=True, from_text=True) == "forced"
    assert answer_source(read_input=True, from_text=True) == "output"
    assert answer_source(read_input=True) == "data"
    assert voted_source("data") == voted_source("output") == "vote"
    assert [voted_source(s) for s in ("no_input", "ungrounded", "forced", None)] == \
        ["no_input", "ungrounded", "forced", None]
    assert set(ANSWER_SOURCES) == {"data", "output", "ungrounded", "vote", "no_input",
                                   "forced", "finish"}


def test_how_reached_in_words():
    assert how_reached("no_input") == "reached without reading your data"
    assert how_reached("no_input", no_data=True) == "reached without any data (none was given)"
    assert how_reached("vote", (2, 3)) == "chosen by a vote: 2 of 3 candidates agreed"
    assert how_reached("forced", (1, 1)).endswith("; 1 of 1 candidate agreed")
    assert how_reached(None) is None
    for source in ANSWER_SOURCES:
        assert how_reached(source)


def test_one_table_gives_each_kind_its_words_and_tone_for_every_view():
    # one wording per kind: the notebook's words are the command line's and the export's
    assert ANSWER_SOURCES == {k: s.phrase for k, s in ANSWER_SOURCE_KINDS.items()}
    for kind, words in ANSWER_SOURCE_KINDS.items():
        assert how_reached(kind) == words.phrase == words.sentence
        assert words.phrase[0].islower() and not words.phrase.endswith(".")
        assert words.tone in TONES
    assert how_reached("output") == "taken from text the model wrote, not from a FINAL its code ran"
    # only an answer from the data, or a folder's change ended by finish(), is a plain
    # success (and a result that does not say)
    assert [k for k in ANSWER_SOURCE_KINDS if is_plain(k)] == ["data", "finish"]
    assert [k for k, s in ANSWER_SOURCE_KINDS.items() if s.tone == "ok"] == ["data", "finish"]
    assert is_plain(None) and not is_plain("a kind from elsewhere")
    assert how_reached("a kind from elsewhere") == "a kind from elsewhere"


@pytest.mark.parametrize("kind", sorted(ANSWER_SOURCE_KINDS))
def test_each_answer_ending_is_the_kinds_words_and_tone(kind):
    end = run_ending(True, "final", kind)
    assert end == RunEnding(kind, ANSWER_SOURCE_KINDS[kind].tone,
                            f"The answer was {ANSWER_SOURCE_KINDS[kind].phrase}.")
    # an answer kept when the run then stopped otherwise is never a plain success
    late = run_ending(True, "interrupt", kind)
    assert late.tone != "ok"
    assert late.words.endswith("; the run stopped because you interrupted it.")


@pytest.mark.parametrize("stopped_by", sorted(STOP_REASONS))
def test_each_ending_without_an_answer_is_said_and_never_green(stopped_by):
    end = run_ending(False, stopped_by, None)
    assert end.kind == "no_answer" and end.words.startswith("No answer")
    assert end.tone == ("error" if stopped_by == "error" else "caution")
    # a source left on a result without an answer changes nothing (never green)
    assert run_ending(False, stopped_by, "data") == end
    assert run_ending(False, "a reason from elsewhere", "data").tone == "caution"


def test_the_interrupted_ending_is_amber_and_says_so():
    end = run_ending(False, "interrupt", None)
    assert (end.tone, end.words) == ("caution", "No answer: you interrupted the run.")
    assert TONES[end.tone]["widget"] == "warning" and TONES["ok"]["bar"] != TONES[end.tone]["bar"]


def test_a_vote_and_no_data_say_so_in_the_ending():
    assert run_ending(True, "final", "vote", (2, 3)).words == (
        "The answer was chosen by a vote: 2 of 3 candidates agreed.")
    assert run_ending(True, "final", "no_input", no_data=True).words == (
        "The answer was reached without any data (none was given).")
    assert run_ending(True, "final", None).tone == "ok"


# -- each kind on a run ---------------------------------------------------------------------
def test_data_when_the_final_comes_from_code_that_read_the_context(executor):
    rlm, _, events = make([block("n = len(context)\nprint(n)"), block("FINAL(n)")])
    res = rlm.run("How long?", context="hello world", executor=executor)
    assert (res.answer, res.answer_source, res.votes) == ("11", "data", None)
    finished = [e for e in events if e.kind == "run_finished"][-1]
    assert finished.answer_source == "data" and finished.votes is None
    assert res.summary()["answer_source"] == "data"


def test_no_input_when_the_code_never_read_the_given_data(executor):
    rlm, _, _ = make([block("x = 2 + 2\nprint(x)"), block("FINAL(x)")])
    res = rlm.run("What is 2+2?", context="hello world", executor=executor)
    assert res.answer == "4" and res.answer_source == "no_input"


def test_a_named_variable_counts_as_data(executor):
    rlm, _, _ = make([block("FINAL(len(rows))")])
    res = rlm.run("How many rows?", executor=executor, rows=[1, 2, 3])
    assert res.answer == "3" and res.answer_source == "data"


def test_a_search_without_data_reads_the_context(executor):
    rlm, _, _ = make([block("hits = search('world')\nprint(hits)"),
                      block("FINAL(hits[0]['line'])")])
    res = rlm.run("Which line?", context="hello\nworld", executor=executor)
    assert res.answer == "2" and res.answer_source == "data"


@pytest.fixture(scope="module", params=EXECUTORS)
def one_executor(request):
    """One executor of each kind for many short runs (an isolated worker starts once)."""
    ex = new_executor(request.param)
    yield ex
    close_executor(ex)


# -- only reads in code that ran count (red-team case y09) --------------------------------
@pytest.mark.parametrize("code, source", [
    ("n = len(context)\nFINAL(n)", "data"),  # the control: a real read
    ("if False:\n    context\nanswer = 6 * 7\nFINAL(answer)", "no_input"),  # dead code
    ("_ = 'context'  # never used\nanswer = 6 * 7\nFINAL(answer)", "no_input"),
    ("print('context')\nanswer = 6 * 7\nFINAL(answer)", "no_input"),
    ("del context\nanswer = 6 * 7\nFINAL(answer)", "no_input"),
    ("answer = 6 * 7 if True else len(context)\nFINAL(answer)", "no_input"),  # same line
    ("def f():\n    return len(context)\nFINAL(f())", "data"),  # defined and called
    ("def f():\n    return len(context)\nanswer = 6 * 7\nFINAL(answer)", "no_input"),
    ("n = [len(context) for _ in range(1)][0]\nFINAL(n)", "data"),
    ("n = [len(context) for _ in range(0)]\nanswer = 6 * 7\nFINAL(answer)", "no_input"),
    ("g = lambda: len(context)\nFINAL(g())", "data"),
    ("g = lambda: len(context)\nanswer = 6 * 7\nFINAL(answer)", "no_input"),
    ("def f(context):\n    return len(context)\nFINAL(f('xyz'))", "no_input"),  # a parameter
    ("context = 'xyz'\nFINAL(len(context))", "no_input"),  # the model's own rebinding
    ("n = len(globals()['context'])\nFINAL(n)", "data"),
    ("n = len(globals().get('context'))\nFINAL(n)", "data"),
    ("n = len(eval('context'))\nFINAL(n)", "data"),
    ("d = {'context': 'xyz'}\nFINAL(len(d['context']))", "no_input"),  # another dict
    ("FINAL_VAR('context')", "data"),
    ("if False:\n    FINAL_VAR('context')\nanswer = 6 * 7\nFINAL(answer)", "no_input"),
    ("if False:\n    search('x')\nanswer = 6 * 7\nFINAL(answer)", "no_input"),
    ("hits = search('world')\nFINAL(len(hits))", "data"),
    ("n = 0\nn += len(context)\nFINAL(n)", "data"),
])
def test_only_reads_in_code_that_ran_count(one_executor, code, source):
    rlm, _, _ = make([block(code)])
    res = rlm.run("How long?", context="hello world", executor=one_executor)
    assert res.answer is not None and res.answer_source == source
    assert res.history.entries[-1].names_read is not None  # the executor kept a record


def test_a_function_an_earlier_step_defined_reads_when_a_later_step_calls_it(one_executor):
    rlm, _, _ = make([block("def f():\n    return len(context)\nprint('defined')"),
                      block("FINAL(f())")])
    res = rlm.run("How long?", context="hello world", executor=one_executor)
    assert (res.answer, res.answer_source) == ("11", "data")
    assert [e.names_read for e in res.history.entries] == [[], ["context"]]


def test_a_read_before_an_error_counts_and_one_after_it_does_not(one_executor):
    rlm, _, _ = make([block("n = len(context)\n1 / 0"), block("FINAL(n)")])
    assert rlm.run("q", context="abc", executor=one_executor).answer_source == "data"
    rlm, _, _ = make([block("1 / 0\nn = len(context)"), block("FINAL(6 * 7)")])
    assert rlm.run("q", context="abc", executor=one_executor).answer_source == "no_input"


@pytest.mark.parametrize("code, source", [
    ("FINAL(len(read('notes.txt')))", "data"),  # a folder helper that ran
    ("FINAL(len(open('notes.txt').read()))", "data"),
    ("import pathlib\nFINAL(len(pathlib.Path('notes.txt').read_text()))", "data"),
    ("if False:\n    read('notes.txt')\nanswer = 6 * 7\nFINAL(answer)", "no_input"),
    ("def f():\n    return open('notes.txt').read()\nanswer = 6 * 7\nFINAL(answer)",
     "no_input"),
])
@pytest.mark.parametrize("kind", EXECUTORS)
def test_a_working_folder_is_read_only_by_code_that_ran(tmp_path, kind, code, source):
    (tmp_path / "notes.txt").write_text("first line\n")
    rlm, _, _ = make([block(code)], workdir=str(tmp_path), executor=kind)
    res = rlm.run("How long are the notes?")
    assert res.answer is not None and res.answer_source == source
    assert res.history.entries[-1].names_read is not None  # the executor kept a record


def test_a_worker_that_dies_after_its_final_claims_no_read():
    """No reply from the worker (it exited after FINAL): the step claims no read, so a
    name of the input in its dead code does not make the answer data."""
    code = ("if False:\n    context\nanswer = 6 * 7\ntry:\n    FINAL(answer)\n"
            "finally:\n    import os\n    os._exit(1)")
    rlm, _, _ = make([block(code)], executor="isolated")
    res = rlm.run("q", context="hello world")
    assert (res.answer, res.answer_source) == ("42", "no_input")
    assert res.history.entries[-1].names_read == []


def test_an_executor_without_a_record_is_read_statically():
    """A step whose executor keeps no record (``names_read`` None) is read from its code."""
    from rlm_kernel.engine.answer.sources import any_input_read
    from rlm_kernel.repl_types import REPLEntry

    dead = "if False:\n    context\nFINAL(42)"
    assert any_input_read([REPLEntry(code=dead)], {"context"})  # reached or not
    assert not any_input_read([REPLEntry(code=dead, names_read=[])], {"context"})
    assert any_input_read([REPLEntry(code="", names_read=["search()"])], {"context"},
                          data_name="context")


def test_a_task_with_no_data_is_told_so_and_its_answer_is_no_input(executor):
    """The walk's failure: the model invents `context` itself."""
    rlm, lm, events = make([block("context = {'data': 'This is a sample text'}\n"
                                  "print(list(context))"),
                            block("FINAL(list(context)[0])")])
    res = rlm.run("What is the first key?", executor=executor)
    assert res.answer == "data" and res.stopped_by == "final"
    assert res.answer_source == "no_input"
    started = events[0]
    assert started.kind == "run_started" and started.no_data is True
    assert started.inputs == [] and started.variables == []
    assert [e.kind for e in events].index("run_started") < \
        [e.kind for e in events].index("model_call")  # told before the first model call
    assert res.variables == []  # the invented variable is never an input
    assert [v.name for v in res.new_variables] == ["context"]
    for messages in lm.calls:  # every call: the task message says there is no data
        assert NO_DATA_NOTE in messages[1]["content"]
        assert "context (dict" not in messages[1]["content"]


def test_a_task_with_data_is_not_told_there_is_none():
    rlm, lm, events = make([block("FINAL(len(context))")])
    rlm.run("How long?", context="abc", executor=PlainExecutor())
    assert NO_DATA_NOTE not in lm.calls[0][1]["content"]
    assert events[0].no_data is False and events[0].inputs == ["context"]


def test_a_tool_is_an_input_and_no_data_is_not_said():
    def lookup(key: str) -> int:
        """The user's table."""
        return {"a": 7}[key]

    rlm, lm, events = make([block("FINAL(lookup('a'))")], tools=[lookup])
    res = rlm.run("What is a?", executor=PlainExecutor())
    assert res.answer == "7" and res.answer_source == "data"
    assert events[0].no_data is False and NO_DATA_NOTE not in lm.calls[0][1]["content"]


def test_ungrounded_when_the_checked_final_is_still_found_nowhere(executor):
    rlm, _, events = make([block("print(len(context))"), block("FINAL('foo.py')"),
                           block("FINAL('nope.py')")], ground_answer=True)
    res = rlm.run("Which file?", context="a.py\nb.py", executor=executor)
    assert res.answer == "nope.py" and res.answer_source == "ungrounded"
    assert [e.reason for e in events if e.kind == "answer_check"] == ["grounding"]


def test_a_literal_the_output_holds_is_data():
    rlm, _, _ = make([block("print(context.splitlines()[1])"), block("FINAL('b.py')")])
    res = rlm.run("Which file?", context="a.py\nb.py", executor=PlainExecutor())
    assert res.answer == "b.py" and res.answer_source == "data"


def test_forced_after_the_step_limit(executor):
    rlm, _, _ = make([block("n = len(context)"), block("print(n)"), block("FINAL(n)")],
                     max_iterations=2)
    res = rlm.run("How long?", context="abc", executor=executor)
    assert res.stopped_by == "max_iterations" and res.answer == "3"
    assert res.answer_source == "forced"


def test_a_stuck_runs_answer_is_forced_but_no_input_comes_first():
    rlm, _, _ = make([block("print(data)")] * 3 + [block("x = 7\nFINAL(x)")])
    res = rlm.run("q", context="abc", executor=PlainExecutor())
    assert res.stopped_by == "stuck" and res.answer == "7"
    assert res.answer_source == "no_input"  # it never read `context`
    rlm, _, _ = make([block("print(data)")] * 3 + [block("FINAL(len(context))")])
    res = rlm.run("q", context="abc", executor=PlainExecutor())
    assert res.stopped_by == "stuck" and (res.answer, res.answer_source) == ("3", "forced")


def test_no_answer_has_no_source():
    rlm, _, events = make([block("n = len(context)"), block("print(n)"), "I do not know."],
                          max_iterations=2)
    res = rlm.run("How long?", context="abc", executor=PlainExecutor())
    assert res.answer is None and res.answer_source is None
    assert events[-1].answer_source is None


def test_output_when_the_final_is_written_in_prose():
    rlm, _, _ = make([block("print(context)"), "The answer is FINAL('hello')"])
    res = rlm.run("First word?", context="hello world", executor=PlainExecutor())
    assert res.answer == "hello" and res.answer_source == "output"


def test_output_when_a_policy_stops_with_the_models_words():
    rlm, _, _ = make([block("RLM_REWARD = 1.0\nprint(len(context))", thought="It is 11.")],
                     termination="reward_threshold", termination_config={"threshold": 0.5})
    res = rlm.run("How long?", context="hello world", executor=PlainExecutor())
    assert res.stopped_by == "final" and res.answer and res.answer_source == "output"


def test_vote_with_k_of_n(executor):
    replies = [block("n = len(context)\nFINAL(n)")] * 2
    rlm, _, events = make(replies, candidates=3)
    res = rlm.run("How long?", context="abc", executor=executor)
    assert res.answer == "3" and res.answer_source == "vote" and res.votes == (2, 2)
    finished = [e for e in events if e.kind == "run_finished"]
    assert len(finished) == 1
    assert finished[0].answer_source == "vote" and finished[0].votes == (2, 2)
    assert res.summary()["votes"] == [2, 2]


def test_a_vote_does_not_hide_an_answer_made_without_the_data():
    rlm, _, _ = make([block("x = 2 + 2\nFINAL(x)")] * 2, candidates=3)
    res = rlm.run("What is 2+2?", context="abc", executor=PlainExecutor())
    assert res.answer == "4" and res.answer_source == "no_input" and res.votes == (2, 2)


def test_a_child_reports_its_own_source():
    replies = [block("a = rlm_query('inner task', context='abcd')\nprint(a)"),
               block("FINAL(7)"),  # the child's step: reads nothing of its context
               block("FINAL(len(context) + int(a))")]
    rlm, _, events = make(replies, max_depth=1)
    res = rlm.run("outer", context="x", executor=PlainExecutor())
    child = [e for e in events if e.kind == "run_finished" and e.depth == 1]
    assert len(child) == 1 and child[0].answer_source == "no_input"
    assert child[0].result.answer_source == "no_input"
    assert res.answer == "8" and res.answer_source == "data"


def test_a_variable_an_earlier_task_left_is_not_the_users_input():
    ex = PlainExecutor()
    history = Conversation()
    first, _, _ = make([block("hits = [h['line'] for h in search('b')]\nFINAL(hits)")])
    res1 = first.run("Where is b?", context="a\nb", executor=ex, history=history)
    assert res1.answer_source == "data"
    history.record(res1, ex.namespace)
    del ex.namespace["context"]  # the user's data is gone; `hits` is the model's
    second, lm, events = make([block("FINAL(len(hits))")])
    res2 = second.run("How many?", executor=ex, history=history,
                      variables=user_variables(ex.namespace))
    assert events[0].inputs == []
    assert res2.answer == "1" and res2.answer_source == "no_input"


# -- the real embedded model --------------------------------------------------------------
@pytest.mark.slow
def test_a_task_with_no_data_on_the_embedded_model_is_no_input():
    events: list[Event] = []
    res = RLM(max_iterations=4, observer=events.append).run(
        "What is 17 times 23? Compute it.")
    started = events[0]
    assert started.no_data is True and started.inputs == []
    assert started.variables == [] and res.variables == []
    assert res.answer is not None, (res.stopped_by, res.error)
    assert res.answer_source == "no_input"
    assert [e.answer_source for e in events if e.kind == "run_finished"
            and e.depth == 0] == ["no_input"]
