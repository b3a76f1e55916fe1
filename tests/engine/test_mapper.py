"""RLM.map reaches its runner through the engine's hook (engine.mapper): by default
rlm_kernel.batch.mapping.map_runs, loaded by name on the first map, so importing the
engine loads nothing of the batch layer; an injected runner is called instead."""

from __future__ import annotations

import subprocess
import sys

import pytest

from rlm_kernel.engine import RLM, RLMResult, mapper


@pytest.fixture
def injected():
    calls: list[tuple] = []

    def runner(config, questions, contexts=None, *, executor=None, returns=None,
               tools=None, on_result=None):
        calls.append((config, list(questions), contexts, executor, returns, tools))
        return [RLMResult(question=q, answer=q.upper()) for q in questions]

    mapper.use_map_runner(runner)
    yield calls
    mapper.use_map_runner(None)


def test_the_default_runner_is_the_batch_layers():
    from rlm_kernel.batch import map_runs

    assert mapper.map_runner() is map_runs


def test_an_injected_runner_gets_the_settings_with_their_models(injected):
    rlm = RLM(model="openai/gpt-4o-mini", sub_model="openai/gpt-4o-nano", max_iterations=3)
    results = rlm.map(["a", "b"], ["x", "y"], returns="str")
    assert [r.answer for r in results] == ["A", "B"]
    (config, questions, contexts, executor, returns, tools), = injected
    assert (config.model, config.sub_model, config.max_iterations) == \
        ("openai/gpt-4o-mini", "openai/gpt-4o-nano", 3)
    assert (questions, contexts, executor, returns, tools) == (["a", "b"], ["x", "y"], None,
                                                               "str", None)


def test_importing_the_engine_loads_no_batch_module():
    code = ("import sys\nimport rlm_kernel.engine\n"
            "print(sorted(m for m in sys.modules if m.startswith('rlm_kernel.batch')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
