"""Follow-up tasks (``RLM.run(..., history=Conversation)``): the model is told the earlier
tasks, their answers, code and left variables; compaction; replacing a re-run task;
working state is not a protected input.  Scripted models: the loop's mechanics."""

from __future__ import annotations

from rlm_kernel import RLM, RLMConfig
from rlm_kernel.engine.session.conversation import HISTORY_NAME, Conversation
from rlm_kernel.executors import PlainExecutor
from rlm_kernel.models.scripted import ScriptedModel
from tests.replies import block
from tests.scripted import scripted_rlm

ITEMS = [{"i": i, "colour": "red" if i % 3 == 0 else "blue"} for i in range(600)]


def task(executor, replies, question, history, **kw):
    rlm, _ = scripted_rlm(replies)
    return rlm.run(question, context=ITEMS, executor=executor, history=history, **kw)


def test_a_follow_up_sees_the_earlier_task_its_answer_code_and_variables():
    ex, conv = PlainExecutor(), Conversation()
    first = task(ex, [block("red = [x for x in context if x['colour'] == 'red']\n"
                            "print(len(red))"), block("FINAL(len(red))")],
                 "How many items have colour red?", conv)
    assert first.answer == "200"
    assert [v.name for v in first.new_variables] == ["red"]
    assert first.new_variables[0].total_length == 200
    conv.record(first, ex.namespace, key="cell-1")

    second = task(ex, [block("FINAL(len([x for x in red if x['i'] > 300]))")],
                  "And how many of them have an index above 300?", conv)
    prompt = second.root_prompts[0][1]["content"]
    # the current question is read first and last; the earlier task in between
    assert prompt.startswith("Task: And how many of them have an index above 300?")
    assert prompt.index("Task: And how many") < prompt.index("Earlier tasks in this session")
    tail = prompt[prompt.index("Earlier tasks in this session"):]
    assert "The question: And how many of them have an index above 300?\nStep 1 of" in tail
    assert "It follows the previous task: How many items have colour red?" in prompt
    assert "Its answer: 200" in prompt
    assert "1. The previous task (question and answer above)." in prompt
    assert "Variables it left: red (list, 200 items" in prompt
    assert "made by their code, not given by the user" in prompt
    # told as what it found: its code only on request (history_code), always in rlm_history
    assert "red = [x for x in context" not in prompt
    assert second.answer == "99"  # multiples of 3 from 303 to 597
    assert second.conversation[0]["question"] == "How many items have colour red?"
    assert ex.namespace[HISTORY_NAME][0]["answer"] == "200"
    assert "red = [x for x in context" in ex.namespace[HISTORY_NAME][0]["code"]


def test_history_code_tells_the_earlier_tasks_code():
    ex, conv = PlainExecutor(), Conversation()
    first = task(ex, [block("red = [x for x in context if x['colour'] == 'red']\n"
                            "FINAL(len(red))")], "How many red?", conv)
    conv.record(first, ex.namespace)
    rlm, _ = scripted_rlm([block("FINAL(len(red) + 1)")], history_code=True)
    second = rlm.run("And one more?", context=ITEMS, executor=ex, history=conv)
    prompt = second.root_prompts[0][1]["content"]
    assert "   | red = [x for x in context if x['colour'] == 'red']" in prompt
    assert prompt.index("Variables it left: red") < prompt.index("Its code:")
    assert second.answer == "201"


def test_an_answer_made_without_the_users_data_is_told_as_such():
    ex, conv = PlainExecutor(), Conversation()
    res = task(ex, [block("FINAL(42)")], "q?", conv)
    res.answer_source = "no_input"  # as the run sets it when no input variable was read
    conv.record(res, ex.namespace)
    assert "Its answer: 42 (made without any data of the user's)" in conv.prompt_section()
    again = Conversation.from_list(conv.to_list())
    assert again.tasks[0].answer_source == "no_input"


