"""RLMConfig: the one source of settings, the models included."""

from __future__ import annotations

import pytest

from rlm_kernel.cli import build_parser
from rlm_kernel.engine import RLM, RLMConfig


def test_none_removes_a_limit_and_a_needed_value_cannot_be_none():
    cfg = RLMConfig(max_llm_calls=5, cache="memory")
    assert cfg.replace(max_llm_calls=None, cache=None).max_llm_calls is None
    assert cfg.replace(max_llm_calls=None).cache == "memory"
    with pytest.raises(ValueError, match="max_iterations cannot be None"):
        cfg.replace(max_iterations=None)


def test_the_models_fall_back_in_one_place(monkeypatch):
    monkeypatch.delenv("RLM_MODEL", raising=False)
    monkeypatch.delenv("RLM_SUB_MODEL", raising=False)
    assert RLMConfig().models() == (None, None)  # the embedded model for both
    assert RLMConfig(model="openai/a").models() == ("openai/a", "openai/a")
    monkeypatch.setenv("RLM_MODEL", "openai/env")
    assert RLMConfig().models() == ("openai/env", "openai/env")
    assert RLMConfig(model="").models() == ("openai/env", "openai/env")  # empty = unset
    monkeypatch.setenv("RLM_SUB_MODEL", "openai/env-sub")
    assert RLMConfig(model="openai/a").models() == ("openai/a", "openai/env-sub")
    assert RLMConfig(sub_model="openai/b").models() == ("openai/env", "openai/b")


def test_rlm_reads_the_models_from_arguments_config_and_environment(monkeypatch):
    monkeypatch.setenv("RLM_MODEL", "openai/env")
    monkeypatch.delenv("RLM_SUB_MODEL", raising=False)
    assert (RLM().model, RLM().sub_model) == ("openai/env", "openai/env")
    rlm = RLM("openai/arg", config=RLMConfig(model="openai/cfg", sub_model="openai/sub"))
    assert (rlm.model, rlm.sub_model) == ("openai/arg", "openai/sub")
    assert rlm.config.model == "openai/arg"


def test_the_command_line_takes_the_models_as_settings(capsys):
    args = build_parser().parse_args(["run", "--model", "openai/m", "--sub-model", "openai/s",
                                      "q"])
    assert (args.model, args.sub_model) == ("openai/m", "openai/s")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--model M Root model: a litellm model string" in help_text
    assert "$RLM_SUB_MODEL, else the root model" in help_text


def test_an_engine_error_is_logged_with_its_traceback_and_kept(caplog):
    from rlm_kernel.executors import PlainExecutor
    from rlm_kernel.models.scripted import ScriptedModel
    from tests.replies import block

    class Broken(PlainExecutor):
        def execute(self, code, **kwargs):
            raise RuntimeError("executor bug")

    lm = ScriptedModel([block("x = 1")])
    with caplog.at_level("ERROR", logger="rlm_kernel"):
        res = RLM(root_client=lm, sub_client=lm).run("q", context="c", executor=Broken())
    assert res.stopped_by == "error"
    assert res.error == "internal error: RuntimeError: executor bug"  # one readable line
    assert "Traceback" in res.traceback and "executor bug" in res.traceback
    [record] = [r for r in caplog.records if r.name == "rlm_kernel.engine.run"]
    assert record.exc_info and "internal error" in record.getMessage()
