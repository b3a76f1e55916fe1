"""RLM.map: many independent runs on a concurrent.futures executor (a thread pool, a
process pool, Dask's executor, and the default Dask LocalCluster), each a real run over
litellm against a local OpenAI-compatible server (tests/batch/fleet.py); results in input
order whatever order they finish in."""

from __future__ import annotations

import pickle
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context

import pytest

from bench.openai_stub import fake_provider
from rlm_kernel import RLM
from rlm_kernel.batch import ContextRef, load_context
from rlm_kernel.engine import RLMResult
from tests.batch.fleet import SETTINGS, local_cluster, provider_env
from tests.scripted import scripted_rlm

# The first task works longest: finishing order is the reverse of the input's.
QUESTIONS = ["Say it loudly."] * 3
CONTEXTS = ["0.9:first", "0.45:second", "0:third"]
ANSWERS = ["FIRST", "SECOND", "THIRD"]


@pytest.fixture(scope="module")
def provider():
    with provider_env() as seen:
        yield seen


def test_map_on_a_thread_pool_returns_results_in_input_order(provider):
    finished: list[str] = []
    # isolated: in-process steps of runs in several threads take turns (they share
    # sys.stdout: tests/engine/test_threads.py), and these steps are the slow part
    rlm = RLM(**{**SETTINGS, "executor": "isolated"})
    with ThreadPoolExecutor(3) as pool:
        from rlm_kernel.batch import map_runs

        results = map_runs(rlm.config, QUESTIONS, CONTEXTS, executor=pool,
                           on_result=lambda i, r: finished.append(r.answer))
    assert [r.answer for r in results] == ANSWERS
    assert finished == ANSWERS[::-1]  # they did run at once
    assert all(r.stopped_by == "final" and r.steps == 1 for r in results)


def test_map_on_dask_and_a_process_pool_returns_results_in_order_and_they_pickle(provider):
    rlm = RLM(**SETTINGS)
    on_dask = rlm.map(QUESTIONS, CONTEXTS)  # no executor: a LocalCluster's, closed after
    import distributed

    with pytest.raises(ValueError):  # no client is left behind
        distributed.get_client()
    # fork: the children have rlm_kernel and litellm imported already (spawn: seconds each)
    with ProcessPoolExecutor(2, mp_context=get_context("fork")) as pool:
        in_processes = rlm.map(QUESTIONS, CONTEXTS, executor=pool, returns="str")
    for results in (on_dask, in_processes):
        assert [r.answer for r in results] == ANSWERS
        assert all(r.cost_usd > 0 and r.model == SETTINGS["model"] for r in results)
    assert [r.answer_value for r in in_processes] == ANSWERS
    copy = pickle.loads(pickle.dumps(on_dask[0]))
    assert copy.answer == "FIRST" and copy.history.entries[0].code == on_dask[0].history.entries[0].code
    assert copy.calls[0].prompt_tokens == 100_000


def test_contexts_given_by_reference_are_read_by_the_worker(provider, tmp_path):
    (tmp_path / "a.txt").write_text("0:from a file")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "b.txt").write_text("0:from a url")
    refs = [ContextRef(str(tmp_path / "a.txt")), ContextRef(f"file://{tmp_path}/d/b.txt"),
            ContextRef(f"file://{tmp_path}/nothing")]
    with local_cluster(1) as client:
        results = RLM(**SETTINGS).map(["q1", "q2", "q3"], refs, executor=client.get_executor())
    assert [r.answer for r in results[:2]] == ["FROM A FILE", "FROM A URL"]
    assert results[2].stopped_by == "error" and "context not found" in results[2].error


def test_a_task_error_stays_in_its_result_and_bad_calls_raise_at_once(provider):
    rlm = RLM(**SETTINGS)
    with ThreadPoolExecutor(2) as pool:
        results = rlm.map(["ok", "missing"], ["0:fine", ContextRef("/nonexistent/rlm.txt")],
                          executor=pool)
        assert results[0].answer == "FINE"
        assert results[1].stopped_by == "error"
        assert "context path not found: /nonexistent/rlm.txt" in results[1].error
        with pytest.raises(ValueError, match="2 questions but 1 contexts"):
            rlm.map(["a", "b"], ["x"], executor=pool)
        with pytest.raises(ValueError, match="unknown"):
            rlm.map(["a"], ["x"], executor=pool, returns="nosuchtype")
        scripted, _ = scripted_rlm(["FINAL(1)"])
        with pytest.raises(ValueError, match="root_client"):
            scripted.map(["a"], executor=pool)
    assert isinstance(results[0], RLMResult)


