"""One source of settings: ``RLMConfig``'s fields make the ``c.RLM`` traits, the
``rlm run`` options and the ``%rlm`` options; ``jupyter rlm --help-all`` and config
files work as ipykernel's do.  No model is called."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest
from IPython.core.error import UsageError
from traitlets import TraitError

from rlm_kernel.cli import build_parser
from rlm_kernel.engine.config import RLMConfig, settings
from rlm_kernel.jupyter.settings import RLMSettings
from tests.kernel_client import execute, stop, text_of
from tests.kernel_client import start as start_kernel

BIN = Path(sys.executable).parent


def test_every_config_field_is_a_trait_with_its_default_and_help():
    traits = RLMSettings.class_traits(config=True)
    for f in fields(RLMConfig):
        setting = next(s for s in settings() if s.name == f.name)
        assert f.name in traits, f.name
        assert setting.help in traits[f.name].help
        default = traits[f.name].default()
        if setting.kind == "list":  # a List trait; the setting keeps a tuple
            default = tuple(default)
        assert default == f.default or (f.default is None and default in (None, {})), f.name
    assert RLMSettings().run_config() == RLMConfig().replace(termination_config={})


def test_the_section_is_a_class_named_rlm_not_the_engines_rlm():
    from rlm_kernel.engine import RLM as EngineRLM

    assert RLMSettings.__qualname__ == "RLM" and RLMSettings.section_names()[-1] == "RLM"
    assert RLMSettings.__module__ == "rlm_kernel.jupyter.settings"
    assert RLMSettings is not EngineRLM and not issubclass(EngineRLM, RLMSettings)
    assert {"model", "sub_model", "widgets", "max_llm_calls"} <= set(
        RLMSettings.class_own_traits(config=True))


def test_none_is_no_limit_and_bounds_are_the_same_everywhere():
    s = RLMSettings()
    s.max_llm_calls = None
    s.step_timeout = None
    assert s.run_config().max_llm_calls is None and s.run_config().step_timeout is None
    with pytest.raises(TraitError, match="max_iterations must be at least 1"):
        s.max_iterations = 0
    with pytest.raises(TraitError, match="max_cost_usd must be more than 0"):
        s.max_cost_usd = 0.0
    with pytest.raises(ValueError, match="max_llm_calls must be at least 1"):
        RLMConfig(max_llm_calls=0)
    with pytest.raises(ValueError, match="max_iterations must be at least 1"):
        RLMConfig().replace(max_iterations=0)
    with pytest.raises(ValueError, match="cache must be one of memory, disk or None"):
        RLMConfig(cache="off")
    with pytest.raises(TraitError, match="cache must be one of"):
        s.cache = "redis"
    s.cache = None
    assert s.run_config().cache is None


def test_the_cli_has_an_option_for_every_flagged_setting_with_its_help():
    run = build_parser()._subparsers._group_actions[0].choices["run"]
    by_flag = {a.option_strings[0]: a for a in run._actions if a.option_strings}
    flagged = [s for s in settings() if s.flag]
    assert len(flagged) >= 8
    for s in flagged:
        assert s.flag in by_flag, s.flag
        assert by_flag[s.flag].dest == s.name
        assert s.help.rstrip(".") in by_flag[s.flag].help
    args = build_parser().parse_args(["run", "--max-cost", "0.5", "--max-llm-calls", "4", "q"])
    assert (args.max_cost_usd, args.max_llm_calls, args.max_iterations) == (0.5, 4, None)


def test_the_magic_takes_the_same_per_run_options(ip):
    result = ip.run_cell("%rlm --max-llm-calls 0 What?")
    assert isinstance(result.error_in_exec, UsageError)
    assert "must be at least 1" in str(result.error_in_exec)
    result = ip.run_cell("%rlm --max-cost nan What?")
    assert "must be more than 0" in str(result.error_in_exec)


def test_config_magic_reaches_the_rlm_section(ip):
    magics = ip.magics_manager.registry["RLMMagics"]
    ip.run_line_magic("config", "RLM.max_llm_calls = 7")
    ip.run_line_magic("config", "RLM.step_timeout = None")
    assert magics.run_config().max_llm_calls == 7
    assert magics.run_config().step_timeout is None
    ip.run_line_magic("config", "RLM.max_llm_calls = None")


def test_jupyter_rlm_help_all_lists_the_rlm_sections():
    proc = subprocess.run([str(BIN / "jupyter"), "rlm", "--help-all"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for option in ("--RLM.max_llm_calls=<Int>", "--RLM.model=<Unicode>",
                   "--RLMKernel.prose_tasks=<Bool>", "--RLMKernelApp.connection_file"):
        assert option in proc.stdout, option


def test_a_kernel_reads_rlm_kernel_config_py_from_its_profile(tmp_path):
    """``c.RLM`` and ``c.RLMKernel`` in ``rlm_kernel_config.py`` reach a real kernel."""
    from jupyter_client.manager import start_new_kernel

    profile = tmp_path / "profile_default"
    profile.mkdir()
    (profile / "rlm_kernel_config.py").write_text(
        "c.RLM.max_llm_calls = 9\nc.RLM.step_timeout = None\nc.RLMKernel.prose_tasks = False\n")
    env = {**os.environ, "IPYTHONDIR": str(tmp_path)}
    km, kc = start_new_kernel(kernel_name="rlm", startup_timeout=60, env=env)
    try:
        code = ("m = get_ipython().magics_manager.registry['RLMMagics']\n"
                "print(m.run_config().max_llm_calls, m.run_config().step_timeout, "
                "get_ipython().kernel.prose_tasks)")
        reply, messages = execute(kc, code, timeout=60)
        assert reply["content"]["status"] == "ok"
        assert text_of(messages).split() == ["9", "None", "False"]
    finally:
        stop(km, kc)


def test_config_rlm_lists_the_options_with_their_current_values(ip, capsys, caplog):
    """``%config RLM`` was a UsageError: it lists the section like any configurable's."""
    ip.run_line_magic("config", "")
    assert "    RLM\n" in capsys.readouterr().out  # among the available objects
    ip.run_line_magic("config", "RLM.max_iterations = 7")
    try:
        ip.run_line_magic("config", "RLM")
        listing = capsys.readouterr().out
        assert listing.startswith("RLM(Configurable) options")
        for name in ("model", "sub_model", "max_llm_calls", "widgets", "executor"):
            assert f"\nRLM.{name}=<" in listing, name
        at = listing.index("RLM.max_iterations=")
        assert "Current: 7" in listing[at:listing.index("\nRLM.", at + 1)]
        assert ip.run_line_magic("config", "RLM.max_iterations") == 7
        ip.run_line_magic("config", "RLM.max_iterations = 0")  # refused, said once
        assert [r.getMessage() for r in caplog.records].count(
            "RLM.max_iterations must be at least 1, got 0") == 1
        assert ip.magics_manager.registry["RLMMagics"].run_config().max_iterations == 7
    finally:
        ip.run_line_magic("config", "RLM.max_iterations = 12")