def test_working_state_is_not_protected_but_user_inputs_are():
    ex, conv = PlainExecutor(), Conversation()
    first = task(ex, [block("hits = [1, 2]\nFINAL(len(hits))")], "q1", conv)
    conv.record(first, ex.namespace, key="a")
    working = conv.working_names(ex.namespace)
    assert working == {"hits"}
    variables = {"hits": ex.namespace["hits"]}
    rlm, _ = scripted_rlm([block("hits = []\ncontext = None\nprint(len(hits))"),
                           block("FINAL(len(hits))")])
    res = rlm.run(
        "q2", context=ITEMS, executor=ex, history=conv, variables=variables,
        protected=[n for n in ["context", "hits"] if n not in working])
    out = res.history.entries[0].output
    assert "context is the task's input and read-only" in out
    assert "hits" not in out.split("Warning")[-1]
    assert res.answer == "0" and ex.namespace["context"] is ITEMS
    # once the user rebinds it, it is theirs again
    ex.namespace["hits"] = [9]
    assert conv.working_names(ex.namespace) == set()


def test_re_running_a_task_replaces_it_and_does_not_see_itself():
    ex, conv = PlainExecutor(), Conversation()
    for key, q in (("a", "first?"), ("b", "second?")):
        conv.record(task(ex, [block("FINAL(1)")], q, conv), ex.namespace, key=key)
    again = task(ex, [block("FINAL(2)")], "first, reworded?", conv.before("a"))
    prompt = again.root_prompts[0][1]["content"]
    assert "first?" not in prompt and "second?" in prompt
    conv.record(again, ex.namespace, key="a")
    assert [t.question for t in conv.tasks] == ["first, reworded?", "second?"]


def test_long_histories_are_compacted_and_say_so():
    ex, conv = PlainExecutor(), Conversation(keep_full=2, max_chars=700)
    for n in range(12):
        res = task(ex, [block(f"v{n} = list(range({n}))\nFINAL({n})")],
                   f"Question number {n} about the items?", conv)
        conv.record(res, ex.namespace, key=str(n))
    section = conv.prompt_section()
    assert section is not None and len(section) <= 700
    assert "Question number 11" in section and "v11 (list" in section
    assert "v9 (list" not in section  # older tasks in one line only
    dropped = section.split("older task")[0]
    assert dropped.strip().endswith(tuple("0123456789"))  # "(N older tasks not shown ...)"
    assert f"{HISTORY_NAME}[:" in section
    assert len(conv.as_data()) == 12  # nothing cut from the record


def test_a_task_with_no_answer_is_told_as_such():
    ex, conv = PlainExecutor(), Conversation()
    lm = ScriptedModel([block("print(1)"), "no final here"])
    res = RLM(root_client=lm, sub_client=lm, max_iterations=1).run("q?", context="x",
                                                                   executor=ex)
    conv.record(res, ex.namespace)
    section = conv.prompt_section()
    assert section.startswith("It follows the previous task: q?\nThat task ended without an "
                              "answer (the run stopped by max_iterations).")
    assert "refer to" not in section  # no answer to point at
    conv.record(task(ex, [block("FINAL(3)")], "next?", conv), ex.namespace)
    assert "1. Task: q? -> Answer: (no answer: the run stopped by max_iterations)" in \
        Conversation(conv.tasks, keep_full=0).prompt_section()


def test_the_record_round_trips():
    ex, conv = PlainExecutor(), Conversation()
    conv.record(task(ex, [block("x = [1]\nFINAL(1)")], "q?", conv), ex.namespace, key="k")
    again = Conversation.from_list(conv.to_list())
    assert again.prompt_section() == conv.prompt_section()


def test_asking_again_with_the_same_first_step_is_not_a_repetition():
    """The walk: the same question asked again; its first step is the earlier task's
    (right) first step.  Copying is not looping: the step runs, nobody is told of a
    repetition, and the run answers."""
    ex, conv = PlainExecutor(), Conversation()
    step = "red = [x for x in context if x['colour'] == 'red']\nprint(len(red))"
    question = "How many items have colour red?"
    conv.record(task(ex, [block(step), block("FINAL(len(red))")], question, conv),
                ex.namespace)
    events: list = []
    rlm, lm = scripted_rlm([block(step), block("FINAL(len(red))")], events=events,
                           resample_temperature=RLMConfig().resample_temperature)
    again = rlm.run(question, context=ITEMS, executor=ex, history=conv)
    assert [e.code for e in again.history] == [step, "FINAL(len(red))"]
    assert again.stopped_by == "final" and again.answer == "200"
    assert [e for e in events if e.kind == "step_notice"] == []
    assert len(lm.calls) == 2  # no reply sampled again
    assert all("repeats" not in m["content"] for m in lm.calls[1])


