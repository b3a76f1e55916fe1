"""The progress and variables widgets, driven by events recorded from a scripted run."""

from __future__ import annotations

import math
import time
import types

import ipywidgets as w
import pytest

from rlm_kernel import RLM
from rlm_kernel.engine.events import (
    Event,
    ModelCall,
    RunFinished,
    RunStarted,
    StepNotice,
    StepStarted,
)
from rlm_kernel.engine.result import ANSWER_SOURCES, RLMResult
from rlm_kernel.executors import PlainExecutor
from rlm_kernel.jupyter.variables_view import _CELL, ROOT_STYLE, static_html
from rlm_kernel.jupyter.widgets import (
    ProgressView,
    RunView,
    VariablesView,
    variables_from_namespace,
)
from rlm_kernel.models.scripted import ScriptedModel
from rlm_kernel.repl_types import REPLVariable
from tests.replies import block


def record(replies, context="hello world", executor=None, **cfg) -> list[Event]:
    """Run a scripted RLM and return every event it emitted."""
    events: list[Event] = []
    lm = ScriptedModel(replies, cost_usd=0.00125)
    rlm = RLM(root_client=lm, sub_client=lm, observer=events.append, verify_answer=False, **cfg)
    rlm.run("How long?", context=context, executor=executor)
    return events


SCRIPT = [block("n = len(context)\nprint(n)"),
          block("parts = llm_query_batched(['a', 'b', 'c'])\nprint(parts)"),
          block("FINAL(n)")]


@pytest.fixture(scope="module")
def events() -> list[Event]:
    return record(SCRIPT, max_iterations=5)


def test_progress_replays_a_run(events):
    view = ProgressView(10, tick=None)
    assert isinstance(view.widget, w.DOMWidget)
    assert view.step_label.value == "step 0 of 10"
    seen = []
    for ev in events:
        view.on_event(ev)
        seen.append(view.activity_label.value)
    # the run ended at step 3 of 5: the bar is full and reads the steps it ran
    assert view.bar.max == 5 and view.bar.value == 5
    assert view.step_label.value == "3 steps, final"
    assert "waiting for the model (step 2)" in seen
    assert "running step 3" in seen
    assert any("sub-calls 3 done, 0 in flight" in s for s in seen)
    assert view.activity_label.value == ""  # nothing more to say than the ending
    assert view.note == "The answer was computed by the model's code from your data."
    assert view.bar.bar_style == "success"
    # 3 root calls + 3 sub-calls, 10 prompt / 5 completion tokens and $0.00125 each
    assert view.tokens_label.value == "60 prompt + 30 completion tokens"
    assert view.cost_label.value == "$0.0075"
    final = events[-1].elapsed
    assert view.elapsed_label.value == f"{final:.1f} s"
    line = view.text()
    assert "3 steps, final" in line and "60 prompt" in line and "$0.0075" in line
    assert line.endswith(" · The answer was computed by the model's code from your data.")
    assert "\n" not in line


def test_progress_shows_budget_stop_and_error(events):
    stop = record([block("print(1)")] * 5, max_llm_calls=2)
    view = ProgressView(10, tick=None)
    for ev in stop:
        view.on_event(ev)
    # said once, in words (the ending), then the details (the budget's message)
    assert view.note == "No answer: the run reached its budget."
    assert "2 LLM calls" in view.activity_label.value
    assert view.bar.bar_style == "warning"  # a limit the user set, not an error: amber
    assert 'data-rlm-tone="caution"' in view.widget.value


def test_sub_run_events_only_change_activity(events):
    view = ProgressView(10, tick=None)
    view.on_event(events[0])
    view.on_event(StepStarted(depth=0, elapsed=1.0, step=2, code="", reasoning="",
                              totals=totals(prompt_tokens=7)))
    view.on_event(ModelCall(depth=1, elapsed=0.1, step=4, totals=totals(prompt_tokens=9)))
    assert view.step_label.value == "step 2 of 5"
    assert view.elapsed_label.value == "1.0 s"
    assert view.activity_label.value == "step 2: sub-run (depth 1) waiting for the model (step 4)"
    assert view.tokens_label.value.startswith("9 prompt")


def test_answer_now_step_is_past_the_budget():
    evs = record([block("print(1)"), block("FINAL('late')")], max_iterations=1)
    view = ProgressView(1, tick=None)
    for ev in evs:
        view.on_event(ev)
    assert view.bar.value == 1 and view.bar.max == 1
    assert view.step_label.value == "2 steps, max_iterations"  # the answer-now step ran
    assert view.note == ("The answer was reached without reading your data; the run stopped "
                         "because it reached its step limit.")
    assert view.activity_label.value == ""  # no details: the reason is said once
    assert view.bar.bar_style == "warning"


