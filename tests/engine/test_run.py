"""The loop's mechanics, driven by a scripted model (no real model here)."""

from __future__ import annotations

import threading
import time

import pytest

from rlm_kernel import RLM
from rlm_kernel.executors import PlainExecutor
from rlm_kernel.models import LLMError
from rlm_kernel.models.scripted import ScriptedModel
from tests.replies import block
from tests.scripted import scripted_rlm

make = scripted_rlm  # tests/scripted.py: its settings, a test's own passed explicitly


def test_final_after_exploration_keeps_variables_and_history():
    rlm, lm = make([block("n = len(context)\nprint(n)"), block("FINAL(n)")])
    ex = PlainExecutor()
    res = rlm.run("How long?", context="hello world", executor=ex)
    assert res.stopped_by == "final"
    assert res.answer == "11" and res.answer_value == 11
    assert res.steps == 2
    assert res.history.entries[0].output.strip() == "11"
    assert ex.namespace["n"] == 11
    assert res.llm_calls == 2 and res.prompt_tokens == 20


def test_model_sees_metadata_not_the_context():
    rlm, lm = make([block("FINAL('x')")])
    big = "abc\n" * 250_000  # 1 MB
    rlm.run("q", context=big)
    prompt = "\n".join(m["content"] for m in lm.calls[0])
    assert "1,000,000 characters" in prompt
    assert len(prompt) < 6000


def test_final_var_and_missing_variable():
    rlm, _ = make([block('FINAL_VAR("nope")'), block("result = [1, 2]\nFINAL_VAR('result')")])
    res = rlm.run("q", context="x")
    assert res.answer == "1\n2" and res.answer_value == [1, 2]
    assert res.steps == 2
    assert res.history.entries[0].code == 'FINAL_VAR("nope")'


def test_last_expression_is_shown():
    rlm, lm = make([block("len(context)"), block("FINAL(1)")])
    res = rlm.run("q", context="12345")
    assert res.history.entries[0].output.strip() == "5"
    assert "5" in lm.calls[1][-1]["content"]


@pytest.mark.parametrize("code", ["llm_query = 5", "del llm_query", "FINAL = print"])
def test_reserved_names_are_restored(code):
    rlm, _ = make([block(code), block("FINAL(llm_query('hi'))")])
    res = rlm.run("q", context="x")
    assert "reserved" in res.history.entries[0].output
    assert res.answer == "sub:hi"


def test_step_timeout_stops_runaway_code_and_tells_the_model():
    rlm, lm = make([block("while True:\n    try:\n        pass\n    except BaseException:\n"
                          "        pass"), block("FINAL('done')")], step_timeout=0.5,
                   ground_answer=False)
    t0 = time.monotonic()
    res = rlm.run("q", context="x")
    assert time.monotonic() - t0 < 10
    assert "time limit" in res.history.entries[0].output
    assert "time limit" in lm.calls[1][-1]["content"]
    assert res.answer == "done"


def test_step_timeout_in_a_worker_thread():
    out = {}

    def work():
        rlm, _ = make([block("import time\nx = 0\nwhile True:\n    x += 1"), block("FINAL(2)")],
                      step_timeout=0.5, ground_answer=False)
        out["res"] = rlm.run("q", context="x")

    t = threading.Thread(target=work)
    t.start()
    t.join(15)
    assert not t.is_alive()
    assert out["res"].answer == "2"
    assert "time limit" in out["res"].history.entries[0].output


def test_except_exception_cannot_swallow_final():
    rlm, _ = make([block("try:\n    FINAL('kept')\nexcept Exception:\n    print('swallowed')")],
                  ground_answer=False)
    res = rlm.run("q", context="x")
    assert res.stopped_by == "final" and res.answer == "kept"


def test_max_iterations_then_answer_now():
    rlm, lm = make([block("print(1)"), block("print(2)"), block("FINAL('late')")],
                   max_iterations=2)
    res = rlm.run("q", context="x")
    assert res.stopped_by == "max_iterations"
    assert res.answer == "late"
    assert "used all 2 steps" in lm.calls[-1][-1]["content"]


def test_budget_on_llm_calls():
    rlm, _ = make([block("print(1)")] * 5, max_llm_calls=2)
    res = rlm.run("q", context="x")
    assert res.stopped_by == "budget"
    assert "2 LLM calls" in res.error
    assert res.steps == 2


