"""The README's two pictures, made from the real product and checked for what they show.

A real ``jupyter lab`` with the RLM extension, Debian's Chromium through Playwright and
the embedded local model (no scripted replies): a notebook of the ``rlm`` kernel loads the
interpreter's ``json`` package into ``context`` (:data:`DATA_CELL`) and asks, in plain
prose, which file defines a function (:data:`QUESTION_CELL`; the expected file is found
with ``ast`` by :func:`evals.questions.defines_function_question`).  When the run has
answered:

* ``jupyterlab-run.png``: the notebook with the task cell (its progress line and the
  variables the model sees), the step cells below it and the answer cell, all in view;
* ``exported-trajectory.png``: the run exported with the toolbar's "RLM export" and
  opened in JupyterLab (the task and totals, the setup cell, the steps, the answer).

They are written to ``docs/images/`` when ``RLM_UPDATE_IMAGES=1`` (else to a temporary
folder, so a plain ``make test`` leaves the tree alone).  Refresh them with::

    RLM_UPDATE_IMAGES=1 .venv/bin/python -m pytest -q tests/jupyter/test_readme_images.py

(a few minutes on 2 cores: the model's run), then look at them and commit them.
``tests/test_readme.py`` checks that the README links to both and that its notebook
example is :data:`DATA_CELL` and :data:`QUESTION_CELL`.
"""

from __future__ import annotations

import logging
import os
import random
import struct
import time
from pathlib import Path
from typing import Any

import nbformat
import pytest

from evals.questions import defines_function_question
from tests.lab_harness import (
    EXTENSION_NAME,
    REPO_ROOT,
    JupyterLab,
    NotebookPage,
    chromium_page,
    extension_installed,
    missing_prerequisites,
    prompt_count,
    write_notebook,
)

logger = logging.getLogger(__name__)
pytestmark = pytest.mark.slow

IMAGES = REPO_ROOT / "docs" / "images"
"""Where the README's pictures live (``RLM_UPDATE_IMAGES=1`` writes them there)."""
RUN_IMAGE = "jupyterlab-run.png"
EXPORT_IMAGE = "exported-trajectory.png"
WIDTH = 1200
"""Screenshot width in CSS pixels: GitHub shows a README image at most ~880 wide, so
text stays readable when scaled down."""
MAX_HEIGHT = 2000
MAX_BYTES = 300_000
RUN_TIMEOUT = 600.0  # seconds for the model's run on 2 cores

DATA_CELL = ('import json, pathlib\n'
             'context = {p.name: p.read_text() for p in pathlib.Path(json.__file__).parent.glob("*.py")}')
"""The README's data cell: the interpreter's own ``json`` package, file name -> text."""
QUESTION = defines_function_question("json", random.Random(0))
QUESTION_CELL = QUESTION.text
"""The README's task cell: plain prose, a task in the ``rlm`` kernel."""


@pytest.fixture(autouse=True)
def _prerequisites() -> None:
    """`make setup` installs Chromium, Playwright and the extension: their absence is a
    failed set-up, never a skip."""
    missing = missing_prerequisites()
    if not extension_installed():
        missing.append(f"the JupyterLab extension {EXTENSION_NAME}")
    if missing:
        pytest.fail(f"the README's pictures need: {', '.join(missing)} (run `make setup`)")


@pytest.fixture()
def out_dir(tmp_path: Path) -> Path:
    """``docs/images/`` with ``RLM_UPDATE_IMAGES=1``, else a temporary folder."""
    if os.environ.get("RLM_UPDATE_IMAGES") == "1":
        IMAGES.mkdir(parents=True, exist_ok=True)
        return IMAGES
    return tmp_path


# Where each cell of the open notebook is, against the notebook's visible area; and
# whether a text is rendered inside the visible area.
_JS_LAYOUT = """() => {
  const w = window.jupyterapp.shell.currentWidget;
  const outer = w.content.outerNode || w.content.node;  // the notebook's scrolling element
  const view = outer.getBoundingClientRect();
  const cells = w.content.widgets.map((c) => {
    const r = c.node.getBoundingClientRect();
    return {id: c.model.id, rlm: c.model.getMetadata('rlm') ?? null, type: c.model.type,
            top: r.top, bottom: r.bottom, text: (c.node.innerText || '').slice(0, 3000)};
  });
  return {top: view.top, bottom: view.bottom, scrollHeight: outer.scrollHeight,
          clientHeight: outer.clientHeight, cells: cells};
}"""


def layout(nb: NotebookPage) -> dict[str, Any]:
    """The notebook's visible area (``top``, ``bottom``, its scroll and client heights)
    and each cell's id, ``metadata.rlm``, type, bounding box and rendered text, in page
    pixels."""
    return nb.page.evaluate(_JS_LAYOUT)


def in_view(box: dict[str, Any], cell: dict[str, Any]) -> bool:
    """Whether ``cell`` lies wholly inside the notebook's visible area ``box``."""
    return cell["top"] >= box["top"] - 1 and cell["bottom"] <= box["bottom"] + 1


def role(cell: dict[str, Any]) -> str | None:
    """The cell's RLM role (``step``, ``answer`` ...) or None."""
    return (cell["rlm"] or {}).get("role")