def test_the_answer_now_call_is_shown_as_that_while_it_runs():
    evs = record([block("print(1)"), block("FINAL('late')")], max_iterations=1)
    view = ProgressView(1, tick=None)
    for ev in evs:
        view.on_event(ev)
        if isinstance(ev, StepStarted) and ev.answer_now:
            assert view.step_label.value == "answer now (the run had stopped)"
            assert view.activity_label.value == "running the answer now (the run had stopped)"
    assert [ev.answer_now for ev in evs if isinstance(ev, StepStarted)] == [False, True]


def test_ticker_moves_time_and_stops_at_run_finished(events):
    view = ProgressView(5, tick=0.02)
    view.on_event(events[0])
    assert view.ticking
    time.sleep(0.3)
    assert float(view.elapsed_label.value.split()[0]) > 0.1
    view.on_event(events[-1])
    deadline = time.monotonic() + 2
    while view.ticking and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not view.ticking
    assert view.elapsed_label.value == f"{events[-1].elapsed:.1f} s"


def test_ticker_stops_on_close(events):
    view = ProgressView(5, tick=0.02)
    view.on_event(events[0])
    assert view.ticking
    view.close()
    assert not view.ticking
    view.close()  # idempotent


def test_variables_table_rows_and_escaping():
    vars_ = [REPLVariable.from_value("context", "x" * 12_345),
             REPLVariable.from_value("evil", "<script>alert(1)</script>\nline two"),
             REPLVariable.from_value("rows", list(range(5000)))]
    view = VariablesView()
    assert "No variables" in view.widget.value and view.text() == "no variables"
    view.update(vars_)
    table = view.widget.value
    assert table.count(_CELL) == 4 * 4  # header + 3 rows, four columns each
    assert "12,345 characters" in table and "5,000 items" in table
    assert "<script>" not in table and "&lt;script&gt;alert(1)&lt;/script&gt; line two" in table
    assert "x" * 80 + "..." in table and "x" * 81 not in table
    assert view.text() == ("3 variables: context (str, 12,345 characters), "
                           "evil (str, 34 characters), rows (list, 5,000 items)")


def test_variables_from_namespace_filters():
    def helper():
        return 1

    ns = {"context": "abc", "n": 3, "_private": 1, "math": math, "helper": helper,
          "In": [""], "Out": {}, "exit": object(), "quit": object(), "get_ipython": helper,
          "FINAL": print, "SHOW_VARS": print, "llm_query": print, "rlm_query": 4,
          "Klass": int, "mod": types.ModuleType("m")}
    got = variables_from_namespace(ns)
    assert [v.name for v in got] == ["context", "n"]
    assert got[0].total_length == 3 and got[0].preview == "abc"
    picked = variables_from_namespace(ns, names=["n", "_private"])
    assert [v.name for v in picked] == ["n", "_private"]
    with pytest.raises(KeyError, match="missing"):
        variables_from_namespace(ns, names=["n", "missing"])


def test_variables_preview_is_bounded():
    ns = {"big": "y" * 5_000_000, "many": list(range(2_000_000))}
    t0 = time.perf_counter()
    for _ in range(10):
        big, many = variables_from_namespace(ns)
    assert time.perf_counter() - t0 < 0.1  # a full JSON dump of `many` alone takes longer
    assert big.total_length == 5_000_000 and len(big.preview) == 203
    assert (many.total_length, many.length_unit) == (2_000_000, "items")


def test_run_view_refreshes_from_namespace():
    ex = PlainExecutor()
    snapshots: list[tuple[Event, dict]] = []  # each event with the namespace at that time
    lm = ScriptedModel(SCRIPT)
    rlm = RLM(root_client=lm, sub_client=lm, max_iterations=5, verify_answer=False,
              observer=lambda ev: snapshots.append((ev, dict(ex.namespace))))
    rlm.run("How long?", context="hello world", executor=ex)
    ns: dict = {}
    view = RunView(5, namespace=ns, names=None, tick=None)
    assert all(isinstance(x, w.HTML) for x in view.widgets) and len(view.widgets) == 2
    assert ">Variables the model sees</summary>" in view.variables.widget.value
    shown = []
    for ev, snap in snapshots:
        ns.clear()
        ns.update(snap)
        view.on_event(ev)
        if ev.kind in ("run_started", "step_finished"):
            shown.append([v.name for v in view.variables.variables])
    assert shown == [["context"], ["context", "n"], ["context", "n", "parts"],
                     ["context", "n", "parts"]]
    assert "[ &quot;sub:a&quot;, &quot;sub:b&quot;, &quot;sub:c&quot; ]" in view.variables.widget.value
    line = view.text()
    assert "3 steps, final" in line and "context (str, 11 characters)" in line
    assert "parts (list, " in line and "\n" not in line


