"""ipywidgets views of a run (plain ipywidgets 8, no custom front-end code).

:class:`ProgressView` (step, elapsed, tokens, USD, activity), :class:`VariablesView`
(the :class:`REPLVariable` table) and :class:`RunView` (both; pass ``view.on_event`` as
the ``RLM`` observer).  ``text()`` gives a one-line summary where widgets cannot render.

Each view is one ``ipywidgets.HTML``, and all of them share one ``Layout`` and one
``HTMLStyle``: a run opens 2 comms (ipywidgets gives every widget a layout and a style
widget of its own otherwise: 3 comms each, ~31 for the old box-and-label views), and
:meth:`RunView.dispose` closes them.
"""

from __future__ import annotations

import html
import threading
import time
from collections.abc import Mapping
from typing import Any

import ipywidgets as w
from ipywidgets.widgets.widget_string import HTMLStyle

from ..engine.events import Event
from ..engine.tools import user_variables
from ..repl_types import REPLVariable

__all__ = ["ProgressView", "RunView", "VariablesView", "variables_from_namespace",
           "html_widget"]

PREVIEW_CHARS = 80  # characters of preview shown per table row
_BAR_STYLES = {"final": "success", "max_iterations": "warning", "interrupt": "warning"}


_shared: dict[str, Any] = {}


def html_widget(value: str = "") -> w.HTML:
    """An ``ipywidgets.HTML`` that shares its layout and style widgets with every other
    one made here, so it costs one comm instead of three."""
    if "layout" not in _shared or _shared["layout"].comm is None:
        _shared["layout"], _shared["style"] = w.Layout(), HTMLStyle()
    return w.HTML(value=value, layout=_shared["layout"], style=_shared["style"])


class _Text:
    """A value slot standing in for a label (read by tests and ``text()``)."""

    def __init__(self, value: str = "") -> None:
        self.value = value


class _Bar:
    """The progress bar's state: value of max, and a style (success/warning/danger)."""

    def __init__(self, max_value: int) -> None:
        self.value, self.max, self.bar_style = 0, max_value, ""


_BAR_COLOURS = {"": "#2196f3", "success": "#4caf50", "warning": "#ff9800", "danger": "#f44336"}


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


def _phrase(kind: str, d: dict[str, Any]) -> str | None:
    """What a model_call, step_started or sub_call event means, in words."""
    if kind == "model_call":
        return f"waiting for the model (step {d.get('step')})"
    if kind == "step_started":
        return f"running step {d.get('step')}"
    if kind == "sub_call":
        return f"sub-calls {d.get('done', 0)} done, {d.get('active', 0)} in flight"
    return None


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


