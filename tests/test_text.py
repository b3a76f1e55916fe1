"""The text toolkit (``rlm_kernel.text``): one middle-cut with one marker, and the bound of
a value's repr; then every path that cuts text the model or the user reads uses that one
marker (plain and isolated executor output, the model's view of a step, the answer
check, conversation findings, the export) and none of the old ones."""

from __future__ import annotations

import re

import pytest

from rlm_kernel.engine.session.conversation import HISTORY_NAME, Conversation, TaskRecord
from rlm_kernel.executors import IsolatedExecutor, PlainExecutor, WorkFolder
from rlm_kernel.export import export_run
from rlm_kernel.repl_types import REPLEntry
from rlm_kernel.text import (
    MAX_KEPT_CHARS,
    PRINT_LESS,
    REPR_CHARS,
    HeadTail,
    cut_marker,
    head_room,
    middle_cut,
    short_repr,
)
from tests.replies import block
from tests.scripted import scripted_rlm

MARKER = re.compile(r"\[\.\.\. (?P<cut>[\d,]+) characters cut: (?P<hint>[^\]]+) \.\.\.\]")
"""The one marker, as the model reads it."""
OLD_MARKERS = ("characters of output dropped", "characters truncated", "cut here",
               "(truncated)")


def cut_of(text: str) -> tuple[int, str]:
    """The count and hint of the one marker in ``text`` (which holds exactly one)."""
    found = MARKER.findall(text)
    assert len(found) == 1, f"{len(found)} markers in {text[:200]!r}..."
    assert not any(old in text for old in OLD_MARKERS)
    count, hint = found[0]
    return int(count.replace(",", "")), hint


def lines(n: int) -> str:
    return "".join(f"line {i}\n" for i in range(n))


# -- the cut --------------------------------------------------------------------------------
def test_text_within_the_limit_is_whole():
    assert middle_cut("abc", 3) == "abc"
    assert middle_cut("", 0) == ""


def test_a_line_is_cut_to_two_thirds_head_and_a_third_tail_with_the_marker_between():
    text = "".join(chr(ord("a") + i % 26) for i in range(1000))
    assert middle_cut(text, 90) == f"{text[:60]} [... 910 characters cut: print less ...] " \
                                   f"{text[-30:]}"
    assert head_room(90) == 60


def test_text_with_lines_gets_the_marker_on_a_line_of_its_own():
    text = lines(1000)
    cut = middle_cut(text, 300, "grep it")
    head, marker, tail = cut.split("\n[... ")[0], cut_of(cut), cut.split(" ...]\n")[1]
    assert text.startswith(head) and text.endswith(tail)
    assert len(head) + len(tail) == 300
    assert marker == (len(text) - 300, "grep it")


def test_the_marker_counts_with_separators_and_says_what_to_do():
    assert cut_marker(1234567) == "[... 1,234,567 characters cut: print less ...]"
    assert cut_marker(5, "read a smaller range") == "[... 5 characters cut: read a smaller range ...]"
    assert PRINT_LESS == "print less"


def test_a_negative_limit_is_refused():
    with pytest.raises(ValueError, match=">= 0"):
        middle_cut("abc", -1)


@pytest.mark.parametrize("size", [0, 1, 299, 300, 301, 5000])
@pytest.mark.parametrize("piece", [1, 7, 1000])
def test_text_kept_in_pieces_is_cut_as_the_whole_would_be(size, piece):
    text = lines(size)[:size * 3]
    kept = HeadTail(300)
    for i in range(0, len(text), piece):
        kept.add(text[i:i + piece])
    assert kept.text() == middle_cut(text, 300)
    assert kept.total == len(text) and kept.cut == max(0, len(text) - 300)


# -- the repr's bound -------------------------------------------------------------------------
def test_a_repr_is_bounded_and_its_end_marked():
    assert short_repr([1, 2]) == "[1, 2]"
    long = short_repr("x" * 10**6)
    assert len(long) <= REPR_CHARS and "..." in long
    assert short_repr(list(range(1000)), 40) == repr(list(range(1000)))[:37] + "..."
    deep: list = []
    for _ in range(10):
        deep = [deep]
    assert "[...]" in short_repr(deep)


# -- every path uses the one marker ----------------------------------------------------------
def test_the_plain_executor_cuts_a_steps_output_with_the_marker():
    res = PlainExecutor(max_output_chars=300).execute("for i in range(1000):\n    print(i)")
    assert res.stdout.startswith("0\n1\n") and res.stdout.endswith("998\n999\n")
    assert cut_of(res.stdout) == (sum(len(f"{i}\n") for i in range(1000)) - 300, PRINT_LESS)


def test_the_isolated_executor_cuts_a_steps_output_with_the_same_marker():
    """A real worker process behind the sandbox: its output is read by the host and
    kept as the in-process executor keeps it, so the two agree character for character."""
    code = "import sys\nfor i in range(1000):\n    print(i)\nsys.stderr.write('e' * 5000)"
    plain = PlainExecutor(max_output_chars=300).execute(code)
    with IsolatedExecutor(max_output_chars=300) as ex:
        isolated = ex.execute(code)
    assert (isolated.stdout, isolated.stderr) == (plain.stdout, plain.stderr)
    assert cut_of(isolated.stdout)[1] == PRINT_LESS
    assert cut_of(isolated.stderr) == (5000 - 300, PRINT_LESS)


