"""Candidates and agreement (rlm_kernel.engine.strategies.candidates): N scripted trajectories of
one task, the vote, early stop, the shared budget, the namespace and the result.

A :class:`ScriptedModel` answers calls in order, and candidates run one after the
other, so each candidate's replies follow the previous candidate's in the script."""

from __future__ import annotations

import json

import pytest

from rlm_kernel import RLM
from rlm_kernel.engine.events import CandidateFinished, CandidateStarted, Event, RunFinished
from rlm_kernel.engine.replay.recording import load_recording
from rlm_kernel.engine.strategies.candidates import SampledClient, candidate_seed, vote_line
from rlm_kernel.executors import PlainExecutor
from rlm_kernel.models.scripted import ScriptedModel
from tests.replies import block
from tests.scripted import scripted_rlm


def answer(value: str, thought: str = "Answer.") -> str:
    """A one-step candidate: its value computed into ``x`` (held by a variable), then
    FINAL_VAR of it."""
    return block(f"x = {value}\nFINAL_VAR('x')", thought)


def run(replies, n=3, executor=None, **cfg):
    events: list[Event] = []
    rlm, lm = scripted_rlm(replies, events=events, candidates=n, **cfg)
    res = rlm.run("What is it?", context="the data", executor=executor)
    return res, lm, events


def test_the_answer_most_candidates_agree_on_wins():
    res, lm, _ = run([answer("41"), answer("'42'"), answer("42.0")])
    assert res.stopped_by == "final" and res.answer == "42"  # candidate 2's text
    assert [c["answer"] for c in res.candidates] == ["41", "42", "42.0"]
    assert [c["votes"] for c in res.candidates] == [1, 2, 2]
    assert [c["chosen"] for c in res.candidates] == [False, True, False]
    assert res.history.entries[0].code == "x = '42'\nFINAL_VAR('x')"  # its trajectory
    assert res.exchanges and all("'42'" in e["response"] for e in res.exchanges)
    assert res.llm_calls == 3  # totals cover every candidate
    assert {"index", "answer", "votes", "steps", "stopped_by", "failed_steps", "confidence",
            "llm_calls", "tokens", "cost_usd", "seconds", "chosen"} <= set(res.candidates[0])
    assert res.candidates[0]["tokens"] == 15 and res.candidates[0]["llm_calls"] == 1


@pytest.mark.parametrize("values, chosen", [
    (["'Paris.'", "'paris'", "'London'"], 1),
    (["{1, 2}", "[2, 1]", "(3,)"], 1),
    (["'1,234'", "1234", "1234.0"], 1),
    (["'yes'", "True", "False"], 1),
])
def test_agreement_is_over_normalised_values(values, chosen):
    res, _, _ = run([answer(v) for v in values])
    assert [c["votes"] for c in res.candidates][:2] == [2, 2]
    assert next(c["index"] for c in res.candidates if c["chosen"]) == chosen
    assert len(res.candidates) == 2  # two agreeing of three: the third cannot change it


def test_a_tie_goes_to_the_candidate_with_fewer_failed_steps():
    failing = block("1/0", "Try.")
    res, _, _ = run([failing, answer("'a'"), answer("'b'")], n=2)
    assert [c["failed_steps"] for c in res.candidates] == [1, 0]
    assert [c["votes"] for c in res.candidates] == [1, 1]
    assert res.answer == "b" and res.candidates[1]["chosen"]


def test_a_tie_of_failed_steps_goes_to_the_higher_stated_confidence():
    res, _, _ = run([block("x = 'a'\nRLM_CONFIDENCE = 0.4\nFINAL_VAR('x')"),
                     block("x = 'b'\nRLM_CONFIDENCE = 0.9\nFINAL_VAR('x')")], n=2)
    assert [c["confidence"] for c in res.candidates] == [0.4, 0.9]
    assert res.answer == "b"


def test_a_certain_majority_stops_early():
    res, lm, events = run([answer("7"), answer("7.0"), answer("8")], n=3)
    assert len(res.candidates) == 2 and len(lm.calls) == 2  # the third never asked
    finished = [e for e in events if isinstance(e, CandidateFinished)]
    assert [e.decided for e in finished] == [False, True]
    res, lm, _ = run([answer("7"), answer("8"), answer("7"), answer("7"), answer("9")], n=5)
    assert len(res.candidates) == 4 and len(lm.calls) == 4  # 3 of 5 agree after 4
    assert res.answer == "7" and res.candidates[0]["chosen"]