def test_budget_cannot_be_swallowed_by_model_code():
    code = "for i in range(5):\n    try:\n        llm_query('a')\n    except BaseException:\n" \
           "        pass\nprint('went on')"
    rlm, _ = make([block(code), block("FINAL(1)")], max_llm_calls=3)
    res = rlm.run("q", context="x")
    assert res.stopped_by == "budget"
    assert res.llm_calls == 3


def test_provider_error_keeps_trajectory():
    rlm, _ = make([block("a = 1\nprint(a)"), LLMError("server gone")])
    ex = PlainExecutor()
    res = rlm.run("q", context="x", executor=ex)
    assert res.stopped_by == "error" and "server gone" in res.error
    assert res.steps == 1 and ex.namespace["a"] == 1


def test_interrupt_keeps_trajectory():
    rlm, _ = make([block("b = 2"), KeyboardInterrupt()])
    ex = PlainExecutor()
    res = rlm.run("q", context="x", executor=ex)
    assert res.stopped_by == "interrupt" and res.steps == 1 and ex.namespace["b"] == 2


def test_batched_keeps_order_runs_concurrently_and_isolates_failures():
    active, peak, lock = [0], [0], threading.Lock()

    def slow(messages):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.05)
        with lock:
            active[0] -= 1
        return "ok:" + messages[-1]["content"]

    subs = [slow, slow, RuntimeError("boom"), slow, slow, slow]
    rlm, _ = make([block("r = llm_query_batched([str(i) for i in range(6)])\nprint(r)"),
                   block("FINAL_VAR('r')")], sub_replies=subs, max_concurrency=4)
    res = rlm.run("q", context="x")
    values = res.answer_value
    assert len(values) == 6
    assert sum(v.startswith("Error:") for v in values) == 1
    assert all(v.startswith(("ok:", "Error:")) for v in values)
    assert peak[0] > 1
    assert len(res.history.entries[0].llm_calls) == 5


def test_rlm_query_runs_a_child_and_depth_is_host_limited():
    replies = [block("a = rlm_query('inner task', context='abc')\nprint(a)"),
               block("FINAL(len(context))"),  # the child's step
               block("FINAL(a)")]
    rlm, _ = make(replies, max_depth=1)
    res = rlm.run("outer", context="x")
    assert res.answer == "3"
    rlm0, _ = make([block("FINAL(rlm_query('deep'))")], max_depth=0)
    assert rlm0.run("q", context="x").answer == "sub:deep"


def test_output_truncated_for_model_but_kept_in_history():
    rlm, lm = make([block("print('y' * 10000)"), block("FINAL(1)")], max_output_chars=1000)
    res = rlm.run("q", context="x")
    assert len(res.history.entries[0].output) >= 10000
    shown = lm.calls[1][-1]["content"]
    assert "characters cut: print less ...]" in shown and len(shown) < 2000


def test_only_first_block_runs_and_reply_is_cut():
    reply = "t\n```repl\nx = 1\n```\nOutput: 1\n```repl\nx = 2\n```"
    rlm, lm = make([reply, block("FINAL(x)")])
    res = rlm.run("q", context="c")
    assert res.answer == "1"
    assert "x = 2" not in lm.calls[1][2]["content"]


def test_unterminated_block_from_stop_sequence_runs():
    rlm, _ = make(["look\n```repl\nFINAL(len(context))"])
    assert rlm.run("q", context="abcd").answer == "4"


def test_final_in_prose_accepted_only_when_unambiguous():
    rlm, _ = make(["I will call FINAL(answer) later.", 'The answer is FINAL("42")'])
    res = rlm.run("q", context="the answer: 42")
    assert res.answer == "42" and res.steps == 2


def test_repeated_failures_end_the_run():
    rlm, _ = make([block("1/0")] * 10, max_consecutive_errors=3, repeat_limit=None)
    res = rlm.run("q", context="x")
    assert res.stopped_by == "error" and res.steps == 3
    assert "ZeroDivisionError" in res.history.entries[0].output


def test_unknown_policy_is_a_clear_error():
    rlm, _ = make([block("FINAL(1)")], termination="no-such-policy")
    with pytest.raises((KeyError, ValueError), match="no-such-policy"):
        rlm.run("q", context="x")