def test_run_view_without_namespace_uses_run_started_metadata(events):
    view = RunView(5, tick=None)
    for ev in events:
        view.on_event(ev)
    assert [v.name for v in view.variables.variables] == ["context"]
    assert "11 characters" in view.variables.widget.value
    assert not view.progress.ticking
    view.close()


def test_run_view_names_filter(events):
    ns = {"context": "abc", "other": [1, 2]}
    view = RunView(5, namespace=ns, names=["other"], tick=None)
    view.on_event(events[0])
    assert [v.name for v in view.variables.variables] == ["other"]


def test_run_view_reports_a_missing_name_without_raising(events):
    view = RunView(5, namespace={"context": "abc"}, names=["later"], tick=None)
    view.on_event(events[0])
    assert "no variable named &#x27;later&#x27;" in view.variables.widget.value
    with pytest.raises(KeyError, match="later"):
        view.refresh()


def test_a_run_view_opens_two_comms_and_dispose_closes_them():
    views = [RunView(5, tick=None) for _ in range(30)]
    widgets = [x for v in views for x in v.widgets]
    assert len(widgets) == 60 and all(x.comm is not None for x in widgets)
    # one layout and one style for all of them: no comms of their own per widget
    assert len({id(x.layout) for x in widgets}) == 1
    assert len({id(x.style) for x in widgets}) == 1
    for view in views:
        view.dispose()
    assert all(x.comm is None for x in widgets)


def test_progress_is_drawn_into_its_one_widget():
    view = ProgressView(4, tick=None)
    view.on_event(started(max_iterations=4, elapsed=0.0))
    view.on_event(ModelCall(depth=0, elapsed=0.5, step=2))
    assert "step 2 of 4" in view.widget.value and "width:50%" in view.widget.value
    assert "waiting for the model (step 2)" in view.widget.value


@pytest.mark.parametrize("replies, cfg, label, colour", [
    ([block("n = len(context)\nprint(n)"), block("FINAL(n)")], {"max_iterations": 4},
     "2 steps, final", "#4caf50"),
    ([block("print(1)")] * 3, {"max_iterations": 4, "max_llm_calls": 1}, "1 step, budget",
     "#ff9800"),
    ([block("print(1)"), "No code."], {"max_iterations": 1}, "1 step, max_iterations",
     "#ff9800"),
])
def test_a_finished_run_shows_a_full_bar_and_the_steps_it_ran(replies, cfg, label, colour):
    view = ProgressView(9, tick=None)
    for ev in record(replies, **cfg):
        view.on_event(ev)
    budget = cfg["max_iterations"]
    assert (view.bar.value, view.bar.max) == (budget, budget)
    assert view.step_label.value == label
    drawn = view.widget.value
    assert "width:100%" in drawn and f"background:{colour}" in drawn
    assert f"step 1 of {budget}" not in drawn and label in drawn


def test_the_table_counts_containers_in_items_and_only_strings_in_characters():
    ns = {"hits": ["x" * 100, "y" * 100], "context": "abc", "one": ("a",),
          "d": {"k": 1, "j": 2}, "n": 3, "raw": b"ab", "rows": list(range(5000))}
    view = VariablesView(title="Variables")
    view.update(variables_from_namespace(ns))
    assert view.text() == ("7 variables: hits (list, 2 items), context (str, 3 characters), "
                           "one (tuple, 1 item), d (dict, 2 items), n (int), "
                           "raw (bytes, 2 bytes), rows (list, 5,000 items)")
    table = view.widget.value
    assert "2 items" in table and "1 item<" in table and "characters" in table
    assert table.count("characters") == 1  # the str only (a 2-item list was "222 characters")
    plain = view.plain_table().splitlines()
    assert plain[0] == "Variables:"
    assert plain[1].split() == ["Name", "Type", "Length", "Preview"]
    assert plain[2].startswith("hits     list   2 items       [")
    assert plain[6].split() == ["n", "int", "3"]  # no length: the preview only


