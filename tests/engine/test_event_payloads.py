"""Every engine event's data has exactly the keys of its TypedDict in engine.events."""

from __future__ import annotations

import typing

from rlm_kernel import RLM
from rlm_kernel.engine.events import EVENT_DATA, Event
from rlm_kernel.models.scripted import ScriptedModel
from tests.replies import block


def test_each_event_kind_matches_its_typeddict():
    replies = [block("a = llm_query('x')\nprint(a)"), block("FINAL(a)"), block("FINAL(a)")]
    lm = ScriptedModel(replies)
    events: list[Event] = []
    res = RLM(root_client=lm, sub_client=lm, observer=events.append,
              verify_answer=True).run("q?", context="ctx")
    assert res.stopped_by == "final"
    assert {e.kind for e in events} == set(EVENT_DATA)  # every kind happened here
    for event in events:
        td = EVENT_DATA[event.kind]
        assert set(event.data) == td.__required_keys__ | td.__optional_keys__, event.kind
        hints = typing.get_type_hints(td)
        for key in ("step", "depth", "done", "active", "max_iterations"):
            if key in event.data:
                assert isinstance(event.data[key], hints[key]), (event.kind, key)
        if "totals" in event.data:
            assert set(event.data["totals"]) == set(typing.get_type_hints(hints["totals"]))
