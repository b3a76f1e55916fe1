"""``bench/bench_followups.py``'s count of follow-ups that copy an earlier task's step
(the code of a root reply, normalised, equal to one of the first run's steps), on a
scripted model: the bench's mechanics, not the model's behaviour."""

from __future__ import annotations

import pytest

from rlm_kernel import RLM, RLMConfig
from rlm_kernel.engine.repetition import without_comments
from rlm_kernel.models.scripted import ScriptedModel
from tests.replies import block
from tests.test_bench_followups import _load

bf = _load()
CONFIG = RLMConfig().replace(max_iterations=3, temperature=0.0, ground_answer=False,
                             verify_answer=False)


def test_the_bench_compares_steps_by_the_engines_without_comments():
    assert bf.without_comments is without_comments  # one normaliser, the engine's
    a = "hits = search('x', context)\nprint(len(hits))"
    assert without_comments(a) == without_comments("hits  =  search('x', context)  # find\n\n"
                                                   "# count them\nprint( len(hits) )")
    assert without_comments(a) != without_comments(a.replace("'x'", "'y'"))
    assert without_comments("if x:  # a\n  (") == "if x: ("  # not Python: lines, no comments


@pytest.fixture(scope="module")
def pair():
    return bf.load_pairs()[0]


def test_run_pair_counts_a_follow_up_that_copies_the_first_runs_step(pair):
    step = "found = sorted(context)[:3]\nprint(found)"
    lm = ScriptedModel([
        block(step), block("FINAL(found[0])"),                  # the first question
        block("# again\n" + step), block("FINAL(len(found))"),  # a follow-up that copies
        block("print(len(context))"), block("FINAL(1)"),        # without: its own code
    ])
    out = bf.run_pair(pair, lambda cfg: RLM(root_client=lm, sub_client=lm, config=cfg),
                      CONFIG)
    assert out.with_conv.wrote_copy == 1
    assert out.without.wrote_copy == 0 and out.without.copied == 0
    # whether the copy ran depends on the repetition check; its reply is counted anyway
    assert out.with_conv.copied in (0, 1)
    row = bf.cells([out])
    assert row.rstrip().endswith("1/1    0/1")
