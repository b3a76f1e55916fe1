"""Every sub-agent's conversation is kept: each ``rlm_query`` child run (grandchildren
too) in its top-level run's result, with its id, parent, depth, the parent's step,
messages, trajectory and answer; the calls of a child say its real depth."""

from __future__ import annotations

import json

import pytest

from tests.replies import block
from tests.scripted import scripted_rlm

REPLIES = [
    block("x = 1\nprint(x)"),
    block("a = rlm_query('first?')\nb = rlm_query('second?')\nFINAL(a + '|' + b)"),
    block("g = rlm_query('deeper?')\nFINAL('c1:' + g)"),  # child 1
    block("FINAL('gc')"),  # child 1's child
    block("FINAL('c2')"),  # child 2
]


@pytest.mark.parametrize("executor", ["in-process", "isolated"])
def test_the_whole_tree_is_kept(executor: str) -> None:
    rlm, _ = scripted_rlm(REPLIES, executor=executor, max_depth=2, max_iterations=3,
                          child_max_iterations=2)
    result = rlm.run("Ask twice.")
    assert result.answer == "c1:gc|c2", result.error
    kids = {c.id: c for c in result.children}
    assert [c.id for c in result.children] == ["1", "1.1", "2"]
    assert [(c.parent, c.depth, c.parent_step) for c in result.children] == \
        [("", 1, 2), ("1", 2, 1), ("", 1, 2)]
    assert [kids[i].question for i in ("1", "1.1", "2")] == ["first?", "deeper?", "second?"]
    assert [kids[i].answer for i in ("1", "1.1", "2")] == ["c1:gc", "gc", "c2"]
    assert kids["1"].steps == 1 and "rlm_query('deeper?')" in kids["1"].history.entries[0].code
    # each conversation: system first, the task, its own last reply last
    for child, reply in ((kids["1"], REPLIES[2]), (kids["1.1"], REPLIES[3]),
                         (kids["2"], REPLIES[4])):
        roles = [m["role"] for m in child.messages]
        assert roles[0] == "system" and roles[-1] == "assistant" and "user" in roles
        assert child.messages[-1]["content"] == reply
        assert child.question in "\n".join(m["content"] for m in child.messages)
    # the top-level conversation ends with its own last reply, not a child's
    assert result.messages[-1] == {"role": "assistant", "content": REPLIES[1]}
    assert len(result.root_prompts) == 2  # its own two calls only
    # every call says the depth of the run that made it
    assert [(c.role, c.depth) for c in result.calls] == \
        [("root", 0), ("root", 0), ("root", 1), ("root", 2), ("root", 1)]
    data = json.loads(json.dumps(result.to_dict()))
    assert [c["id"] for c in data["children"]] == ["1", "1.1", "2"]
    assert data["children"][1]["trajectory"][0]["code"] == "FINAL('gc')"
    assert data["messages"][-1]["content"] == REPLIES[1]


def test_a_childs_sub_calls_and_a_failed_child_are_kept() -> None:
    rlm, _ = scripted_rlm(
        [block("a = rlm_query('q')\nFINAL(a)"),
         block("r = llm_query('inner')\nprint(r)"),   # the child never answers
         block("print('still nothing')"),
         "I cannot tell."],                            # its "answer now" reply: no FINAL
        sub_replies=["sub reply"], max_depth=1, max_iterations=2, child_max_iterations=2)
    result = rlm.run("Ask.")
    (child,) = result.children
    assert child.answer is None and child.stopped_by == "max_iterations"
    assert child.steps == 2 and child.history.entries[0].llm_calls[0]["response"] == "sub reply"
    assert result.answer is not None and result.answer.startswith("Error:")
    assert ("sub", 1) in [(c.role, c.depth) for c in result.calls]
    assert ("final", 1) in [(c.role, c.depth) for c in result.calls]


@pytest.mark.parametrize("executor", ["in-process", "isolated"])
def test_child_spans_sit_under_the_parent_step(executor: str, exporter) -> None:
    rlm, _ = scripted_rlm(REPLIES, executor=executor, max_depth=2, max_iterations=3,
                          child_max_iterations=2)
    assert rlm.run("Ask twice.").answer == "c1:gc|c2"
    spans = {s.context.span_id: s for s in exporter.get_finished_spans()}
    runs = [s for s in spans.values() if s.name.startswith("invoke_agent")]
    by_depth = sorted(((s.attributes["rlm.depth"], s) for s in runs), key=lambda p: p[0])
    assert [d for d, _ in by_depth] == [0, 1, 1, 2]
    for depth, run in by_depth[1:]:
        parent = spans[run.parent.span_id]
        assert parent.attributes.get("rlm.step") is not None, parent.name  # a step span
        assert parent.attributes["rlm.depth"] == depth - 1
    chats = [s for s in spans.values() if s.name.startswith("chat")]
    assert sorted(s.attributes["rlm.depth"] for s in chats) == [0, 0, 1, 1, 2]


def test_a_client_written_before_the_depth_option_still_records_a_childs_depth() -> None:
    from rlm_kernel import RLM
    from rlm_kernel.models import Completion, LLMCall

    class Older:
        """A user's client whose complete() names its keywords (no depth)."""

        model, max_tokens, context_window, ledger, depth = "older", None, None, None, 0

        def __init__(self) -> None:
            self.replies = list(REPLIES)

        def check(self) -> None:
            pass

        def complete(self, messages, *, role="root", stop=None, max_tokens=None,
                     temperature=None, seed=None):
            call = LLMCall(model=self.model, role=role, depth=self.depth)
            if self.ledger is not None:
                self.ledger.record(call)
            return Completion(text=self.replies.pop(0), call=call)

    lm = Older()
    result = RLM(root_client=lm, sub_client=lm, executor="in-process", max_depth=2,
                 max_iterations=3, child_max_iterations=2, ground_answer=False).run("Ask.")
    assert result.answer == "c1:gc|c2", result.error
    assert [c.depth for c in result.calls] == [0, 0, 1, 2, 1]
