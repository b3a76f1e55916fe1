"""The README's main job and every script beside the package run as a user runs them.

``make demo`` is ``scripts/demo.py``: it is run here on the real embedded model (slow),
so a moved name fails the suite, not the user.  Every other script under ``scripts/``
and ``bench/`` is run with ``--help`` (fast): its imports resolve and its options parse.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PY_SCRIPTS = sorted([*ROOT.glob("scripts/*.py"), *ROOT.glob("bench/bench_*.py")])
# Modules of bench/ that the bench scripts import (not scripts: no command line).
BENCH_MODULES = sorted(p for p in ROOT.glob("bench/*.py") if not p.name.startswith("bench_"))


def run(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run a command from a folder that is not the checkout, as a user might."""
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT.parent)


def test_the_makefile_demo_runs_the_demo_script():
    makefile = (ROOT / "Makefile").read_text()
    demo = re.search(r"^demo:.*\n((?:\t.*\n)+)", makefile, re.M)
    assert demo and "scripts/demo.py" in demo.group(1)
    readme = (ROOT / "README.md").read_text()
    assert "```\nmake demo\n```" in readme and "```\nmake test\n```" in readme


@pytest.mark.parametrize("script", PY_SCRIPTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_script_answers_help(script):
    proc = run(sys.executable, str(script), "--help")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage:"), proc.stdout[:300]


def test_the_shell_scripts_answer_help():
    for script in ROOT.glob("scripts/*.sh"):
        proc = run("bash", str(script), "--help")
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith("usage:"), (script, proc.stdout[:300])


@pytest.mark.parametrize("module", BENCH_MODULES, ids=lambda p: p.name)
def test_bench_helper_modules_import(module, monkeypatch):
    name = f"bench_helper_{module.stem}"
    spec = importlib.util.spec_from_file_location(name, module)
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, mod)  # dataclasses look their module up
    spec.loader.exec_module(mod)
    assert mod.__doc__


@pytest.mark.slow
def test_make_demo_asks_prints_the_steps_and_checks_the_answer():
    proc = run(sys.executable, str(ROOT / "scripts" / "demo.py"), timeout=900)
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-3000:]
    assert re.search(r"^Question: Which file defines the function `\w+`\?", out, re.M), out[:1000]
    assert re.search(r"^Context: .*email \(\d+ files, [\d,]+ characters\)", out, re.M)
    assert re.search(r"^Model: .*variables: context \(dict\)$", out, re.M), out[:1000]
    assert re.search(r"^── step 1 ──$", out, re.M), out[:2000]
    expected = re.search(r"^Expected: (\S+) \(found with ast\)$", out, re.M)
    answer = re.search(r"^Answer:   (.+)$", out, re.M)
    assert expected and answer and Path(expected.group(1)).name in answer.group(1)
    assert re.search(r"^CORRECT: \d+ steps, \d+ LLM calls, .* stopped by final$", out, re.M)
