"""The JupyterLab extension's unit tests (jest, labextension/src/__tests__): run state
and cell insertion over a notebook model, without a browser."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

LAB = Path(__file__).resolve().parents[2] / "labextension"


def test_the_extensions_jest_suite_passes():
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "CI": "true"}
    jlpm = shutil.which("jlpm", path=env["PATH"])
    assert jlpm, "jlpm (from jupyterlab) is not installed in this environment"
    assert (LAB / "node_modules" / "jest").is_dir(), (
        "jest is not installed: run `jlpm install` in labextension/ (pip install -e . does)")
    proc = subprocess.run([jlpm, "test"], cwd=LAB, env=env, capture_output=True, text=True,
                          timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    passed = re.search(r"Tests:\s+(\d+) passed", out)
    assert passed and int(passed.group(1)) > 0, out[-3000:]


def test_the_words_a_prose_task_does_not_start_with_are_pythons():
    """prose.ts's `PYTHON_WORDS` (its outline of rlm_kernel/jupyter/prose.py's rule) holds
    exactly Python's keywords, soft keywords and lower-case builtins of this interpreter."""
    import json

    source = (LAB / "src" / "prose.ts").read_text(encoding="utf-8")
    block = re.search(r"PYTHON_WORDS = new Set\(\[(.*?)\]\)", source, re.S)
    assert block, "PYTHON_WORDS not found in labextension/src/prose.ts"
    listed = set(re.findall(r"'([^']+)'", block.group(1)))
    # a fresh interpreter's: tools earlier in this process add builtins of their own
    # (a debugger's runfile/execfile)
    fresh = subprocess.run(
        [sys.executable, "-I", "-c", "import builtins, json, keyword; print(json.dumps("
         "keyword.kwlist + keyword.softkwlist + dir(builtins)))"],
        capture_output=True, text=True, timeout=60, check=True)
    names = set(json.loads(fresh.stdout))
    expected = {n for n in names if not n.startswith("_")
                and (n.islower() or n in ("True", "False", "None"))}
    assert listed == expected, (sorted(expected - listed), sorted(listed - expected))


def test_the_answer_cells_colours_are_the_tables():
    """style/base.css draws an answer cell's edge in its tone's colour: each tone's is
    `TONES[tone]["bar"]` of rlm_kernel/engine/answer/sources.py (the one table), and the
    extension knows the tones the table has (protocol.ts `TONES`)."""
    from rlm_kernel.engine.answer.sources import TONES

    css = (LAB / "style" / "base.css").read_text(encoding="utf-8")
    drawn = dict(re.findall(r"--jp-rlm-tone-(\w+):\s*(#[0-9a-fA-F]{6})", css))
    assert drawn == {tone: colours["bar"] for tone, colours in TONES.items()}, drawn
    protocol = (LAB / "src" / "protocol.ts").read_text(encoding="utf-8")
    listed = re.search(r"export const TONES = \[(.*?)\]", protocol, re.S)
    assert listed and set(re.findall(r"'(\w+)'", listed.group(1))) == set(TONES), listed
