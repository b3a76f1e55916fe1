"""The ``rlm`` command's handling of input, bad input and context files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlm_kernel.cli import main
from rlm_kernel.context.files import ContextError, load_contexts
from rlm_kernel.models.local.weights import get_spec


def rlm(*args: str, env: dict[str, str] | None = None, timeout: float = 120,
        drop: tuple[str, ...] = ()):
    full_env = {k: v for k, v in {**os.environ, **(env or {})}.items() if k not in drop}
    return subprocess.run([sys.executable, "-m", "rlm_kernel.cli", *args], capture_output=True,
                          text=True, env=full_env, timeout=timeout)


def test_missing_context_file_is_one_clear_error(tmp_path, capsys):
    code = main(["run", "--context", str(tmp_path / "nope.txt"), "q"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.strip() == f"rlm: error: context path not found: {tmp_path / 'nope.txt'}"


def test_unknown_model_is_one_clear_error(tmp_path):
    f = tmp_path / "a.txt"
    f.write_text("hello")
    proc = rlm("run", "--context", str(f), "--model", "no-such-model-xyz", "q")
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "unknown model 'no-such-model-xyz'" in lines[0]
    assert proc.stdout == ""


def test_missing_key_names_the_variable(tmp_path):
    f = tmp_path / "a.txt"
    f.write_text("hello")
    proc = rlm("run", "--context", str(f), "--model", "openai/gpt-4.1-mini", "q",
               drop=("OPENAI_API_KEY",))
    assert proc.returncode == 1
    assert "OPENAI_API_KEY" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_hash_mismatch_names_both_hashes(tmp_path):
    spec = get_spec("qwen2.5-coder-0.5b")
    (tmp_path / spec.filename).write_bytes(b"not a model" * 1000)
    proc = rlm("model", "prepare", "--name", spec.name, env={"RLM_CACHE_DIR": str(tmp_path)})
    assert proc.returncode == 1
    assert "size 11,000 bytes, expected 491,400,064 bytes" in proc.stderr


def test_model_server_that_does_not_start(tmp_path):
    """A file that passed verification but was damaged since: llama.cpp refuses it."""
    spec = get_spec("qwen2.5-coder-0.5b")
    bad = tmp_path / spec.filename
    bad.write_bytes(b"GGUF" + b"\0" * 4096)
    st = bad.stat()
    stamp = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": spec.sha256}
    (tmp_path / (spec.filename + ".verified")).write_text(json.dumps(stamp))
    f = tmp_path / "a.txt"
    f.write_text("hello")
    proc = rlm("run", "--context", str(f), "--model", f"local/{spec.name}", "q",
               env={"RLM_CACHE_DIR": str(tmp_path)})
    assert proc.returncode == 1
    assert "rlm: error:" in proc.stderr and "model server exited" in proc.stderr


def test_status_reports_the_weights(tmp_path):
    proc = rlm("model", "status", "--name", "qwen2.5-coder-0.5b",
               env={"RLM_CACHE_DIR": str(tmp_path)})
    assert proc.returncode == 0
    assert "not prepared" in proc.stdout and "Apache-2.0" in proc.stdout


def test_context_loading(tmp_path):
    (tmp_path / "d" / "sub").mkdir(parents=True)
    (tmp_path / "d" / "x.py").write_text("print(1)\n")
    (tmp_path / "d" / "sub" / "y.txt").write_text("why\n")
    (tmp_path / "d" / "blob.bin").write_bytes(b"\0\1\2")
    (tmp_path / "one.txt").write_text("one")
    assert load_contexts([str(tmp_path / "one.txt")]) == "one"
    assert load_contexts([str(tmp_path / "d")]) == {"sub/y.txt": "why\n", "x.py": "print(1)\n"}
    both = load_contexts([str(tmp_path / "one.txt"), str(tmp_path / "d")])
    assert set(both) == {str(tmp_path / "one.txt"), str(tmp_path / "d" / "x.py"),
                         str(tmp_path / "d" / "sub" / "y.txt")}
    with pytest.raises(ContextError):
        load_contexts([str(tmp_path / "missing")])


def test_import_is_cheap():
    code = "import sys, rlm_kernel, rlm_kernel.cli; print('litellm' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "False"


def test_readme_commands_match_ci():
    root = Path(__file__).resolve().parents[2]
    readme = (root / "README.md").read_text()
    ci = (root / ".ci" / "run").read_text()
    test_cmd = ci.strip().splitlines()[-1]  # the last line runs the README's command
    blocks = readme.split("```")
    assert blocks[1].strip() == "make demo" and blocks[3].strip() == test_cmd
