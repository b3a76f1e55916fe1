"""How a run's end is shown in the notebook (jupyter.outcome): the answer's kind in the
sentence of the engine's one table, its colour, and the stop reason with the engine's
error as it is (a stuck run's error carries no "stuck: " prefix to strip)."""

from __future__ import annotations

import pytest

from rlm_kernel.engine import RLMConfig
from rlm_kernel.engine.answer.sources import ANSWER_SOURCE_KINDS, TONES
from rlm_kernel.executors import PlainExecutor
from rlm_kernel.jupyter.outcome import answer_note, end_style, stop_text
from tests.replies import block
from tests.scripted import scripted_rlm


@pytest.mark.parametrize("kind", sorted(ANSWER_SOURCE_KINDS))
def test_each_kind_is_said_in_the_tables_words_and_coloured_by_its_tone(kind):
    note = answer_note("3", kind)
    plain = ANSWER_SOURCE_KINDS[kind].plain
    assert note == (None if plain else f"The answer was {ANSWER_SOURCE_KINDS[kind].phrase}.")
    assert end_style("3", "final", kind) == ("success" if plain else "warning")
    assert end_style("3", "final", kind) == TONES[ANSWER_SOURCE_KINDS[kind].tone]["widget"]


def test_a_vote_says_how_many_agreed_and_no_answer_says_nothing():
    assert answer_note("3", "vote", (2, 3)) == (
        "The answer was chosen by a vote: 2 of 3 candidates agreed.")
    assert answer_note(None, "no_input") is None
    assert answer_note("3", None) is None and end_style("3", "final", None) == "success"
    assert end_style(None, "error", None) == "danger"
    assert end_style(None, "stuck", None) == end_style("3", "stuck", "data") == "warning"
    assert end_style(None, "interrupt", "data") == "warning"  # never green without an answer


def test_a_stuck_runs_end_names_the_repetition_once():
    rlm, _ = scripted_rlm([block("print(data)")] * 4 + ["I cannot tell."],
                          repeat_limit=RLMConfig().repeat_limit)
    res = rlm.run("q", context="x", executor=PlainExecutor())
    assert res.stopped_by == "stuck" and res.error.startswith("step 2 repeats step 1 (")
    text = stop_text(res.stopped_by, res.error)
    assert text.startswith("stopped: stuck (the model repeated itself) — step 2 repeats ")
    assert "stuck: step" not in text
    assert stop_text("final") == "finished: final"
