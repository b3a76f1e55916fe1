"""The exported notebook says how its answer was reached (``RLMResult.answer_source``):
in the answer cell's words and in the notebook's ``metadata.rlm`` (scripted runs)."""

from __future__ import annotations

from rlm_kernel.executors import PlainExecutor
from rlm_kernel.export import export_run
from tests.replies import block
from tests.scripted import scripted_rlm


def run(replies, context=None, **cfg):
    rlm, _ = scripted_rlm(replies, model="scripted/root", **cfg)
    return rlm.run("How long?", context=context, executor=PlainExecutor())


def answer_cell(nb):
    [cell] = [c for c in nb.cells if c.metadata["rlm"]["role"] == "answer"]
    return cell.source


def test_an_answer_from_the_data_says_so():
    nb = export_run(run([block("FINAL(len(context))")], context="hello"))
    assert answer_cell(nb).endswith("*The answer was computed by the model's code "
                                    "from your data.*")
    assert nb.metadata["rlm"]["answer_source"] == "data"
    assert nb.metadata["rlm"]["votes"] is None


def test_an_answer_made_without_the_data_says_so():
    nb = export_run(run([block("x = 2 + 2\nFINAL(x)")], context="hello"))
    assert "*The answer was reached without reading your data.*" in answer_cell(nb)
    assert nb.metadata["rlm"]["answer_source"] == "no_input"


def test_a_task_with_no_data_says_none_was_given():
    nb = export_run(run([block("x = 2 + 2\nFINAL(x)")]))
    assert "reached without any data (none was given)" in answer_cell(nb)


def test_a_vote_says_k_of_n():
    result = run([block("FINAL(len(context))")] * 2, context="abc", candidates=3)
    nb = export_run(result)
    assert "*The answer was chosen by a vote: 2 of 2 candidates agreed.*" \
        in answer_cell(nb)
    assert nb.metadata["rlm"]["votes"] == [2, 2]


def test_no_answer_says_nothing_of_a_source():
    result = run([block("print(1)"), "no code"], context="abc", max_iterations=1)
    assert result.answer is None
    assert "The answer was" not in answer_cell(export_run(result))
    # the task cell's and the command line's words for this ending, never a data tone
    assert answer_cell(export_run(result)).startswith(
        "**No answer: the run reached its step limit.** (stopped by `max_iterations`)")


def test_the_embedded_model_is_named_as_local_in_the_header():
    from rlm_kernel.models.factory import model_label

    result = run([block("FINAL(len(context))")], context="hello")
    result.model = result.sub_model = "openai/qwen2.5-coder-1.5b"  # what its client records
    task = export_run(result).cells[0].source
    assert "| Model | `local model qwen2.5-coder-1.5b (embedded, no network)` |" in task
    assert "openai/" not in task
    assert model_label("local") == "local model default (embedded, no network)"
    assert model_label("openai/gpt-4.1-mini") == "openai/gpt-4.1-mini"