def fit_the_notebook(nb: NotebookPage) -> dict[str, Any]:
    """Hide the side panels, scroll to the top and make the window tall enough to show
    every cell (at most :data:`MAX_HEIGHT` pixels); the final :func:`layout`."""
    nb.page.evaluate("() => { const s = window.jupyterapp.shell;"
                     " s.collapseLeft(); s.collapseRight(); }")
    height = 900
    for _ in range(4):  # cells render as they scroll into the window: measure again
        nb.page.set_viewport_size({"width": WIDTH, "height": height})
        nb.scroll_to(0)
        nb.page.wait_for_timeout(800)
        box = layout(nb)
        missing = box["scrollHeight"] - box["clientHeight"]
        if missing <= 0 or height >= MAX_HEIGHT:
            return box
        height = min(MAX_HEIGHT, height + missing + 40)
    return layout(nb)


def shoot(nb: NotebookPage, box: dict[str, Any], path: Path) -> None:
    """Screenshot the window down to a little below the last cell (no empty notebook
    area under it) into ``path``."""
    bottom = max(c["bottom"] for c in box["cells"])
    height = nb.page.viewport_size["height"]
    clip = {"x": 0, "y": 0, "width": WIDTH, "height": min(height, int(bottom) + 24)}
    nb.page.screenshot(path=str(path), clip=clip)


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) of a PNG file, from its IHDR chunk."""
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", path
    return struct.unpack(">II", head[16:24])


def check_image(path: Path) -> None:
    """A PNG of the README's width and at most :data:`MAX_BYTES` bytes."""
    width, height = png_size(path)
    assert width == WIDTH and 400 <= height <= MAX_HEIGHT, (path, width, height)
    assert path.stat().st_size <= MAX_BYTES, (path, path.stat().st_size)


@pytest.fixture()
def lab(local_server):
    """A real ``jupyter lab``; its kernels reuse the embedded model's server."""
    with JupyterLab() as server:
        yield server


def test_the_readme_pictures_show_a_run_and_its_export(lab, tmp_path, out_dir):
    """The run in JupyterLab: the task cell with the variables the model sees, its step
    cells below it with execution counts, the answer cell, all in the picture; the
    exported notebook: the task, the steps and the answer, in the picture."""
    write_notebook(lab.root / "readme.ipynb", "rlm", "RLM (Python)",
                   [DATA_CELL, QUESTION_CELL])
    expected = Path(QUESTION.expected).name
    started = time.monotonic()
    with chromium_page(tmp_path / "chromium-profile") as page:
        page.set_viewport_size({"width": WIDTH, "height": 900})
        nb = NotebookPage(page, lab, "readme.ipynb").open()
        task_id = nb.cells()[1]["id"]
        nb.run_all()

        def answered() -> bool:
            cells = nb.cells()
            return (prompt_count(cells[1]["prompt"]) is not None
                    and any(role(c) == "answer" for c in cells))

        nb.wait_for(answered, RUN_TIMEOUT, "the run's answer cell", interval=1.0)
        logger.info("run answered in %.0f s", time.monotonic() - started)
        nb.page.wait_for_timeout(1500)  # the last outputs and the static views render

        box = fit_the_notebook(nb)
        shot = out_dir / RUN_IMAGE
        shoot(nb, box, shot)
        cells = box["cells"]
        task = next(c for c in cells if c["id"] == task_id)
        steps = [c for c in cells if role(c) == "step"]
        answer = next(c for c in cells if role(c) == "answer")
        assert steps and all(c["rlm"]["task_cell"] == task_id for c in steps), cells
        for cell in [cells[0], task, *steps, answer]:
            assert in_view(box, cell), (shot, box["top"], box["bottom"], cell)
        assert "Variables the model sees" in task["text"], task["text"]
        assert "context" in task["text"] and "final" in task["text"], task["text"]
        assert expected in answer["text"], answer["text"]
        live = {c["id"]: c for c in nb.cells()}
        assert all(prompt_count(live[c["id"]]["prompt"]) for c in steps), nb.summary()
        check_image(shot)

        # The toolbar's export of the task cell's run, opened in JupyterLab.
        run_id = answer["rlm"]["run_id"]
        nb.select_cell(1)
        nb.palette("RLM export")
        exported = lab.root / f"readme-rlm-{run_id}.ipynb"
        nb.wait_for(exported.exists, 60, f"{exported.name}")
        nb.wait_for(lambda: _readable(exported), 30, "the whole exported notebook")
        saved = nbformat.read(exported, as_version=4)
        saved_roles = [c.metadata.get("rlm", {}).get("role") for c in saved.cells]
        assert saved_roles.count("step") == len(steps), saved_roles
        nb.page.set_viewport_size({"width": WIDTH, "height": 900})
        opened = NotebookPage(page, lab, exported.name).open()
        box = fit_the_notebook(opened)
        shot = out_dir / EXPORT_IMAGE
        shoot(opened, box, shot)
        cells = box["cells"]
        assert [role(c) for c in cells] == saved_roles, [role(c) for c in cells]
        header, shown_steps = cells[0], [c for c in cells if role(c) == "step"]
        shown_answer = next(c for c in cells if role(c) == "answer")
        for cell in [header, shown_steps[0], shown_answer]:
            assert in_view(box, cell), (shot, box["top"], box["bottom"], cell)
        assert "py_encode_basestring_ascii" in header["text"], header["text"]
        assert expected in shown_answer["text"], shown_answer["text"]
        check_image(shot)
        opened.shutdown_kernel()
    logger.info("pictures in %s", out_dir)


def _readable(path: Path) -> bool:
    """Whether ``path`` holds a whole, valid notebook (the server writes it in parts)."""
    try:
        nbformat.validate(nbformat.read(path, as_version=4))
    except Exception:  # noqa: BLE001 - half written: not yet
        return False
    return True
