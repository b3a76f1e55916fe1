"""The documentation site (mkdocs.yml, docs/) builds with ``mkdocs build --strict``: every
page of the nav is built, the API reference is read from the docstrings, a broken link
fails the build, and the built site loads nothing from another host (it is read offline)."""

from __future__ import annotations

import html
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
# Material prints a banner about its successor on every build; it says nothing here.
ENV_QUIET = {"NO_MKDOCS_2_WARNING": "1"}


def build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    """``mkdocs build --strict`` of ``config`` into ``site``, as ``make docs`` runs it."""
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
        cwd=config.parent, capture_output=True, text=True, timeout=300,
        env={**os.environ, **ENV_QUIET})


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = build(ROOT / "mkdocs.yml", out)
    assert done.returncode == 0, done.stderr[-4000:]
    return out


def nav_sources(nav: list) -> list[str]:
    """Every page file named in a nav tree (strings, {title: file}, {title: [...]})."""
    found: list[str] = []
    for item in nav:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        found += nav_sources(value) if isinstance(value, list) else [value]
    return found


def built_page(site: Path, source: str) -> Path:
    """Where a page source lands with MkDocs' directory URLs."""
    stem = source.rsplit(".", 1)[0]
    if stem == "index" or stem.endswith("/index"):
        return site / f"{stem}.html"
    return site / stem / "index.html"


def page_text(path: Path) -> str:
    """A built page's text: tags dropped, entities decoded, white space collapsed."""
    text = re.sub(r"<[^>]+>", " ", path.read_text(encoding="utf-8"))
    return " ".join(html.unescape(text).split())


def test_every_page_of_the_nav_is_built(site: Path) -> None:
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]
    sources = nav_sources(nav)
    # every page and notebook of docs/ is in the nav (and the nav names no missing file)
    docs = ROOT / "docs"
    pages = {(Path(folder) / name).relative_to(docs).as_posix()
             for folder, _, names in os.walk(docs, followlinks=True)  # notebooks/: a link
             if ".ipynb_checkpoints" not in folder
             for name in names if name.endswith((".md", ".ipynb"))}
    assert set(sources) == pages
    missing = [s for s in sources if not built_page(site, s).is_file()]
    assert not missing
    # each guide page the README links to is in the nav
    for page in ("getting-started.md", "jupyter.md", "cli.md", "python-api.md", "repl.md",
                 "security.md", "scale-out.md", "embedded-model.md", "benchmarks.md",
                 "architecture.md", "protocol.md", "tracing.md", "development.md"):
        assert page in sources, page


def test_the_api_reference_is_read_from_the_docstrings(site: Path) -> None:
    from rlm_kernel import RLM, RLMConfig

    rlm_page = page_text(site / "reference" / "rlm" / "index.html")
    summary, rest = inspect.getdoc(RLM.run).split("\n\n", 1)
    # the docstring's first paragraph, as the page reads once its ``code`` is rendered
    assert " ".join(summary.replace("``", "").split()) in rlm_page
    # and its Args section, one row per parameter with the parameter's own words
    question = re.search(r"question: (.+)", rest)[1].strip()
    assert question in rlm_page
    assert "Answer question by letting the model" in rlm_page
    config_page = page_text(site / "reference" / "config" / "index.html")
    assert " ".join(RLMConfig.__doc__.split("\n")[0].split()) in config_page
    # the table of settings is made from the code: every setting, its help and option
    from rlm_kernel.engine.config import settings

    for setting in settings():
        assert f"{setting.name} " in config_page, setting.name
        assert " ".join(setting.help.split())[:60] in config_page, setting.name
        if setting.flag:
            assert setting.flag in config_page, setting.flag
    # and the Jupyter-only options from the traits' help
    from rlm_kernel.jupyter.kernel import RLMKernel

    jupyter_page = page_text(site / "reference" / "jupyter" / "index.html")
    help_text = " ".join(RLMKernel.class_traits()["prose_tasks"].help.split())
    assert f"c.RLMKernel.prose_tasks {help_text}" in jupyter_page
    assert "c.RLM.warm_start" in jupyter_page and "c.RLM.max_iterations" not in jupyter_page


def _bare(text: str) -> str:
    """Text without white space and Markdown marks, to compare a source with its page."""
    return re.sub(r"[\s#`*_]", "", text)