def test_a_working_folder_helper_cuts_with_the_marker_and_its_own_hint(tmp_path):
    (tmp_path / "big.txt").write_text(lines(2000))
    shown = WorkFolder(tmp_path, max_output_chars=300).read("big.txt")
    assert cut_of(shown)[1] == "read('big.txt', start, end) a smaller range of lines"


def test_the_models_view_of_a_step_and_the_history_use_the_marker():
    rlm, lm = scripted_rlm([block("for i in range(5000):\n    print(i)"), block("FINAL('done')")],
                           max_output_chars=500)
    res = rlm.run("q", context="x")
    assert res.answer == "done"
    shown = lm.calls[1][-1]["content"]
    assert cut_of(shown)[1] == PRINT_LESS
    assert "4999" in shown and "\n0\n1\n" in shown
    output = res.history.entries[0].output
    assert MARKER.search(output) is None  # 24,890 characters: kept whole for the user
    assert cut_of(REPLEntry(output=output).format(1))[1] == PRINT_LESS


def test_the_answer_check_shows_the_last_output_cut_with_the_marker():
    rlm, lm = scripted_rlm([block("print('z' * 3000)\nFINAL('z')"), block("FINAL('z')")],
                           verify_answer=True)
    rlm.run("q", context="x")
    check = lm.calls[1][-1]["content"]
    assert check.startswith("You called FINAL with")
    assert cut_of(check) == (3000 - 800, PRINT_LESS)


def test_a_huge_answer_text_is_cut_with_the_marker_and_its_value_kept():
    rlm, _ = scripted_rlm([block(f"FINAL('a' * {MAX_KEPT_CHARS * 3})")])
    res = rlm.run("q", context="x")
    assert len(res.answer_value) == MAX_KEPT_CHARS * 3
    assert cut_of(res.answer) == (MAX_KEPT_CHARS * 2, "the answer's value is kept whole")


def test_conversation_findings_cut_long_questions_and_answers_with_the_marker():
    question = "Which of these is the one? " + "and this " * 100 + "the end?"
    task = TaskRecord(question=question, answer="x" * 5000, stopped_by="final")
    section = Conversation([task, TaskRecord("q2", "a2", "final")], keep_full=1).prompt_section()
    assert section is not None
    one_line = next(line for line in section.splitlines() if line.startswith("1. Task:"))
    assert one_line.startswith("1. Task: Which of these is the one?")
    found = MARKER.findall(one_line)
    assert [hint for _, hint in found] == [f"the whole is in {HISTORY_NAME}"] * 2
    assert not any(old in section for old in OLD_MARKERS)


def test_the_export_keeps_the_cut_output_with_the_marker(tmp_path):
    rlm, _ = scripted_rlm([block(f"print('q' * {MAX_KEPT_CHARS * 2})"), block("FINAL('ok')")])
    res = rlm.run("q", context="x")
    nb = export_run(res, tmp_path / "run.ipynb")
    streams = [out for cell in nb.cells if cell.cell_type == "code"
               for out in cell.get("outputs", []) if out.get("output_type") == "stream"]
    text = "".join(out["text"] for out in streams)
    assert cut_of(text) == (MAX_KEPT_CHARS + 1, PRINT_LESS)
    assert (tmp_path / "run.ipynb").stat().st_size < 3 * MAX_KEPT_CHARS


def test_a_notebook_step_that_prints_too_much_reaches_the_model_with_the_marker():
    """A real ``rlm`` kernel started by jupyter_client, ``%rlm`` over a scripted model: the
    model's next prompt shows the step's output cut with the one marker, its last line
    included.  (The task cell shows the output live as it is printed, its first 100,000
    characters and a note that the rest is not shown live; the step's record is what the
    plain executor keeps, head, marker and tail, and the model's cut is of that.)"""
    from tests.kernel_client import execute, script_model, start, stop, text_of

    km, kc = start("rlm")
    try:
        script_model(kc, [block("for i in range(30000):\n    print(i)"), block("FINAL('ok')")],
                     max_output_chars=500)
        reply, messages = execute(kc, "%rlm Count", timeout=120)
        assert reply["content"]["status"] == "ok"
        _, prompt = execute(kc, "print(_lm.calls[1][-1]['content'])", timeout=30)
        shown = text_of(prompt)
        cut, hint = cut_of(shown)
        kept = PlainExecutor().execute("for i in range(30000):\n    print(i)").stdout
        # the record is what the plain executor keeps (the view drops its final newline)
        assert hint == PRINT_LESS and cut == len(kept.rstrip("\n")) - 500
        assert "\n29998\n29999\n" in shown and "not shown live" not in shown
        assert shown.startswith("Output:\n```\n0\n1\n2\n")
    finally:
        stop(km, kc)
