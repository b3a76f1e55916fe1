"""The variables view: a table of :class:`REPLVariable` metadata (name, type, length
with unit, preview) in one ``ipywidgets.HTML``, and the widget factory every view
uses (one shared ``Layout`` and ``HTMLStyle``, so a view costs one comm).

Lengths are given as a reader counts them: characters for a ``str``, items for a
list, dict, set and any other sized container, rows for a table, bytes for
``bytes``; a number or another object without a length shows none.
:meth:`VariablesView.static` is the same table as ``text/html`` and ``text/plain``,
for a notebook read without a kernel."""

from __future__ import annotations

import dataclasses
import html
from collections.abc import Mapping, Sized
from typing import Any

import ipywidgets as w
from ipywidgets.widgets.widget_string import HTMLStyle

from ..engine.frontends import describe_variable, user_variables
from ..repl_types import REPLVariable

__all__ = ["PREVIEW_CHARS", "ROOT_STYLE", "VariablesView", "html_widget", "length_text",
           "reader_length", "static_html", "variables_from_namespace"]

PREVIEW_CHARS = 80  # characters of preview shown per table row

_shared: dict[str, Any] = {}

ROOT_STYLE = ("font-family:var(--jp-ui-font-family,sans-serif);"
              "font-size:var(--jp-ui-font-size1,13px);line-height:20px;"
              "color:var(--jp-ui-font-color1,#212121);white-space:normal;"
              "margin:0;padding:0;text-align:left")
"""The inline style of a view's root element.  A live widget sits in ipywidgets' HTML
box (28 px lines, no wrapping) and its static copy in a notebook's rendered HTML (the
content font, 1.7 line height): both inherit this root's own values, so a view does not
change size or font when it turns static."""
_SUMMARY = "cursor:pointer;margin:0;padding:0"
_GRID = ("display:grid;grid-template-columns:max-content max-content max-content "
         "minmax(0,1fr);column-gap:16px;row-gap:0;margin:2px 0 0 0;padding:0")
_CELL = "margin:0;padding:1px 0;white-space:nowrap;text-align:left;min-width:0;"
_MONO = "font-family:var(--jp-code-font-family,monospace);font-size:inherit;"


def static_html(value: str) -> str:
    """A widget's HTML ``value`` as a notebook keeps it once the widget is gone: in a box
    with the margin ipywidgets gives a widget (2 px), so the view stays where it was."""
    return f'<div class="rlm-static" style="margin:2px;padding:0">{value}</div>'


def html_widget(value: str = "") -> w.HTML:
    """An ``ipywidgets.HTML`` that shares its layout and style widgets with every other
    one made here, so it costs one comm instead of three."""
    if "layout" not in _shared or _shared["layout"].comm is None:
        _shared["layout"], _shared["style"] = w.Layout(), HTMLStyle()
    return w.HTML(value=value, layout=_shared["layout"], style=_shared["style"])


def variables_from_namespace(ns: Mapping[str, Any],
                             names: list[str] | None = None) -> list[REPLVariable]:
    """Describe the data variables of ``ns`` for a reader: the model's preview, and the
    length as a reader counts it (see :func:`reader_length`).

    Without ``names``: every name that is not private (``_x``), a module, a callable,
    an IPython helper or a reserved RLM name.  With ``names``: exactly those, in order.
    Cost is O(variables x preview), never O(size of the values).

    Raises:
        KeyError: a name in ``names`` is not in ``ns`` (the missing name is given).
    """
    return [_tool_preview(reader_length(describe_variable(n, v, preview_length=200), v),
                          v) for n, v in user_variables(ns, names).items()]


def _tool_preview(var: REPLVariable, value: Any) -> REPLVariable:
    """A function named in ``names`` (a tool, ``%rlm tools``) previews as the model is
    told it: its signature and the first paragraph of its docstring."""
    if callable(value) and not isinstance(value, type):
        from ..engine.frontends import describe_tool

        var.preview = describe_tool(var.name, value)[2:]
    return var


def reader_length(var: REPLVariable, value: Any) -> REPLVariable:
    """``var`` with the length a reader expects of ``value``.

    The model is told the character count of a small container's JSON text (it reads
    that text); a reader of the table counts a 2-item list as 2 items.  So: ``str``
    keeps its characters, rows, items and bytes stay, any other sized value (list,
    tuple, dict, set, deque, range ...) gets ``len(value)`` items, and a value without
    a length (a number, ``None``, an object) gets none (``length_unit`` ``""``).
    """
    if isinstance(value, str) or var.length_unit in ("rows", "items", "bytes"):
        return var
    if isinstance(value, Sized):
        try:
            return dataclasses.replace(var, total_length=len(value), length_unit="items")
        except Exception:  # noqa: BLE001 - a broken __len__ is the value's own business
            pass
    return dataclasses.replace(var, total_length=0, length_unit="")


