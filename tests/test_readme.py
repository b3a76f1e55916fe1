"""Every command in the README is still run by a test, and its examples work.

The README's fenced code blocks are read by kind:

* shell blocks (no language, or ``bash``): every command line (a line ending in ``\\``
  joined with the next) is a key of :data:`COMMANDS`, which names the tests that run
  it; each named test must exist, so a renamed or deleted test turns this red.  The
  cheap ones run here: the ``rlm run`` line as written and the wheel that
  ``pip install ".[local]"`` builds;
* ``python`` blocks: the notebook's data cell is the one the README pictures' test runs
  in a real kernel (``tests/jupyter/test_readme_images.py``); any other runs here, as a
  script;
* ``text`` blocks: the notebook's prose task, the same test's question.

The model is not the point of these checks: the runs here get their replies from a
local OpenAI-compatible server (``bench/openai_stub.py``), named as users name a
provider (``RLM_MODEL``, ``OPENAI_API_BASE``).  The embedded model answers the same
question in the slow tests named in :data:`COMMANDS`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from bench.openai_stub import fake_server
from tests.jupyter.test_readme_images import (
    DATA_CELL,
    EXPORT_IMAGE,
    MAX_BYTES,
    QUESTION_CELL,
    RUN_IMAGE,
    png_size,
)
from tests.replies import block

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
VENV_BIN = Path(sys.executable).parent

COMMANDS: dict[str, list[str]] = {
    "make demo": [
        # the Makefile's demo target runs scripts/demo.py, which this runs on the model
        "tests/test_scripts.py::test_the_makefile_demo_runs_the_demo_script",
        "tests/test_scripts.py::test_make_demo_asks_prints_the_steps_and_checks_the_answer",
    ],
    # CI (.ci/run) runs it; this test checks that CI's command is the README's
    "make test": ["tests/cli/test_run.py::test_readme_commands_match_ci"],
    'pip install ".[local]"': [
        "tests/test_readme.py::test_the_wheel_brings_the_kernel_and_the_extension",
    ],
    "rlm run --context \"$(python -c 'import json, os; print(os.path.dirname(json.__file__))')\" "
    '"Which file defines the function py_encode_basestring_ascii?"': [
        "tests/test_readme.py::test_the_rlm_run_command_answers",
        # the same kind of question, the embedded model answering through `rlm run`
        "tests/test_e2e_local.py::test_cli_json_on_a_stdlib_question",
    ],
}
"""Each command line of the README's shell blocks -> the tests that run it
(``path::test_name``)."""

SHELL = ("", "bash")


def code_blocks(text: str) -> list[tuple[str, str]]:
    """The fenced code blocks of a Markdown text: ``(language, body)`` in order."""
    return [(m.group(1), m.group(2)) for m in
            re.finditer(r"^```(\w*)\n(.*?)^```\s*$", text, re.M | re.S)]


def command_lines(body: str) -> list[str]:
    """The command lines of a shell block: continuations (``\\`` at the end) joined,
    blank lines and comments left out."""
    joined = re.sub(r"\\\n\s*", "", body)
    return [line.strip() for line in joined.splitlines()
            if line.strip() and not line.strip().startswith("#")]


def readme_blocks(language: tuple[str, ...] | str) -> list[str]:
    """The bodies of the README's code blocks in ``language`` (one or several)."""
    wanted = (language,) if isinstance(language, str) else language
    return [body for lang, body in code_blocks(README.read_text()) if lang in wanted]


def test_every_command_is_run_by_a_named_test_that_exists():
    commands = [line for body in readme_blocks(SHELL) for line in command_lines(body)]
    assert len(commands) >= 4, commands
    for command in commands:
        assert command in COMMANDS, f"no test named for the README's command {command!r}"
    assert set(COMMANDS) <= set(commands), set(COMMANDS) - set(commands)  # none stale
    for tests in COMMANDS.values():
        for test in tests:
            path, name = test.split("::")
            assert (ROOT / path).is_file(), test
            assert re.search(rf"^def {name}\(", (ROOT / path).read_text(), re.M), test


def test_every_code_block_is_of_a_known_kind():
    kinds = {lang for lang, _ in code_blocks(README.read_text())}
    assert kinds <= {*SHELL, "python", "text"}, kinds


def test_the_notebook_example_is_what_the_pictures_show():
    """The README's notebook cells are the cells the README pictures' test runs in a
    real ``rlm`` kernel on the embedded model."""
    assert DATA_CELL in [body.strip() for body in readme_blocks("python")]
    assert readme_blocks("text") == [QUESTION_CELL + "\n"]


def test_the_readme_shows_its_pictures_and_they_exist():
    text = README.read_text()
    linked = re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", text)
    assert [Path(p).name for p in linked] == [RUN_IMAGE, EXPORT_IMAGE], linked
    for path in linked:
        image = ROOT / path
        assert image.is_file(), f"{path}: refresh with RLM_UPDATE_IMAGES=1 (see " \
            "tests/jupyter/test_readme_images.py)"
        width, height = png_size(image)
        assert width >= 800 and height >= 400, (path, width, height)
        assert image.stat().st_size <= MAX_BYTES, (path, image.stat().st_size)