def test_a_shown_run_view_turns_static_when_the_run_ends(ip, events):
    from IPython.utils.capture import capture_output

    ns = {"context": "hello world", "hits": ["a", "b"]}
    view = RunView(5, namespace=ns, tick=None)
    with capture_output() as cap:
        view.show()
        for ev in events:
            view.on_event(ev)
        live = [w_.comm is not None for w_ in view.widgets]
        view.close()
        view.close()  # idempotent: nothing more is displayed
    shown, updates = cap.outputs[:2], cap.outputs[2:]
    assert live == [True, True]
    assert all("application/vnd.jupyter.widget-view+json" in o.data and not o.update
               for o in shown)
    ids = [o.transient["display_id"] for o in shown]
    assert len(set(ids)) == 2
    assert [(o.transient["display_id"], o.update) for o in updates] == [(i, True) for i in ids]
    assert all(set(o.data) == {"text/html", "text/plain"} for o in updates)
    progress, variables = (o.data for o in updates)
    assert progress["text/plain"].startswith("RLM run: 3 steps, final · ")
    assert "60 prompt + 30 completion tokens" in progress["text/plain"]
    assert "3 steps, final" in progress["text/html"] and "width:100%" in progress["text/html"]
    assert "hits     list  2 items" in variables["text/plain"]
    assert ">Variables the model sees</summary>" in variables["text/html"]
    assert all(w_.comm is None for w_ in view.widgets)  # the comms are closed


def totals(**sums) -> dict:
    """A ``totals`` of zero usage but ``sums``."""
    return {"llm_calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0,
            **sums}


def started(max_iterations: int, elapsed: float = 1.0) -> RunStarted:
    """A top run's ``run_started`` with no variables."""
    return RunStarted(depth=0, elapsed=elapsed, question="q", variables=[],
                      max_iterations=max_iterations, model="scripted", inputs=[],
                      no_data=True)


def finished(**result) -> list[Event]:
    """A run's first and last events, the end carrying an RLMResult made of ``result``."""
    res = RLMResult(question="q", **result)
    return [started(max_iterations=4),
            RunFinished(depth=0, elapsed=1.0, result=res, answer_source=res.answer_source,
                        votes=res.votes)]


@pytest.mark.parametrize("source, votes, sentence", [
    ("output", None, ANSWER_SOURCES["output"]),
    ("ungrounded", None, ANSWER_SOURCES["ungrounded"]),
    # run_started said the run had no data at all: the words say so, as `rlm run` does
    ("no_input", None, "reached without any data (none was given)"),
    ("forced", None, ANSWER_SOURCES["forced"]),
    ("vote", (2, 3), ANSWER_SOURCES["vote"] + ": 2 of 3 candidates agreed"),
])
def test_an_answer_not_from_the_data_is_amber_and_says_how_it_was_reached(source, votes,
                                                                          sentence):
    view = ProgressView(4, tick=None)
    for ev in finished(answer="7", stopped_by="final", answer_source=source, votes=votes):
        view.on_event(ev)
    assert view.bar.bar_style == "warning" and "background:#ff9800" in view.widget.value
    assert view.note == f"The answer was {sentence}."
    assert f">The answer was {sentence}.</div>" in view.widget.value.replace("&#x27;", "'")
    assert view.text().endswith(f"$0.0000 · The answer was {sentence}.")


def test_only_an_answer_from_the_data_is_a_plain_green_success():
    view = ProgressView(4, tick=None)
    for ev in finished(answer="7", stopped_by="final", answer_source="data"):
        view.on_event(ev)
    assert view.bar.bar_style == "success" and "background:#4caf50" in view.widget.value
    # said in words too, not only by colour: the export's words
    assert view.note == "The answer was computed by the model's code from your data."
    assert "computed by the model&#x27;s code from your data" in view.widget.value
    assert 'data-rlm-tone="ok"' in view.widget.value


@pytest.mark.parametrize("stopped_by, answer, style", [
    ("interrupt", "7", "warning"), ("max_iterations", "7", "warning"),
    ("interrupt", None, "warning"), ("max_iterations", None, "warning"),
    ("budget", None, "warning"), ("stuck", None, "warning"), ("error", None, "danger"),
])
def test_red_only_for_an_error_without_an_answer(stopped_by, answer, style):
    view = ProgressView(4, tick=None)
    source = "forced" if answer else None
    for ev in finished(answer=answer, stopped_by=stopped_by, answer_source=source,
                       error="boom" if stopped_by == "error" else None):
        view.on_event(ev)
    assert view.bar.bar_style == style
    assert ("#f44336" in view.widget.value) == (style == "danger")
    assert "#4caf50" not in view.widget.value  # never green
    if answer is None:
        assert view.note.startswith("No answer: ")