def test_a_candidates_run_of_a_question_asked_again_is_not_stopped_on_its_first_step():
    """The walk's ``%%rlm --candidates 3`` of the first question asked again: every
    candidate's first step is the earlier task's, and each runs it and answers."""
    ex, conv = PlainExecutor(), Conversation()
    step = "n = len(context)\nprint(n)"
    conv.record(task(ex, [block(step), block("FINAL(n)")], "How many items?", conv),
                ex.namespace)
    rlm, _ = scripted_rlm([block(step), block("FINAL(n)")] * 3, candidates=3,
                          candidates_early_stop=False,
                          resample_temperature=RLMConfig().resample_temperature)
    res = rlm.run("How many items?", context=ITEMS, executor=ex, history=conv)
    assert res.answer == "600" and res.stopped_by == "final"
    assert [(c["stopped_by"], c["steps"], c["answer"]) for c in res.candidates] == [
        ("final", 2, "600")] * 3
    assert res.history.entries[0].code == step


def test_a_follow_up_names_the_earlier_question_and_answer_next_to_its_own():
    """The walk: "Which file defines f?" (a file) then "How many functions ... in that
    file?": the task message says, right under the new question, which question came
    before, what it answered, and that "that" refers to it."""
    files = {"pkg/a.py": "def f():\n    pass\n", "pkg/b.py": "def g():\n    pass\n"}
    ex, conv = PlainExecutor(), Conversation()
    asked = "Which file defines the function `g`? Reply with its path."
    rlm, _ = scripted_rlm([block("FINAL([p for p, s in context.items() if 'def g' in s][0])")])
    first = rlm.run(asked, context=files, executor=ex, history=conv)
    assert first.answer == "pkg/b.py"
    conv.record(first, ex.namespace, key="1")

    follow = "How many functions are defined at the top level of that file?"
    rlm, lm = scripted_rlm([block("FINAL(context['pkg/b.py'].count('def '))")])
    second = rlm.run(follow, context=files, executor=ex, history=conv)
    assert second.answer == "1"
    prompt = lm.calls[0][-1]["content"]
    assert prompt.startswith(
        f"Task: {follow}\n\nIt follows the previous task: {asked}\nIts answer: pkg/b.py\n"
        "In the task above, \"that\", \"it\", \"those\" and \"the same\" refer to the "
        "previous task: to its answer, pkg/b.py, or to what it found.\n\n")
    # told once: the list of earlier tasks names it by number only
    assert prompt.count(asked) == 1 and "1. The previous task" in prompt
    assert f"The question: {follow}\nStep 1 of" in prompt[prompt.index("Variables in"):]


RED = "sum(x['colour'] == 'red' for x in context)"


def test_a_follow_up_of_a_follow_up_names_the_last_one():
    ex, conv = PlainExecutor(), Conversation()
    asked = [("How many items have colour red?", "FINAL(len([x for x in context "
              "if x['colour'] == 'red']))", "200"),
             ("What is that number doubled?", f"FINAL(2 * {RED})", "400"),
             ("And that plus one?", f"FINAL(2 * {RED} + 1)", "401")]
    prompts = []
    for n, (question, code, answer) in enumerate(asked):
        rlm, lm = scripted_rlm([block(code)])
        res = rlm.run(question, context=ITEMS, executor=ex, history=conv)
        assert res.answer == answer
        prompts.append(lm.calls[0][-1]["content"])
        conv.record(res, ex.namespace, key=str(n))
    third = prompts[2]
    assert third.startswith("Task: And that plus one?\n\nIt follows the previous task: What "
                            "is that number doubled?\nIts answer: 400\n")
    assert "to its answer, 400," in third and "to its answer, 200," not in third
    # the one before is in the list, in full
    assert "1. Task: How many items have colour red?\n   Answer: 200" in third
    assert "2. The previous task (question and answer above)." in third
    # re-running the second task follows the first one, not itself
    rlm, lm = scripted_rlm([block(f"FINAL(2 * {RED})")])
    rlm.run("What is that number doubled?", context=ITEMS, executor=ex,
            history=conv.before("1"))
    assert "It follows the previous task: And that plus one?" in lm.calls[0][-1]["content"]
