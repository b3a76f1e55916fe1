"""The embedded server's command line for each :class:`ServerSettings`."""

from __future__ import annotations

from pathlib import Path

from rlm_kernel.models.local.launcher import ServerSettings, server_command
from rlm_kernel.models.local.server import DEFAULT_SETTINGS


def _opts(cmd: list[str]) -> dict[str, str]:
    flags = cmd[cmd.index("llama_cpp.server") + 1:]
    return dict(zip(flags[::2], flags[1::2], strict=True))


def test_default_command_reuses_only_the_last_prefix_and_keeps_last_logits():
    opts = _opts(server_command(Path("/w.gguf"), "m", 1234))
    assert opts["--model"] == "/w.gguf" and opts["--port"] == "1234"
    assert opts["--n_ctx"] == "8192" and opts["--logits_all"] == "False"
    assert opts["--verbose"] == "False"
    assert "--draft_model" not in opts and "--cache" not in opts
    assert opts["--n_threads"] == opts["--n_threads_batch"]


def test_prompt_lookup_drafting_turns_logits_all_on():
    opts = _opts(server_command(Path("/w.gguf"), "m", 1, ServerSettings(draft_tokens=4)))
    assert opts["--draft_model"] == "prompt-lookup-decoding"
    assert opts["--draft_model_num_pred_tokens"] == "4"
    assert opts["--logits_all"] == "True"  # llama-cpp-python samples every drafted position


def test_prompt_cache_threads_context_and_verbose():
    opts = _opts(server_command(Path("/w.gguf"), "m", 1, ServerSettings(
        n_ctx=4096, threads=3, prompt_cache_bytes=1 << 30, verbose=True)))
    assert opts["--cache"] == "True" and opts["--cache_type"] == "ram"
    assert opts["--cache_size"] == str(1 << 30)
    assert opts["--n_ctx"] == "4096" and opts["--n_threads"] == "3"
    assert opts["--verbose"] == "True"


def test_servers_start_with_the_measured_defaults():
    # bench/bench_step_speed.py: drafting and the RAM prompt cache were slower here.
    assert DEFAULT_SETTINGS == ServerSettings()
