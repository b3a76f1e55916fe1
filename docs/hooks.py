"""MkDocs hooks (mkdocs.yml ``hooks:``) of the documentation site.

- The docstrings cross-reference in Sphinx's roles (``:class:`~rlm_kernel.x.Y` ``), which
  mkdocstrings' Google-style parser leaves as text: a role naming a full
  ``rlm_kernel`` path becomes a link to its reference entry when the reference documents
  it (plain code otherwise), and the role's prefix is dropped; a full path that names
  nothing in the package is a warning, so the strict build fails on it.
- ``reference/config.md`` gets its table of settings from
  :func:`rlm_kernel.engine.config.settings`, the one source the CLI options, the ``%rlm``
  options and the ``c.RLM`` traits are made from, so the page never disagrees with them;
  ``reference/jupyter.md`` gets the Jupyter-only options from the traits' own help.
- The built site loads nothing from another host: nbconvert's HTML template, which
  mkdocs-jupyter renders the notebooks with, carries a script that imports mermaid.js
  from a CDN when a notebook holds a mermaid diagram; the notebooks here hold none, so
  the script is left out.
"""

from __future__ import annotations

import logging
import re
import sys
from pathlib import Path
from typing import Any

log = logging.getLogger(f"mkdocs.hooks.{__name__}")
CHECKOUT = Path(__file__).resolve().parents[1]


def _checkout_importable() -> None:
    """Put the checkout first on ``sys.path``: the package the site documents, as
    mkdocstrings reads it (``paths: [.]``), also when the venv holds no editable install
    of it (mkdocstrings restores ``sys.path`` after its own reads)."""
    if str(CHECKOUT) not in sys.path:
        sys.path.insert(0, str(CHECKOUT))

# A Sphinx role after Markdown: ``:class:`~a.b.C` `` is now ``:class:<code>~a.b.C</code>``.
_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|data|attr|exc|obj):"
                   r"<code>(?P<tilde>~?)(?P<name>[\w.]+)(?P<call>\(\))?</code>")


def resolves(dotted: str) -> bool:
    """Whether ``dotted`` (``rlm_kernel.engine.rlm.RLM.run``) names an object: the longest
    importable module prefix, then attributes (a dataclass field or an annotated class
    attribute counts)."""
    import importlib

    _checkout_importable()
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            if hasattr(obj, attr):
                obj = getattr(obj, attr)
            elif attr in getattr(obj, "__annotations__", {}) or attr in getattr(
                    obj, "__dataclass_fields__", {}):
                obj = None
            else:
                return False
        return True
    return False


def _role(match: re.Match[str], where: str) -> str:
    name = match["name"].lstrip(".")
    title = (name.rsplit(".", 1)[-1] if match["tilde"] else match["name"]) + (match["call"] or "")
    if name.startswith("rlm_kernel."):
        if not resolves(name):  # strict mode turns the warning into a failed build
            log.warning("%s: a docstring refers to %s, which the package does not have",
                        where, name)
        # resolved by mkdocs-autorefs once every page is rendered; "optional": an object
        # the reference does not document stays plain code, with no warning
        return f'<autoref identifier="{name}" optional><code>{title}</code></autoref>'
    return f"<code>{title}</code>"


def on_page_content(html: str, page: Any, config: Any, files: Any) -> str:
    """Turn the docstrings' Sphinx roles into links or plain code.

    Args:
        html: the page's rendered Markdown (mkdocstrings' output included).
        page: the MkDocs page.
        config: the MkDocs config (unused).
        files: the site's files (unused).

    Returns:
        The HTML with every ``:role:<code>name</code>`` replaced; a role naming an
        ``rlm_kernel`` object that does not exist is logged as a warning (which fails
        ``mkdocs build --strict``).
    """
    return _ROLE.sub(lambda match: _role(match, page.file.src_uri), html)


SETTINGS_MARK = "<!-- settings table -->"


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _bounds(setting: Any) -> str:
    parts = []
    if setting.low is not None:
        parts.append(f"> {setting.low:g}" if setting.above else f">= {setting.low:g}")
    if setting.high is not None:
        parts.append(f"<= {setting.high:g}")
    if setting.choices:
        parts.append(" / ".join(f"`{c}`" for c in setting.choices))
    return _cell(", ".join(parts))


def settings_table() -> str:
    """Every field of ``RLMConfig`` as a Markdown table, in declaration order: the name
    and its per-run option, the type, default and bounds, and the help."""
    _checkout_importable()
    from rlm_kernel.engine.config import settings

    rows = ["| Setting | Default | What it does |", "|---|---|---|"]
    for s in settings():
        name = f"`{s.name}`" + (f"<br>`{s.flag}`" if s.flag else "")
        kind = s.kind + (" or None" if s.optional else "")
        bounds = _bounds(s)
        default = f"`{s.default!r}`<br>{kind}" + (f", {bounds}" if bounds else "")
        rows.append(f"| {name} | {default} | {_cell(s.help)} |")
    return "\n".join(rows)


TRAITS_MARK = "<!-- jupyter traits -->"


def jupyter_traits_table() -> str:
    """The Jupyter-only options as a Markdown table: the traits of ``c.RLM`` that are not
    ``RLMConfig`` fields, and ``c.RLMKernel``'s own, each with its help text."""
    _checkout_importable()
    from rlm_kernel.engine.config import settings
    from rlm_kernel.jupyter.kernel import RLMKernel
    from rlm_kernel.jupyter.settings import RLM

    fields = {s.name for s in settings()}
    rows = ["| Option | What it does |", "|---|---|"]
    for cls in (RLM, RLMKernel):
        for name, trait in cls.class_own_traits(config=True).items():
            if cls is RLM and name in fields:
                continue
            rows.append(f"| `c.{cls.__name__}.{name}` | {_cell(trait.help)} |")
    return "\n".join(rows)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Fill ``<!-- settings table -->`` with :func:`settings_table` and
    ``<!-- jupyter traits -->`` with :func:`jupyter_traits_table`.

    Args:
        markdown: the page's Markdown source.
        page: the MkDocs page.
        config: the MkDocs config (unused).
        files: the site's files (unused).

    Returns:
        The Markdown with the mark replaced (pages without it unchanged).
    """
    if SETTINGS_MARK in markdown:
        markdown = markdown.replace(SETTINGS_MARK, settings_table())
    if TRAITS_MARK in markdown:
        markdown = markdown.replace(TRAITS_MARK, jupyter_traits_table())
    return markdown


# The <script type="module"> block of nbconvert's base template that imports mermaid.
_MERMAID_LOADER = re.compile(
    r"<script type=\"module\">(?:(?!</script>).)*?mermaid(?:(?!</script>).)*?</script>", re.S)


def on_post_page(output: str, page: Any, config: Any) -> str:
    """Drop the CDN mermaid loader from a rendered notebook page.

    Args:
        output: the page's full HTML.
        page: the MkDocs page (its ``file.src_uri`` is logged).
        config: the MkDocs config (unused).

    Returns:
        The HTML without the loader script; other pages are returned unchanged.
    """
    cleaned, count = _MERMAID_LOADER.subn("", output)
    if count:
        log.debug("%s: dropped %d CDN mermaid loader(s)", page.file.src_uri, count)
    return cleaned