def test_unknown_setting_is_rejected():
    with pytest.raises(TypeError, match="max_iteratons"):
        RLM(max_iteratons=3)


def test_observer_gets_events_in_order():
    kinds = []
    lm = ScriptedModel([block("print('hi')"), block("FINAL(1)")])
    RLM(root_client=lm, sub_client=lm, observer=lambda e: kinds.append(e.kind),
        verify_answer=False).run("q", "x")
    assert kinds[0] == "run_started" and kinds[-1] == "run_finished"
    assert kinds.count("step_finished") == 2
    i = kinds.index("step_output")
    j = i
    while kinds[j] == "step_output":  # print() writes text and newline separately
        j += 1
    assert kinds[i - 1] == "step_started" and kinds[j] == "step_finished"


def test_json_summary_keys():
    rlm, _ = make([block("FINAL(1)")])
    s = rlm.run("q", context="x").summary()
    for key in ("answer", "steps", "llm_calls", "prompt_tokens", "completion_tokens",
                "cost_usd", "seconds", "stopped_by"):
        assert key in s


def test_printed_lowercase_final_does_not_end_the_run():
    rlm, _ = make([block("print('def final(f):  # the final (corrected) total')"),
                   block("FINAL('total')")])
    res = rlm.run("q", context="x")
    assert res.answer == "total" and res.steps == 2


def test_stateful_policy_accumulates_over_steps():
    from rlm_kernel.policies import PolicyRegistry, TerminationPolicy

    @PolicyRegistry.register_termination("after_three_steps")
    class AfterThree(TerminationPolicy):
        name = "after_three_steps"

        def __init__(self, config=None):
            super().__init__(config)
            self.seen = 0

        def should_terminate(self, result, context):
            self.seen += 1
            return (self.seen >= 3, "three")

    try:
        rlm, _ = make([block("print(1)")] * 5, termination="after_three_steps",
                      repeat_limit=None)
        res = rlm.run("q", context="x")
        assert res.answer == "three" and res.steps == 3
    finally:
        PolicyRegistry.unregister_termination("after_three_steps")


def test_input_variables_are_protected():
    rlm, lm = make([block("context = context.upper()\ndel extra"), block("FINAL(context + extra)")])
    res = rlm.run("q", context="abc", extra="!")
    assert res.answer == "abc!"
    assert "read-only" in res.history.entries[0].output
    rlm2, _ = make([block("context = 'x'"), block("FINAL(context)")], protect_inputs=False)
    assert rlm2.run("q", context="abc").answer == "x"


def test_task_message_tells_how_each_variable_splits_into_documents():
    rlm, lm = make([block("FINAL(1)")])
    joined = "==> a.py <==\nx = 1\n==> b.py <==\ny = 2\n"
    rlm.run("q", context="a long string", files={"a.txt": "b"}, joined=joined)
    first = lm.calls[0][1]["content"]
    assert "`context` is one string" in first
    assert "`files` is a dict of 1 documents" in first and "'a.txt'" in first
    assert "`joined` is a str of 2 documents" in first and "==> a.py <==" in first


def test_search_and_split_documents_are_in_the_namespace_and_reserved():
    rlm, lm = make([block("hits = search('y =')\nprint(hits)\nsearch = 3"),
                    block("print(split_documents()['b.py'])\nFINAL(hits[0]['doc'])")])
    res = rlm.run("q", context="==> a.py <==\nx = 1\n==> b.py <==\ny = 2\n")
    assert "{'doc': 'b.py', 'line': 1, 'text': 'y = 2'}" in res.history.entries[0].output
    assert "search is reserved" in res.history.entries[0].output
    assert res.history.entries[1].output.strip() == "y = 2"
    assert res.answer == "b.py"


def test_every_step_message_restates_the_question():
    rlm, lm = make([block("print(1)"), "no code here", block("FINAL(2)")])
    rlm.run("Which file is it? Answer with the name.", context="x")
    for call in lm.calls[1:]:
        assert "The question: Which file is it? Answer with the name." in call[-1]["content"]
    rlm, lm = make([block("print(1)"), block("FINAL(2)")], restate_question=False)
    rlm.run("Which file is it?", context="x")
    assert "The question:" not in lm.calls[1][-1]["content"]