def test_early_stop_off_runs_every_candidate():
    res, lm, events = run([answer("7"), answer("7.0"), answer("8")], n=3,
                          candidates_early_stop=False)
    assert len(res.candidates) == 3 and len(lm.calls) == 3
    assert [c["votes"] for c in res.candidates] == [2, 2, 1] and res.answer == "7"
    finished = [e for e in events if isinstance(e, CandidateFinished)]
    assert [e.decided for e in finished] == [False, True, True]


def test_without_agreement_every_candidate_runs():
    res, lm, _ = run([answer("1"), answer("2"), answer("3")], n=3)
    assert len(lm.calls) == 3 and res.answer == "1"  # all tied: the earliest


def test_the_namespace_ends_as_if_only_the_chosen_candidate_had_run():
    ex = PlainExecutor()
    ns = ex.namespace
    kept, shared = object(), [1]
    ns.update(kept=kept, doomed="old", shared=shared, rebound="before")
    replies = [
        block("only_one = 1\ndel doomed\nshared.append('c1')\nx = 41\nFINAL_VAR('x')"),
        block("only_two = 2\nrebound = 'two'\nx = 42\nFINAL_VAR('x')"),
        block("only_three = 3\nrebound = 'three'\nx = 42\nFINAL_VAR('x')"),
    ]
    res, _, _ = run(replies, n=3, executor=ex)
    assert res.answer == "42" and res.candidates[1]["chosen"]
    assert ns["only_two"] == 2 and ns["rebound"] == "two" and ns["x"] == 42
    assert "only_one" not in ns and "only_three" not in ns
    assert ns["kept"] is kept and ns["doomed"] == "old"  # earlier bindings intact
    assert ns["context"] == "the data" and callable(ns["llm_query"])
    assert shared == [1, "c1"]  # in-place changes are not undone (documented)


def test_the_chosen_candidate_deletions_are_applied():
    ex = PlainExecutor()
    ex.namespace["doomed"] = "old"
    res, _, _ = run([block("del doomed\nx = 1\nFINAL_VAR('x')"),
                     block("del doomed\nx = 1\nFINAL_VAR('x')")], n=2, executor=ex)
    assert res.answer == "1" and "doomed" not in ex.namespace


def test_the_budget_is_shared_and_a_budget_stop_ends_with_the_vote_so_far():
    two_steps = [block("x = 5\nprint(x)"), block("FINAL_VAR('x')")]
    res, lm, _ = run(two_steps * 3, n=3, max_llm_calls=3)
    assert len(lm.calls) == 3 and res.llm_calls == 3
    assert [c["stopped_by"] for c in res.candidates] == ["final", "budget"]
    assert [c["answer"] for c in res.candidates] == ["5", None]  # the cut one has no vote
    assert res.answer == "5" and res.stopped_by == "final" and res.candidates[0]["chosen"]


def test_a_budget_used_up_between_candidates_starts_no_more():
    res, lm, _ = run([answer("1"), answer("2"), answer("3")], n=3, max_llm_calls=2)
    assert len(res.candidates) == 2 and len(lm.calls) == 2


def test_candidates_2_on_sample_at_their_own_temperature_and_seed_and_sub_calls_do_not():
    replies = [block(f"s = llm_query('q')\nx = {i}\nFINAL_VAR('x')") for i in (1, 2, 3)]
    res, lm, events = run(replies, n=3, candidate_temperature=0.9)
    roots = [i for i, msgs in enumerate(lm.calls) if "q" != msgs[-1]["content"]]
    subs = [i for i in range(len(lm.calls)) if i not in roots]
    assert [lm.seeds[i] for i in roots] == [None, 2, 3]
    assert [lm.temperatures[i] for i in roots] == [None, 0.9, 0.9]
    assert [lm.seeds[i] for i in subs] == [None, None, None]
    started = [e for e in events if isinstance(e, CandidateStarted)]
    assert [(e.temperature, e.seed) for e in started] == [(None, None), (0.9, 2), (0.9, 3)]
    assert candidate_seed(1) is None and candidate_seed(4) == 4