class ProgressView:
    """Live progress of a run: step bar, elapsed seconds, tokens, USD, current activity.

    Args:
        max_iterations: the step budget (replaced by ``run_started``'s value).
        tick: seconds between elapsed-time updates by a daemon thread while the run is
            active (so the time moves while the model thinks); ``None`` disables it.
    """

    def __init__(self, max_iterations: int, *, tick: float | None = 1.0) -> None:
        self.max_iterations, self.step, self.elapsed = max_iterations, 0, 0.0
        self.totals: dict[str, Any] = {"prompt_tokens": 0, "completion_tokens": 0,
                                       "cost_usd": 0.0}
        self.activity, self._active = "not started", False
        self._tick, self._origin = tick, time.monotonic()
        self._lock, self._stop = threading.Lock(), threading.Event()
        self._thread: threading.Thread | None = None
        self.bar = _Bar(max(1, max_iterations))
        self.step_label, self.elapsed_label, self.tokens_label, self.cost_label, \
            self.activity_label = (_Text() for _ in range(5))
        self.widget = html_widget()
        self._render()

    def on_event(self, event: Event) -> None:
        """Update from one engine event; events of sub-runs (depth > 0) only change
        the activity text and the (shared) totals."""
        d = event.data
        depth = d.get("depth", 0)
        with self._lock:
            if isinstance(d.get("totals"), dict):
                self.totals = {**self.totals, **d["totals"]}
            if depth > 0:
                self._sub_run(event.kind, depth, d)
            else:
                self._top_run(event.kind, d)
            self._render()
        if event.kind == "run_started" and depth == 0:
            self._start_ticker()
        elif event.kind == "run_finished" and depth == 0:
            self._stop.set()

    def _top_run(self, kind: str, d: dict[str, Any]) -> None:
        if "elapsed" in d:
            self.elapsed = float(d["elapsed"])
            self._origin = time.monotonic() - self.elapsed
        if kind == "run_started":
            self.max_iterations = int(d.get("max_iterations") or self.max_iterations)
            self.bar.max, self.bar.bar_style = max(1, self.max_iterations), ""
            self.step, self._active, self.activity = 0, True, "started"
        elif kind in ("model_call", "step_started"):
            self.step = d["step"]
            self.activity = _phrase(kind, d)
        elif kind == "sub_call":
            self.activity = f"step {self.step}: {_phrase(kind, d)}"
        elif kind == "step_finished":
            out = d.get("outcome")
            ok, secs = getattr(out, "success", True), getattr(out, "seconds", 0.0)
            self.activity = f"step {d['step']} {'done' if ok else 'failed'} ({secs:.2f} s)"
        elif kind == "run_finished":
            res = d["result"]
            self._active = False
            self.bar.bar_style = _BAR_STYLES.get(res.stopped_by, "danger")
            word = "finished" if res.stopped_by == "final" else "stopped"
            self.activity = f"{word}: {res.stopped_by}" + (f" — {res.error}" if res.error else "")

    def _sub_run(self, kind: str, depth: int, d: dict[str, Any]) -> None:
        what = _phrase(kind, d) or {"run_started": "started", "run_finished":
                                    f"finished: {getattr(d.get('result'), 'stopped_by', '')}"
                                    }.get(kind)
        if what:
            self.activity = f"step {self.step}: sub-run (depth {depth}) {what}"

    def _render(self) -> None:
        self.bar.value = max(0, min(self.step, self.max_iterations))
        self.step_label.value = (f"step {self.step} of {self.max_iterations}"
                                 if self.step <= self.max_iterations
                                 else f"answer-now step (after {self.max_iterations})")
        self.elapsed_label.value = f"{self.elapsed:.1f} s"
        t = self.totals
        self.tokens_label.value = (f"{t['prompt_tokens']:,} prompt + "
                                   f"{t['completion_tokens']:,} completion tokens")
        self.cost_label.value = f"${t['cost_usd']:.4f}"
        self.activity_label.value = self.activity
        self._paint()

    def _paint(self) -> None:
        """Draw the state into the one HTML widget (a bar and three lines)."""
        share = 100 * self.bar.value / max(1, self.bar.max)
        colour = _BAR_COLOURS.get(self.bar.bar_style, _BAR_COLOURS[""])
        esc = html.escape
        self.widget.value = (
            '<div style="font-size:var(--jp-ui-font-size1,13px);line-height:1.6">'
            '<div style="display:flex;align-items:center;gap:12px">'
            '<div style="width:240px;height:10px;background:#e0e0e0;border-radius:2px">'
            f'<div style="width:{share:.0f}%;height:100%;background:{colour};'
            'border-radius:2px"></div></div>'
            f"<span>{esc(self.step_label.value)}</span></div>"
            f"<div>{esc(self.elapsed_label.value)} &nbsp;·&nbsp; "
            f"{esc(self.tokens_label.value)} &nbsp;·&nbsp; {esc(self.cost_label.value)}</div>"
            f"<div>{esc(self.activity_label.value)}</div></div>")

    def _start_ticker(self) -> None:
        if self._tick is None or (self.ticking and not self._stop.is_set()):
            return
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run_ticker, args=(self._stop,),
                                        name="rlm-progress-ticker", daemon=True)
        self._thread.start()

    def _run_ticker(self, stop: threading.Event) -> None:
        while not stop.wait(self._tick):
            with self._lock:
                if not self._active:
                    return
                self.elapsed = time.monotonic() - self._origin
                self.elapsed_label.value = f"{self.elapsed:.1f} s"
                self._paint()

    @property
    def ticking(self) -> bool:
        """Whether the elapsed-time thread is running."""
        return self._thread is not None and self._thread.is_alive()

    def close(self, timeout: float = 2.0) -> None:
        """Stop the elapsed-time thread (the widget stays displayed)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def dispose(self) -> None:
        """Stop the thread and close the widget's comm."""
        self.close()
        self.widget.close()

    def text(self) -> str:
        """One line: ``step 2 of 10 · 3.4 s · 20 prompt + 10 completion tokens · ...``."""
        with self._lock:
            return " · ".join([self.step_label.value, f"{self.elapsed:.1f} s",
                               self.tokens_label.value, self.cost_label.value, self.activity])


class RunView:
    """Progress plus a collapsible table of the variables the model sees.

    Args:
        max_iterations: the step budget.
        namespace: where the run's variables live; refreshed on ``run_started`` and
            each ``step_finished``.  Without it the ``run_started`` metadata is shown.
        names: restrict the table to these names (see :func:`variables_from_namespace`).
        tick: see :class:`ProgressView`.
    """

    def __init__(self, max_iterations: int, *, namespace: Mapping[str, Any] | None = None,
                 names: list[str] | None = None, tick: float | None = 1.0) -> None:
        self.namespace, self.names = namespace, names
        self.progress = ProgressView(max_iterations, tick=tick)
        self.variables = VariablesView(title="Variables the model sees")
        self.widgets = (self.progress.widget, self.variables.widget)

    def on_event(self, event: Event) -> None:
        """Forward to the progress view; refresh the variables at run start and
        after each top-level step."""
        self.progress.on_event(event)
        if event.data.get("depth", 0) > 0 or event.kind not in ("run_started", "step_finished"):
            return
        if self.namespace is not None:
            try:
                self.refresh()
            except KeyError as exc:  # a named variable does not exist (yet)
                self.variables.show_message(str(exc))
        elif event.kind == "run_started":
            self.variables.update(event.data.get("variables") or [])

    def refresh(self) -> None:
        """Re-read the namespace given at construction (no-op without one).

        Raises:
            KeyError: one of ``names`` is missing from the namespace.
        """
        if self.namespace is not None:
            self.variables.update(variables_from_namespace(self.namespace, self.names))

    def close(self) -> None:
        """Stop the progress view's thread (the widgets stay displayed)."""
        self.progress.close()

    def dispose(self) -> None:
        """Stop the thread and close both widgets' comms (the run's cell is re-run)."""
        self.progress.dispose()
        self.variables.widget.close()

    def text(self) -> str:
        """One line: the progress summary, then the variables summary."""
        return f"{self.progress.text()} | {self.variables.text()}"