def test_the_notebooks_are_rendered_as_committed(site: Path) -> None:
    """Each notebook of notebooks/ is a page with every cell's source, and nothing was
    executed to make it: the page holds exactly the outputs the file holds."""
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        page = site / "notebooks" / notebook.stem / "index.html"
        assert page.is_file(), notebook.name
        raw = page.read_text(encoding="utf-8")
        text = _bare(page_text(page))
        cells = json.loads(notebook.read_text())["cells"]
        for cell in cells:
            source = "".join(cell["source"])
            first = next((line for line in source.splitlines() if line.strip()), "")
            assert _bare(first)[:40] in text, first
        outputs = sum(len(c.get("outputs", [])) for c in cells if c["cell_type"] == "code")
        assert raw.count('class="jp-OutputArea-output') == outputs, notebook.name


class _Assets(HTMLParser):
    """Collects the URLs a page loads by itself (not the links a reader may follow)."""

    LOADS = {("link", "href"), ("script", "src"), ("img", "src"), ("iframe", "src"),
             ("source", "src"), ("video", "src"), ("audio", "src"), ("embed", "src"),
             ("object", "data")}

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if (tag, name) in self.LOADS and value:
                if tag == "link" and dict(attrs).get("rel") in ("next", "prev", "canonical"):
                    continue
                self.urls.append(value)


# CSS imports and url(...) values, and ES module imports of a URL, inside pages and files.
_CSS_URLS = re.compile(r"""@import\s+(?:url\()?\s*["']?([^"')\s;]+)|url\(\s*["']?([^"')\s]+)""")
_JS_IMPORTS = re.compile(r"""\bimport\s*\(\s*["'](https?:)?//""")


def _external(url: str) -> bool:
    parts = urlsplit(url)
    return parts.scheme in ("http", "https") or url.startswith("//")


def test_the_built_site_loads_nothing_from_another_host(site: Path) -> None:
    offenders: list[str] = []
    for page in site.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        parser = _Assets()
        parser.feed(text)
        urls = parser.urls + [a or b for a, b in _CSS_URLS.findall(text)]
        offenders += [f"{page.relative_to(site)}: {u}" for u in urls if _external(u)]
        if _JS_IMPORTS.search(text):
            offenders.append(f"{page.relative_to(site)}: import() of a URL")
    for sheet in site.rglob("*.css"):
        urls = [a or b for a, b in _CSS_URLS.findall(sheet.read_text(encoding="utf-8"))]
        offenders += [f"{sheet.relative_to(site)}: {u}" for u in urls if _external(u)]
    assert not offenders


def test_the_offline_check_sees_an_external_asset() -> None:
    parser = _Assets()
    parser.feed('<link rel="stylesheet" href="https://fonts.example/css">'
                '<script src="//cdn.example/x.js"></script><script src="assets/a.js"></script>')
    assert [u for u in parser.urls if _external(u)] == ["https://fonts.example/css",
                                                        "//cdn.example/x.js"]
    assert _CSS_URLS.findall("@import url(https://fonts.example/a.css);")[0][0]


def test_a_broken_link_or_docstring_fails_the_build(tmp_path: Path) -> None:
    """A copy of the site and the package with three faults: a page links to no page, a
    docstring names a parameter the function does not have, and a docstring refers to
    an object the package does not have. The strict build fails and names each."""
    copy = tmp_path / "repo"
    shutil.copytree(ROOT / "docs", copy / "docs", symlinks=False,
                    ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
    shutil.copytree(ROOT / "rlm_kernel", copy / "rlm_kernel",
                    ignore=shutil.ignore_patterns("__pycache__", "labextension"))
    shutil.copy(ROOT / "mkdocs.yml", copy / "mkdocs.yml")
    page = copy / "docs" / "cli.md"
    page.write_text(page.read_text() + "\nSee [the options](no-such-page.md).\n")
    source = copy / "rlm_kernel" / "engine" / "rlm.py"
    line = "            question: the task, in natural language.\n"
    assert line in source.read_text()
    source.write_text(source.read_text().replace(line, (
        "            question: the task, in natural language; see\n"
        "                :class:`~rlm_kernel.engine.no_such_module.Thing`.\n"
        "            no_such_parameter: named by no parameter.\n")))
    done = build(copy / "mkdocs.yml", tmp_path / "site")
    assert done.returncode != 0
    for fault in ("no-such-page.md", "no_such_parameter", "rlm_kernel.engine.no_such_module.Thing"):
        assert fault in done.stderr, (fault, done.stderr[-3000:])