def test_a_resample_keeps_its_own_temperature_and_the_candidate_seed():
    lm = ScriptedModel([])
    client = SampledClient(lm, 0.7, 5)
    client.complete([{"role": "user", "content": "hi"}], temperature=0.2)
    client.complete([{"role": "user", "content": "hi"}], role="sub")
    assert lm.temperatures == [0.2, None] and lm.seeds == [5, None]


def test_events_frame_each_candidate_in_one_run():
    res, _, events = run([answer("1"), answer("1")], n=3)
    kinds = [e.kind for e in events if e.depth == 0]
    assert kinds.count("run_started") == 1 and kinds.count("run_finished") == 1
    assert kinds[0] == "run_started" and kinds[1] == "candidate_started"
    assert kinds[-2:] == ["candidate_finished", "run_finished"]
    assert all(e.candidates == 3 for e in events)
    assert [e.candidate for e in events if e.kind == "step_finished"] == [1, 2]
    last = events[-1]
    assert isinstance(last, RunFinished) and last.result is res and last.candidate == 1
    elapsed = [e.elapsed for e in events if e.depth == 0]
    assert elapsed == sorted(elapsed)  # counted from the first candidate's start


def test_one_candidate_is_todays_single_run():
    replies = [block("n = len(context)\nprint(n)"), block("FINAL_VAR('n')")]
    single, lm1, ev1 = run(list(replies), n=1)
    plain_lm = ScriptedModel(list(replies))
    ev2: list[Event] = []
    plain = RLM(root_client=plain_lm, sub_client=plain_lm, observer=ev2.append,
                verify_answer=False).run("What is it?", context="the data")
    strip = {"seconds", "calls", "trajectory"}
    a, b = single.to_dict(), plain.to_dict()
    assert {k: v for k, v in a.items() if k not in strip} == \
        {k: v for k, v in b.items() if k not in strip}
    assert "candidates" not in a and single.candidates == []
    assert [e.kind for e in ev1] == [e.kind for e in ev2]
    assert all(e.candidate is None and e.candidates is None for e in ev1)
    assert lm1.seeds == [None, None] and lm1.temperatures == [None, None]
    assert lm1.calls == plain_lm.calls


def test_the_result_round_trips_and_replays_the_chosen_trajectory(tmp_path):
    replies = [answer("41"), block("y = 6 * 7\nprint(y)"), block("FINAL_VAR('y')"),
               answer("42")]
    res, _, _ = run(replies, n=3)
    assert res.answer == "42" and res.steps == 2 and res.candidates[1]["chosen"]
    data = json.loads(json.dumps(res.to_dict()))
    assert data["candidates"] == res.candidates and res.summary()["candidates"]
    path = tmp_path / "run.json"
    path.write_text(json.dumps(data))
    for source in (res, data, path):
        rec = load_recording(source)
        assert [e["response"] for e in rec.exchanges] == [e["response"] for e in res.exchanges]
        again = RLM(replay=rec, verify_answer=False, candidates=3).run("What is it?",
                                                                      context="the data")
        assert again.answer == "42" and again.diverged_at is None
        assert again.steps == 2 and again.candidates == []  # a replay is one trajectory


def test_no_answer_anywhere_keeps_the_trajectory_with_fewest_failures():
    replies = [block("1/0"), block("print('no')"), block("print('no')"), block("print(1)")]
    res, _, _ = run(replies, n=2, max_iterations=1)
    assert res.answer is None
    assert [c["failed_steps"] for c in res.candidates] == [1, 0]
    assert res.candidates[1]["chosen"] and res.history.entries[0].code == "print('no')"
    assert vote_line(res.candidates) == ("#1 no answer (max_iterations) · "
                                         "#2 no answer (max_iterations, chosen)")


def test_a_candidate_ending_in_error_does_not_stop_the_others():
    lm_replies = [RuntimeError("provider down"), answer("3"), answer("3")]
    res, _, _ = run(lm_replies, n=3)
    assert [c["stopped_by"] for c in res.candidates] == ["error", "final", "final"]
    assert res.answer == "3" and res.candidates[1]["chosen"]