def length_text(var: REPLVariable) -> str:
    """``"12,345 characters"``, ``"1 item"``, ``"3 rows"``; ``""`` for no length."""
    if not var.length_unit:
        return ""
    unit = var.length_unit
    if var.total_length == 1 and unit.endswith("s"):
        unit = unit[:-1]
    return f"{var.total_length:,} {unit}"


def _one_line(text: str, limit: int = PREVIEW_CHARS) -> str:
    """``text`` with whitespace runs collapsed to one space, cut to ``limit`` + ``...``."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit] + "..."


class VariablesView:
    """A table of variable metadata: name, type, length with unit, preview.

    Args:
        title: when given, the table sits in an open ``<details>`` with this summary.
    """

    def __init__(self, title: str | None = None) -> None:
        self.variables: list[REPLVariable] = []
        self.title = title
        self.message: str | None = None  # shown instead of the table (show_message)
        self.widget = html_widget(self._html())

    def update(self, variables: list[REPLVariable]) -> None:
        """Show ``variables`` (replacing what was shown)."""
        self.variables, self.message = list(variables), None
        self.widget.value = self._html()

    def _html(self) -> str:
        return self._framed(self._table())

    def _framed(self, body: str) -> str:
        """``body`` in the view's root (its own font, size, line height and colour, so
        it reads the same in the live widget and in a notebook's static HTML), under an
        open ``<details>`` when there is a title."""
        if self.title is not None:
            body = (f"<details open><summary style=\"{_SUMMARY}\">"
                    f"{html.escape(self.title)}</summary>{body}</details>")
        return f'<div class="rlm-variables-view" style="{ROOT_STYLE}">{body}</div>'

    def show_message(self, text: str) -> None:
        """Show ``text`` (escaped, in italics) instead of the table."""
        self.message = text
        self.widget.value = self._framed(f"<i>{html.escape(text)}</i>")

    def _table(self) -> str:
        """The variables as a CSS grid of four columns (name, type, length, preview):
        every row on one line, the columns aligned, the preview cut with an ellipsis
        where the output is narrow.  Not a ``<table>``: a notebook's HTML output styles
        tables (centred, fixed layout, right-aligned cells) and the widget does not."""
        if not self.variables:
            return "<i>No variables.</i>"
        cells = [f'<div style="{_CELL}font-weight:bold">{h}</div>'
                 for h in ("Name", "Type", "Length", "Preview")]
        for v in self.variables:
            cells += [f'<div style="{_CELL}{_MONO}">{html.escape(v.name)}</div>',
                      f'<div style="{_CELL}">{html.escape(v.type_name)}</div>',
                      f'<div style="{_CELL}">{html.escape(length_text(v))}</div>',
                      f'<div style="{_CELL}{_MONO}overflow:hidden;text-overflow:ellipsis">'
                      f"{html.escape(_one_line(v.preview))}</div>"]
        return (f'<div class="rlm-variables" style="{_GRID}">'
                + "".join(cells) + "</div>")

    def text(self) -> str:
        """One line: ``2 variables: context (str, 11 characters), hits (list, 2 items)``."""
        parts = [f"{v.name} ({', '.join(filter(None, (v.type_name, length_text(v))))})"
                 for v in self.variables]
        count = f"{len(parts)} variable{'' if len(parts) == 1 else 's'}"
        return f"{count}: {', '.join(parts)}" if parts else "no variables"

    def plain_table(self) -> str:
        """The table as aligned plain text (title first when there is one)."""
        rows = [("Name", "Type", "Length", "Preview")] + [
            (v.name, v.type_name, length_text(v), _one_line(v.preview))
            for v in self.variables]
        widths = [max(len(r[i]) for r in rows) for i in range(3)]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r[:3], widths, strict=True))
                 + "  " + r[3] for r in rows]
        body = (self.message if self.message is not None else
                "\n".join(line.rstrip() for line in lines) if self.variables
                else "No variables.")
        return f"{self.title}:\n{body}" if self.title else body

    def static(self) -> dict[str, str]:
        """What the widget shows, as a display's ``text/html`` and ``text/plain`` (no
        widget: it reads the same with the kernel gone, in nbviewer or on GitHub)."""
        return {"text/html": static_html(self.widget.value), "text/plain": self.plain_table()}
