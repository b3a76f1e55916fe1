"""The variables view: a table of :class:`REPLVariable` metadata (name, type, length
with unit, preview) in one ``ipywidgets.HTML``, and the widget factory every view
uses (one shared ``Layout`` and ``HTMLStyle``, so a view costs one comm)."""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

import ipywidgets as w
from ipywidgets.widgets.widget_string import HTMLStyle

from ..engine.tools import user_variables
from ..repl_types import REPLVariable

__all__ = ["PREVIEW_CHARS", "VariablesView", "html_widget", "variables_from_namespace"]

PREVIEW_CHARS = 80  # characters of preview shown per table row

_shared: dict[str, Any] = {}


def html_widget(value: str = "") -> w.HTML:
    """An ``ipywidgets.HTML`` that shares its layout and style widgets with every other
    one made here, so it costs one comm instead of three."""
    if "layout" not in _shared or _shared["layout"].comm is None:
        _shared["layout"], _shared["style"] = w.Layout(), HTMLStyle()
    return w.HTML(value=value, layout=_shared["layout"], style=_shared["style"])


def variables_from_namespace(ns: Mapping[str, Any],
                             names: list[str] | None = None) -> list[REPLVariable]:
    """Describe the data variables of ``ns`` as the model sees them.

    Without ``names``: every name that is not private (``_x``), a module, a callable,
    an IPython helper or a reserved RLM name.  With ``names``: exactly those, in order.
    Cost is O(variables x preview), never O(size of the values).

    Raises:
        KeyError: a name in ``names`` is not in ``ns`` (the missing name is given).
    """
    return [REPLVariable.from_value(n, v, preview_length=200)
            for n, v in user_variables(ns, names).items()]


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
        self.widget = html_widget(self._html())

    def update(self, variables: list[REPLVariable]) -> None:
        """Show ``variables`` (replacing what was shown)."""
        self.variables = list(variables)
        self.widget.value = self._html()

    def _html(self) -> str:
        body = self._table()
        if self.title is None:
            return body
        return (f"<details open><summary>{html.escape(self.title)}</summary>{body}"
                "</details>")

    def show_message(self, text: str) -> None:
        """Show ``text`` (escaped, in italics) instead of the table."""
        body = f"<i>{html.escape(text)}</i>"
        self.widget.value = body if self.title is None else (
            f"<details open><summary>{html.escape(self.title)}</summary>{body}</details>")

    def _table(self) -> str:
        if not self.variables:
            return "<i>No variables.</i>"
        pad = "padding:1px 8px;text-align:left;"
        rows = ["".join(f'<th style="{pad}">{h}</th>' for h in ("Name", "Type", "Length",
                                                                 "Preview"))]
        for v in self.variables:
            cells = (f"<code>{html.escape(v.name)}</code>", html.escape(v.type_name),
                     html.escape(f"{v.total_length:,} {v.length_unit}"),
                     f"<code>{html.escape(_one_line(v.preview))}</code>")
            rows.append("".join(f'<td style="{pad}white-space:pre">{c}</td>' for c in cells))
        return ('<table class="rlm-variables">' + "".join(f"<tr>{r}</tr>" for r in rows)
                + "</table>")

    def text(self) -> str:
        """One line: ``2 variables: context (str, 11 characters), n (int, 2 characters)``."""
        parts = [f"{v.name} ({v.type_name}, {v.total_length:,} {v.length_unit})"
                 for v in self.variables]
        count = f"{len(parts)} variable{'' if len(parts) == 1 else 's'}"
        return f"{count}: {', '.join(parts)}" if parts else "no variables"