def test_a_stuck_run_says_why_it_stopped():
    view = ProgressView(4, tick=None)
    start, end = finished(answer="3", stopped_by="stuck", answer_source="forced")
    view.on_event(start)
    view.on_event(StepNotice(depth=0, elapsed=0.5, step=3, reason="stuck",
                             text="Step 3 repeats step 2 (same code)."))
    view.on_event(end)
    assert view.step_label.value == "0 steps, stuck"
    # that the run stopped is said once (the ending), what it repeated once (the details)
    assert view.note == (f"The answer was {ANSWER_SOURCES['forced']}; "
                         "the run stopped because the model repeated itself.")
    assert view.activity_label.value == "Step 3 repeats step 2 (same code)."
    assert view.text().count("stopped") == 2  # "stopped early" (the kind) and the stop
    assert view.text().count("repeat") == 2 and view.bar.bar_style == "warning"


def test_a_run_that_never_started_leaves_no_progress_block(ip):
    from IPython.utils.capture import capture_output

    view = RunView(12, namespace={"context": "loaded"}, tick=None)
    with capture_output() as cap:
        view.show()
        assert view.progress.activity == "starting…"
        assert "context (str, 6 characters)" in view.variables.text()  # before the run
        view.close()  # the run failed before run_started (a missing API key)
    shown, updates = cap.outputs[:2], cap.outputs[2:]
    assert len(shown) == 2 and len(updates) == 2
    assert [o.transient["display_id"] for o in updates] == \
        [o.transient["display_id"] for o in shown]
    assert all(o.update and o.data == {} for o in updates)  # renders as nothing
    assert all(w_.comm is None for w_ in view.widgets)


def test_the_static_rendering_is_the_live_one_with_its_own_styles(events):
    view = RunView(5, namespace={"context": "hello", "hits": [1, 2]}, tick=None)
    for ev in events:
        view.on_event(ev)
    progress, variables = view.static()
    # the same HTML, in a box with the margin ipywidgets gives the live widget
    assert progress["text/html"] == static_html(view.progress.widget.value)
    assert variables["text/html"] == static_html(view.variables.widget.value)
    assert static_html("x") == '<div class="rlm-static" style="margin:2px;padding:0">x</div>'
    for page in (view.progress.widget.value, view.variables.widget.value):
        # the root sets font, size, line height and wrapping: nothing is inherited from
        # the widget box or from the notebook's rendered-HTML styles
        assert page.startswith("<div class=") and f'style="{ROOT_STYLE}"' in page
        # elements a notebook's HTML output restyles (tables, code) are not used
        assert "<table" not in page and "<code" not in page and "<pre" not in page


def test_five_variables_make_five_aligned_rows_of_four_cells():
    ns = {"context": "x" * 300, "hits": ["a b c"] * 40, "doc": {"k": "v " * 80},
          "n": 12_345, "rows": list(range(100))}
    view = VariablesView(title="Variables")
    view.update(variables_from_namespace(ns))
    page = view.widget.value
    assert "display:grid" in page
    assert "grid-template-columns:max-content max-content max-content minmax(0,1fr)" in page
    assert page.count(_CELL) == 4 * 6
    assert "white-space:nowrap" in _CELL  # a cell never wraps into a ragged row
    assert page.count("text-overflow:ellipsis") == 5  # long previews are cut, not wrapped


def test_a_run_whose_code_never_reads_the_data_is_not_shown_as_a_success():
    """The engine's own answer_source, end to end: the same FINAL is a green success
    when the code read the data, amber with the sentence when it did not."""
    shown = {}
    for name, first in (("read", "n = len(context)\nprint(n)"), ("not read", "n = 7\nprint(n)")):
        view = ProgressView(9, tick=None)
        for ev in record([block(first), block("FINAL(n)")], max_iterations=4):
            view.on_event(ev)
        shown[name] = (view.bar.bar_style, view.note)
    assert shown["read"] == ("success", f"The answer was {ANSWER_SOURCES['data']}.")
    assert shown["not read"] == ("warning", f"The answer was {ANSWER_SOURCES['no_input']}.")
