"""The embedded server's command line for each :class:`ServerSettings`."""

from __future__ import annotations

import subprocess
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


def test_the_server_runs_through_the_amx_guard_and_keeps_its_program_name():
    cmd = server_command(Path("/w.gguf"), "m", 1234)
    assert cmd[1] == "-c" and "rlm_kernel.models.local.serve import main" in cmd[2]
    assert cmd[3] == "llama_cpp.server"  # what ps and the discovery of a server read


def test_a_build_with_amx_kernels_loads_models_without_extra_buffer_types(monkeypatch):
    """The AMX kernels of a ``-march=native`` build crash on the first prompt on Xeons
    that report AMX (``pip install ".[local]"``); the guard turns them off by the model
    parameter llama.cpp's ``--no-repack`` sets.  Checked on the installed llama.cpp's
    real defaults structure."""
    from llama_cpp import llama_cpp as capi

    from rlm_kernel.models.local import serve

    assert serve.amx_built(b"CPU : AVX2 = 1 | AMX_INT8 = 1 | REPACK = 1 | ")
    assert not serve.amx_built(b"CPU : AVX2 = 1 | AVX512 = 1 | REPACK = 1 | ")
    monkeypatch.setattr(capi, "llama_model_default_params", capi.llama_model_default_params)
    assert capi.llama_model_default_params().use_extra_bufts is True
    serve.without_extra_buffer_types()
    assert capi.llama_model_default_params().use_extra_bufts is False


def test_the_guard_hands_its_options_to_llama_cpp_server():
    cmd = server_command(Path("/w.gguf"), "m", 1234)
    proc = subprocess.run([*cmd[:4], "--help"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: llama_cpp.server") and "--n_ctx" in proc.stdout