def test_help_says_how_to_go_back_to_the_embedded_model(ip, capsys):
    for line in ("--help", "-h"):
        assert ip.run_line_magic("rlm", line) is None  # no task started
        out = capsys.readouterr().out
        assert "Back to the embedded local model: %config RLM.model = None" in out
        assert '%config RLM.model = "local"' in out and "%config RLM lists" in out
    # the Jupyter guide says the same (white space aside)
    guide = " ".join((Path(__file__).parents[2] / "docs" / "jupyter.md").read_text().split())
    assert "Back to the embedded model: `%config RLM.model = None`" in guide
    assert '`%config RLM.model = "local"`' in guide


def test_config_rlm_and_help_in_a_real_kernel():
    km, kc = start_kernel("rlm")
    try:
        reply, messages = execute(kc, "%config RLM", timeout=60)
        assert reply["content"]["status"] == "ok", reply["content"]
        assert "RLM.model=<Unicode>" in text_of(messages)
        reply, messages = execute(kc, "%config RLM.model = None\n%rlm --help", timeout=60)
        assert reply["content"]["status"] == "ok", reply["content"]
        assert "Back to the embedded local model" in text_of(messages)
    finally:
        stop(km, kc)


def test_the_section_declares_one_trait_per_setting_and_its_own_four():
    """Declared traits (no ``locals().update()``): exactly the settings of
    :class:`RLMConfig` and the section's own, so a new setting without its declaration
    fails here."""
    declared = set(RLMSettings.class_trait_names(config=True))
    assert declared == {s.name for s in settings()} | {"follow_ups", "tools", "widgets",
                                                        "warm_start"}
    assert all(name in vars(RLMSettings) for name in declared)  # the class's own