def test_answer_check_holds_the_first_final_for_one_step():
    rlm, lm = make([block("hits = [(3, 'a.py')]\nprint(hits)"), block("FINAL(hits[0][0])"),
                    block("FINAL(hits[0][1])", "The question asks for a file.")],
                   verify_answer=True)
    res = rlm.run("Which file? Answer with the file name.", context="x")
    check = lm.calls[2][-1]["content"]
    assert "You called FINAL with the number 3" in check
    assert "The question: Which file? Answer with the file name." in check
    assert "[(3, 'a.py')]" in check  # the output the answer came from
    assert res.answer == "a.py" and res.stopped_by == "final"
    assert res.steps == 3 and res.history.entries[2].code == "FINAL(hits[0][1])"


def test_answer_check_confirmed_unchanged_and_never_twice():
    rlm, lm = make([block("FINAL(7)"), block("FINAL(7)")], verify_answer=True)
    res = rlm.run("How many?", context="x")
    assert res.answer == "7" and res.steps == 2 and res.llm_calls == 2
    rlm, lm = make([block("FINAL(7)"), block("print('more')"), block("FINAL(8)")],
                   verify_answer=True)
    res = rlm.run("How many?", context="x")
    assert res.answer == "8" and res.steps == 3  # the later FINAL is not checked again


def test_answer_check_is_skipped_at_the_last_step_and_kept_if_unanswered():
    rlm, lm = make([block("print(1)"), block("FINAL(5)")], verify_answer=True,
                   max_iterations=2)
    res = rlm.run("q", context="x")
    assert res.answer == "5" and res.steps == 2
    rlm, lm = make([block("FINAL(5)"), block("print('looking again')")], verify_answer=True,
                   max_iterations=2)
    res = rlm.run("q", context="x")
    assert res.answer == "5" and res.stopped_by == "final" and res.llm_calls == 2


def test_a_failed_final_call_echoed_in_its_traceback_does_not_end_the_run():
    rlm, lm = make([block("hits = []\nFINAL(hits[0].split('==> ')[1])"), block("FINAL('b')")])
    res = rlm.run("q", context="x")
    assert "IndexError" in res.history.entries[0].output
    assert res.answer == "b" and res.steps == 2


def test_a_reply_that_repeats_earlier_code_is_sampled_again_once():
    rlm, lm = make([block("print(1)"), block("print(1)"), block("print(2)"), block("FINAL(2)")],
                   resample_temperature=0.7)  # the subject (scripted runs: off)
    res = rlm.run("q", context="x")
    assert [e.code for e in res.history] == ["print(1)", "print(2)", "FINAL(2)"]
    assert lm.temperatures == [None, None, 0.7, None]
    rlm, lm = make([block("print(1)"), block("print(1)"), block("FINAL(1)")],
                   repeat_limit=None)
    res = rlm.run("q", context="x")
    assert [e.code for e in res.history] == ["print(1)", "print(1)", "FINAL(1)"]
    assert lm.temperatures == [None, None, None]


def test_a_last_reply_without_final_is_no_answer():
    rlm, lm = make([block("print(1)"), block("print(2)"),
                    "I will count the top-level classes in the file."], max_iterations=2)
    res = rlm.run("q", context="x")
    assert (res.stopped_by, res.answer, res.answer_value) == ("max_iterations", None, None)
    rlm, lm = make([block("print(1)"), 'The answer is FINAL("x.py")'], max_iterations=1)
    assert rlm.run("q", context="x").answer == "x.py"  # a FINAL in prose still counts


class _StoppedByTheUser(PlainExecutor):
    """An executor whose step shows some output, then is stopped by the user (the stop
    button, Ctrl-C: ``KeyboardInterrupt`` out of ``execute``)."""

    def execute(self, code, *, timeout=None, on_output=None):
        on_output("stdout", "half done\n")
        raise KeyboardInterrupt


def test_a_step_the_user_stops_is_kept_and_told_finished():
    events = []
    rlm, _ = make([block("while True: pass"), block("FINAL(1)")], events=events)
    res = rlm.run("q", context="x", executor=_StoppedByTheUser())
    assert res.stopped_by == "interrupt" and res.steps == 1
    entry = res.history.entries[0]
    assert entry.code == "while True: pass"
    assert entry.output == "half done\nKeyboardInterrupt: the user stopped this step"
    finished = [e for e in events if type(e).__name__ == "StepFinished"]
    assert [e.step for e in finished] == [1] and not finished[0].outcome.success