def test_the_readme_links_into_the_documentation():
    """Each documentation page the README links to is in the repository."""
    links = re.findall(r"\]\(((?:docs|notebooks)/[^)#\s]*)\)", README.read_text())
    assert len(links) >= 10, links
    for link in links:
        assert (ROOT / link).exists(), link


# -- the commands and the Python example, run ----------------------------------------------
def _replies(n: int) -> str:
    """The fake model: look for the definition, then answer with its file."""
    if n == 1:
        return block('hits = search("py_encode_basestring_ascii")\nprint(hits[0])')
    return block('FINAL(hits[0]["doc"])')


@contextmanager
def provider_env() -> Iterator[tuple[dict[str, str], list[int]]]:
    """The environment of a user whose model is a provider's: ``RLM_MODEL`` names it and
    ``OPENAI_API_BASE`` points at the fake provider; the venv's ``bin`` first on
    ``PATH`` (its ``rlm`` and ``python``).  Yields the environment and the provider's
    list of answered requests."""
    with fake_server(_replies) as server:
        env = {**os.environ, "RLM_MODEL": "openai/gpt-4o-mini",
               "OPENAI_API_BASE": server.api_base, "OPENAI_API_KEY": "sk-test",
               "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
               "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        env.pop("RLM_SUB_MODEL", None)
        yield env, server.seen


def _readme_command(prefix: str) -> str:
    (command,) = [c for c in COMMANDS if c.startswith(prefix)]
    return command


def test_the_rlm_run_command_answers(tmp_path):
    """The README's ``rlm run`` line, as written, in a shell: its context is the
    interpreter's ``json`` folder, its steps are printed, the answer names the file."""
    with provider_env() as (env, seen):
        proc = subprocess.run(["bash", "-c", _readme_command("rlm run")], env=env,
                              cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(seen) == 2, (seen, proc.stdout[-2000:])
    assert "def py_encode_basestring_ascii" in proc.stdout, proc.stdout[-2000:]
    assert re.search(r"^Answer:\s+encoder\.py\s*$", proc.stdout, re.M), proc.stdout[-2000:]


def test_the_python_example_runs():
    """The README's Python example, as a script: it prints the answer and the totals."""
    (example,) = [b for b in readme_blocks("python") if "from rlm_kernel import RLM" in b]
    with provider_env() as (env, seen):
        proc = subprocess.run([sys.executable, "-c", example], env=env, cwd=ROOT.parent,
                              capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == "encoder.py final 2 steps", proc.stdout
    assert len(seen) == 2


def test_the_wheel_brings_the_kernel_and_the_extension(tmp_path):
    """``pip install ".[local]"`` builds the wheel from the checkout: built here the same
    way (offline: ``--no-build-isolation``), it carries the ``rlm`` kernelspec and the
    prebuilt JupyterLab extension as data for ``<prefix>/share/jupyter``, where Jupyter
    finds them once unpacked there (nothing is installed into this environment)."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyterlab_server.config import get_federated_extensions

    from rlm_kernel.jupyter.install import SPEC_DIR

    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--no-index", "--quiet", "-w", str(tmp_path / "dist"), str(ROOT)],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("rlm_kernel-*.whl")
    prefix = tmp_path / "prefix"
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        (data,) = {n.split("/data/")[0] + "/data/" for n in names if ".data/data/" in n}
        for name in names:
            if name.startswith(data) and not name.endswith("/"):
                target = prefix / name[len(data):]
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(zf.read(name))
        entry_points = zf.read(next(n for n in names if n.endswith("entry_points.txt")))
    assert b"rlm = rlm_kernel.cli:main" in entry_points
    jupyter = prefix / "share" / "jupyter"
    spec = KernelSpecManager(kernel_dirs=[str(jupyter / "kernels")]).get_kernel_spec("rlm")
    assert spec.display_name == "RLM (Python)"
    assert spec.argv == ["python", "-m", "rlm_kernel", "-f", "{connection_file}"]
    assert json.loads((jupyter / "kernels" / "rlm" / "kernel.json").read_text()) == \
        json.loads((SPEC_DIR / "kernel.json").read_text())
    found = get_federated_extensions([str(jupyter / "labextensions")])
    assert set(found) == {"rlm-kernel-labextension"}, found
    extension = found["rlm-kernel-labextension"]
    load = extension["jupyterlab"]["_build"]["load"]
    assert (jupyter / "labextensions" / "rlm-kernel-labextension" / load).is_file(), load
    assert extension["install"]["packageName"] == "rlm-kernel", extension.get("install")


@pytest.mark.parametrize("fence", ["```", "```bash"])
def test_command_lines_join_continuations(fence):
    body = code_blocks(f"{fence}\n# a comment\nrlm run \\\n    --json q\n\nmake test\n```\n")
    assert [command_lines(b) for _, b in body] == [["rlm run --json q", "make test"]]