def test_a_folder_url_is_read_as_its_text_files(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.txt").write_text("alpha")
    (tmp_path / "sub" / "b.md").write_text("beta")
    (tmp_path / "blob.bin").write_bytes(b"\xff\xfe\x00")
    (tmp_path / ".hidden").write_text("secret")
    assert load_context(f"file://{tmp_path}") == {"a.txt": "alpha", "sub/b.md": "beta"}
    assert load_context(f"file://{tmp_path}/a.txt") == "alpha"
    assert load_context(str(tmp_path / "a.txt")) == "alpha"


# -- what a worker sends back ---------------------------------------------------------------
@dataclass
class Point:
    """The caller's own answer type (pickled by reference to this module)."""

    x: int
    y: int


EXEC_REPLY = "```repl\nexec(context)\n```"
"""Every step runs the task's context as its code."""


@pytest.fixture()
def exec_provider(monkeypatch):
    """A provider whose every reply runs the context as the step's code."""
    with fake_provider(lambda n: EXEC_REPLY) as (base, seen):
        monkeypatch.setenv("OPENAI_API_BASE", base)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        yield seen


def test_map_over_processes_sends_back_only_plain_data(exec_provider, tmp_path):
    """Model code on a worker process answers with a class of its own whose unpickling
    would run its code in the caller (here: create a file), with a value nested too deep
    to pickle, and with plain data.  The caller gets the first two as the answer's text
    (no file made, no failed task), the third as it was."""
    marker = tmp_path / "ran-in-the-caller"
    contexts = [
        "class Mine:\n    def __reduce__(self):\n"
        f"        return (open, ({str(marker)!r}, 'w'))\n"
        "    def __repr__(self):\n        return 'Mine()'\nFINAL(Mine())",
        "x = []\nfor _ in range(100_000):\n    x = [x]\nFINAL(x)",
        "FINAL({'n': [1, 2.5, None, ('t',)], 'b': b'x', 's': {3}})",
    ]
    with ProcessPoolExecutor(2, mp_context=get_context("fork")) as pool:
        results = RLM(**SETTINGS, max_iterations=1).map(["Build it."] * 3, contexts,
                                                        executor=pool)
    mine, deep, plain = results
    assert [r.stopped_by for r in results] == ["final"] * 3, [r.error for r in results]
    assert not marker.exists()
    assert mine.answer_value == mine.answer == "Mine()"
    assert deep.answer_value == deep.answer and deep.answer.startswith("[[[[")
    assert plain.answer_value == {"n": [1, 2.5, None, ("t",)], "b": b"x", "s": {3}}


@pytest.mark.parametrize("pool", ["processes", "threads"])
def test_a_typed_answer_of_the_callers_type_comes_back_as_that_type(exec_provider, pool):
    """A dataclass answer crosses as its JSON form and is made the caller's type again."""
    make = ProcessPoolExecutor(1, mp_context=get_context("fork")) if pool == "processes" \
        else ThreadPoolExecutor(1)
    with make as executor:
        [result] = RLM(**SETTINGS, max_iterations=1).map(
            ["Where?"], ["FINAL({'x': 1, 'y': '2'})"], executor=executor, returns=Point)
    assert result.stopped_by == "final", result.error
    assert result.answer_value == Point(1, 2) and type(result.answer_value) is Point


def test_sendable_keeps_plain_data_and_sends_the_rest_as_text_or_json():
    from rlm_kernel.batch import plain_data, sendable
    from rlm_kernel.engine.answer.types import as_answer_type

    assert plain_data({"a": [1, (2.0, None)], b"k": frozenset({"x"})})
    assert not plain_data([object()]) and not plain_data({"a": Point(1, 2)})
    deep: list = []
    for _ in range(100):
        deep = [deep]
    assert not plain_data(deep) and plain_data(deep[0])  # 101 lists deep, then 100
    typed = RLMResult(question="q", stopped_by="final", answer="Point(x=1, y=2)",
                      answer_value=Point(1, 2))
    assert sendable(typed).answer_value == "Point(x=1, y=2)"
    assert sendable(typed, as_answer_type(Point)).answer_value == {"x": 1, "y": 2}
    plain = RLMResult(question="q", stopped_by="final", answer="3", answer_value=3)
    assert sendable(plain) is plain
