"""Every engine event's data has exactly the keys of its TypedDict in engine.events."""

from __future__ import annotations

import typing

from rlm_kernel import RLM
from rlm_kernel.engine.events import CANDIDATE_EVENTS, EVENT_DATA, Event
from rlm_kernel.models.scripted import ScriptedModel
from tests.replies import block

CANDIDATE_KEYS = {"candidate", "candidates"}  # optional keys: candidates runs only


def check_payloads(events: list[Event], *, candidates: bool) -> None:
    for event in events:
        td = EVENT_DATA[event.kind]
        keys = td.__required_keys__ | td.__optional_keys__
        expected = keys if candidates else keys - CANDIDATE_KEYS
        assert set(event.data) == expected, event.kind
        hints = typing.get_type_hints(td)
        for key in ("step", "depth", "done", "active", "max_iterations", "candidate",
                    "candidates", "votes", "leading_votes", "decided"):
            if key in event.data:
                assert isinstance(event.data[key], hints[key]), (event.kind, key)
        if "totals" in event.data:
            assert set(event.data["totals"]) == set(typing.get_type_hints(hints["totals"]))


def test_each_event_kind_matches_its_typeddict():
    replies = [block("context = 0\na = llm_query('x')\nprint(a)"), block("FINAL(a)"), block("FINAL(a)")]
    lm = ScriptedModel(replies)
    events: list[Event] = []
    res = RLM(root_client=lm, sub_client=lm, observer=events.append,
              verify_answer=True).run("q?", context="ctx")
    assert res.stopped_by == "final"
    # every kind but a candidates run's own happened here (step_notice: context put back)
    assert {e.kind for e in events} == set(EVENT_DATA) - CANDIDATE_EVENTS
    check_payloads(events, candidates=False)


def test_a_candidates_run_adds_its_kinds_and_keys_to_every_event():
    replies = [block("context = 0\na = llm_query('x')\nprint(a)"), block("FINAL(a)"), block("FINAL(a)")] * 2
    lm = ScriptedModel(replies)
    events: list[Event] = []
    res = RLM(root_client=lm, sub_client=lm, observer=events.append, verify_answer=True,
              candidates=2).run("q?", context="ctx")
    assert res.stopped_by == "final" and len(res.candidates) == 2
    assert {e.kind for e in events} == set(EVENT_DATA)
    check_payloads(events, candidates=True)
