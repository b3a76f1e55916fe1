"""ipywidgets views of a run (plain ipywidgets 8, no custom front-end code).

:class:`ProgressView` (step, elapsed, tokens, USD, activity), :class:`VariablesView`
(the :class:`REPLVariable` table) and :class:`RunView` (both; pass ``view.on_event`` as
the ``RLM`` observer).  ``text()`` gives a one-line summary where widgets cannot render.

Each view is one ``ipywidgets.HTML``, and all of them share one ``Layout`` and one
``HTMLStyle``: a run opens 2 comms (ipywidgets gives every widget a layout and a style
widget of its own otherwise: 3 comms each, ~31 for the old box-and-label views), and
:meth:`RunView.dispose` closes them.

A widget needs its kernel: a notebook saved with one and reopened later shows
"Error displaying widget: model not found" in its place.  So a live view lasts as
long as its run: :meth:`RunView.show` displays each widget under a display id, and
:meth:`RunView.close` (the run has ended) replaces both displays with their static
rendering (the same HTML, and a ``text/plain`` summary: what nbviewer, GitHub and a
reopened notebook show), then closes the widgets' comms.  At the end the progress
bar is full and reads the steps run (``2 steps, final``), not the step budget; its
colour and a last line say, in words, how the run ended, from the engine's one table
(:mod:`.outcome`: ``The answer was computed by the model's code from your data.`` in
green only for an answer from the user's data, ``No answer: you interrupted the run.``
in amber, red only for an error without an answer); the stop's details (a stuck run:
what it repeated; an error's message), when there are any, follow once.  The "answer
now" call a run makes after it stopped early reads as that, not as a further step.
"""

from __future__ import annotations

import html
import threading
import time
from collections.abc import Mapping
from typing import Any

from IPython.display import DisplayHandle, display

from ..engine import Event, RunObserver
from ..engine.frontends import (
    TONES,
    CandidateFinished,
    CandidateStarted,
    ModelCall,
    ModelWriting,
    RunFinished,
    RunStarted,
    StepFinished,
    StepNotice,
    StepStarted,
    SubCall,
    short_answer,
)
from ..executors import host_thread
from .outcome import ending_of
from .variables_view import (
    ROOT_STYLE,
    VariablesView,
    html_widget,
    static_html,
    variables_from_namespace,
)

__all__ = ["ProgressView", "RunView", "VariablesView", "variables_from_namespace",
           "html_widget"]

class _Text:
    """A value slot standing in for a label (read by tests and ``text()``)."""

    def __init__(self, value: str = "") -> None:
        self.value = value


class _Bar:
    """The progress bar's state: value of max, and a style (success/warning/danger)."""

    def __init__(self, max_value: int) -> None:
        self.value, self.max, self.bar_style = 0, max_value, ""


_RUNNING_COLOUR = "#2196f3"  # the bar while the run goes on (Material blue 500)
_BAR_COLOURS = {"": _RUNNING_COLOUR, **{t["widget"]: t["bar"] for t in TONES.values()}}
_NOTE_COLOURS = {t["widget"]: t["text"] for t in TONES.values()}  # on a light background
ANSWER_NOW = "answer now (the run had stopped)"
"""What the progress view calls the "answer now" call, in place of a step number."""


def _phrase(event: Event) -> str | None:
    """What an event means, in words, as a run's current activity (None: no change)."""
    match event:
        case ModelCall():
            return f"waiting for the model (step {event.step})"
        case StepStarted():
            return f"running step {event.step}"
        case SubCall():
            return f"sub-calls {event.done} done, {event.active} in flight"
    return None


class ProgressView(RunObserver):
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
        self.activity, self._active = "starting…", False
        self.candidate: str = ""  # in a candidates run: "candidate 2/3 · "
        self.final: str | None = None  # once the run has ended: "2 steps, final"
        self.note: str | None = None  # once the run has ended: how, in words (one sentence)
        self.answer_now = False  # the "answer now" call runs (after the run stopped)
        self.tone = ""  # once the run has ended: ok, caution or error (TONES)
        self.no_data: bool | None = None  # the run had no data at all (run_started says)
        self.started = False  # run_started was seen (a run that failed to start: False)
        self.last_notice: str | None = None  # the host's last note on a step
        self._tick, self._origin = tick, time.monotonic()
        self._lock, self._stop = threading.Lock(), threading.Event()
        self._thread: threading.Thread | None = None
        self.bar = _Bar(max(1, max_iterations))
        self.step_label, self.elapsed_label, self.tokens_label, self.cost_label, \
            self.activity_label = (_Text() for _ in range(5))
        self.widget = html_widget()
        self._render()

    def on_event(self, event: Event) -> None:
        """Update from one engine event (the ``RLM`` observer; same as calling the
        view)."""
        self.notify(event)

    def notify(self, event: Event) -> None:
        """Update from one engine event; events of sub-runs (depth > 0) only change
        the activity text and the (shared) totals."""
        with self._lock:
            if event.totals is not None:
                self.totals = {**self.totals, **event.totals}
            if event.depth > 0:
                self._sub_run(event)
            else:
                self.elapsed = float(event.elapsed)
                self._origin = time.monotonic() - self.elapsed
                event.deliver(self)
            self._render()
        if event.depth == 0 and isinstance(event, RunStarted):
            self._start_ticker()
        elif event.depth == 0 and isinstance(event, RunFinished):
            self._stop.set()

    def on_run_started(self, event: RunStarted) -> None:
        """A new run: the bar restarts with its step budget."""
        self.max_iterations = int(event.max_iterations or self.max_iterations)
        self.bar.max, self.bar.bar_style = max(1, self.max_iterations), ""
        self.step, self._active, self.activity = 0, True, "started"
        self.final, self.note, self.started = None, None, True
        self.answer_now, self.tone = False, ""
        self.no_data = bool(getattr(event, "no_data", False))

    def on_step_notice(self, event: StepNotice) -> None:
        """Keep the host's last note (a stuck run's end says it)."""
        self.last_notice = str(event.text or "").strip() or None

    def on_model_call(self, event: ModelCall) -> None:
        """Waiting for the model's reply for a step."""
        self.step, self.activity = event.step, _phrase(event) or ""

    def on_model_writing(self, event: ModelWriting) -> None:
        """The model writes a step's reply: how much, and how fast (tokens a second)."""
        rate = f", {event.tokens_per_second:.1f} tokens/s" if event.tokens_per_second else ""
        self.step = event.step
        self.activity = (f"the model writes step {event.step} ({event.pieces} tokens{rate})"
                         if not event.done else f"step {event.step} written "
                         f"({event.pieces} tokens{rate})")

    def on_step_started(self, event: StepStarted) -> None:
        """A step's code runs (or the "answer now" call's, said so)."""
        self.step, self.activity = event.step, _phrase(event) or ""
        if getattr(event, "answer_now", False):
            self.answer_now, self.activity = True, f"running the {ANSWER_NOW}"

    def on_sub_call(self, event: SubCall) -> None:
        """The running step's sub-calls so far."""
        self.activity = f"step {self.step}: {_phrase(event)}"

    def on_step_finished(self, event: StepFinished) -> None:
        """A step ended: done or failed, and its seconds."""
        ok, secs = event.outcome.success, event.outcome.seconds
        self.activity = f"step {event.step} {'done' if ok else 'failed'} ({secs:.2f} s)"

    def on_candidate_started(self, event: CandidateStarted) -> None:
        """A candidate of a candidates run begins: the bar restarts."""
        self.candidate = f"candidate {event.candidate}/{event.candidates} · "
        self.step, self.activity = 0, f"candidate {event.candidate} started"

    def on_candidate_finished(self, event: CandidateFinished) -> None:
        """A candidate ended: its answer and votes so far."""
        got = "no answer" if event.answer is None else \
            f"{short_answer(event.answer)} ({event.votes} vote{'s' * (event.votes != 1)})"
        self.activity = f"candidate {event.candidate} done: {got}"

    def on_run_finished(self, event: RunFinished) -> None:
        """The run ended: a full bar, the steps run, how the answer was reached."""
        res = event.result
        self._active = False
        chosen = [c for c in getattr(res, "candidates", None) or [] if c.get("chosen")]
        if chosen:  # the steps shown are the chosen candidate's
            self.candidate = f"candidate {chosen[0]['index']} chosen · "
            self.step = int(chosen[0].get("steps") or 0)
        steps = int(getattr(res, "steps", self.step))
        self.final = f"{steps} step{'s' * (steps != 1)}, {res.stopped_by}"
        end = ending_of(res, self.no_data)
        self.bar.bar_style = TONES[end.tone]["widget"]
        self.note, self.tone = end.words, end.tone  # once: how the run ended (why it stopped)
        # then the stop's details, once: an error's message, what a stuck run repeated
        self.activity = res.error or (self.last_notice if res.stopped_by == "stuck" else "") \
            or ""

    def _sub_run(self, event: Event) -> None:
        """A child run's event: the activity names it (its start, calls, steps, end)."""
        match event:
            case RunStarted():
                what: str | None = "started"
            case RunFinished():
                what = f"finished: {event.result.stopped_by}"
            case _:
                what = _phrase(event)
        if what:
            self.activity = f"step {self.step}: sub-run (depth {event.depth}) {what}"

    def _render(self) -> None:
        if self.final is not None:  # the run has ended: a full bar, the steps it ran
            self.bar.value = self.bar.max
            self.step_label.value = self.candidate + self.final
        else:
            self.bar.value = max(0, min(self.step, self.max_iterations))
            self.step_label.value = self.candidate + (
                ANSWER_NOW if self.answer_now or self.step > self.max_iterations
                else f"step {self.step} of {self.max_iterations}")
        self.elapsed_label.value = f"{self.elapsed:.1f} s"
        t = self.totals
        self.tokens_label.value = (f"{t['prompt_tokens']:,} prompt + "
                                   f"{t['completion_tokens']:,} completion tokens")
        self.cost_label.value = f"${t['cost_usd']:.4f}"
        self.activity_label.value = self.activity
        self._paint()

    def _paint(self) -> None:
        """Draw the state into the one HTML widget: a bar and its label, the time,
        tokens and cost, what is happening; at the end, how the run ended in words (in
        its tone's colour), then the stop's details if any.  Every element carries its
        own style, so the drawing is the same once static."""
        share = 100 * self.bar.value / max(1, self.bar.max)
        style = self.bar.bar_style
        colour = _BAR_COLOURS.get(style, _BAR_COLOURS[""])
        esc = html.escape
        shown = self.activity_label.value
        activity = f'<div style="margin:0">{esc(shown)}</div>' if shown else ""
        note = (f'<div class="rlm-answer-note" style="margin:0;font-weight:bold;'
                f'color:{_NOTE_COLOURS.get(style, "inherit")}">{esc(self.note)}</div>'
                if self.note else "")
        self.widget.value = (
            f'<div class="rlm-progress" data-rlm-end="{esc(style)}" '
            f'data-rlm-tone="{esc(self.tone)}" style="{ROOT_STYLE}">'
            '<div style="display:flex;align-items:center;gap:12px;margin:0">'
            '<div style="width:240px;height:10px;background:#e0e0e0;border-radius:2px;'
            'flex:none">'
            f'<div style="width:{share:.0f}%;height:100%;background:{colour};'
            'border-radius:2px"></div></div>'
            f"<span>{esc(self.step_label.value)}</span></div>"
            f'<div style="margin:0">{esc(self.elapsed_label.value)} &nbsp;·&nbsp; '
            f"{esc(self.tokens_label.value)} &nbsp;·&nbsp; {esc(self.cost_label.value)}</div>"
            f"{note}{activity}</div>")

    def _start_ticker(self) -> None:
        if self._tick is None or (self.ticking and not self._stop.is_set()):
            return
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run_ticker, args=(self._stop,),
                                        name="rlm-progress-ticker", daemon=True)
        host_thread(self._thread)
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
                               self.tokens_label.value, self.cost_label.value,
                               *([self.note] if self.note else []),
                               *([self.activity] if self.activity else [])])

    def static(self) -> dict[str, str]:
        """What the widget shows, as a display's ``text/html`` (the same bar and lines)
        and ``text/plain`` (``RLM run: 2 steps, final · 3.4 s · ...``)."""
        text = self.text()
        with self._lock:
            return {"text/html": static_html(self.widget.value),
                    "text/plain": f"RLM run: {text}"}


class RunView(RunObserver):
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
        self.handles: list[DisplayHandle] = []  # the displays show() made

    def show(self) -> None:
        """Display the two widgets, each under a display id of its own, so that
        :meth:`close` can replace them with their static rendering (outside IPython
        ``display`` only prints: nothing to replace).  The variables table shows the
        namespace's variables from the start (the run may take seconds to start)."""
        if self.namespace is not None:  # the variables as they are, before the run starts
            try:
                self.refresh()
            except KeyError as exc:
                self.variables.show_message(str(exc))
        handles = [display(x, display_id=True) for x in self.widgets]
        self.handles = [] if None in handles else handles

    def static(self) -> list[dict[str, str]]:
        """The progress and the variables table as ``text/html`` + ``text/plain``
        bundles (what a notebook keeps once the live widgets are gone)."""
        return [self.progress.static(), self.variables.static()]

    def on_event(self, event: Event) -> None:
        """Update from one engine event (the ``RLM`` observer; same as calling the
        view)."""
        self.notify(event)

    def notify(self, event: Event) -> None:
        """Forward to the progress view; refresh the variables at run start, after
        each top-level step and at the end (a candidates run leaves the chosen
        candidate's variables)."""
        self.progress.notify(event)
        if event.depth == 0:
            event.deliver(self)

    def on_run_started(self, event: RunStarted) -> None:
        """Show the variables (the namespace's, else the run's metadata)."""
        if self.namespace is None:
            self.variables.update(event.variables or [])
        else:
            self._refresh_shown()

    def on_step_finished(self, event: StepFinished) -> None:
        """Show the variables as the step left them."""
        self._refresh_shown()

    def on_run_finished(self, event: RunFinished) -> None:
        """Show the variables as the run left them."""
        self._refresh_shown()

    def _refresh_shown(self) -> None:
        """Re-read the namespace (if any); a missing named variable is said so."""
        if self.namespace is not None:
            try:
                self.refresh()
            except KeyError as exc:  # a named variable does not exist (yet)
                self.variables.show_message(str(exc))

    def refresh(self) -> None:
        """Re-read the namespace given at construction (no-op without one).

        Raises:
            KeyError: one of ``names`` is missing from the namespace.
        """
        if self.namespace is not None:
            self.variables.update(variables_from_namespace(self.namespace, self.names))

    def close(self) -> None:
        """The run has ended: stop the progress view's thread; when :meth:`show`
        displayed the widgets, replace each display with its static rendering (as the
        live view last looked: the final bar, the variables the run left) and close
        the widgets' comms, so that the saved notebook holds no widget.  When the run
        never started (no ``run_started``: it failed before, e.g. a missing API key),
        both displays are emptied instead: no stale "step 0 of 12" block stays.
        Idempotent."""
        self.progress.close()
        handles, self.handles = self.handles, []
        if not handles:
            return
        # A run that never started (a missing API key, an unknown model: the error
        # is printed) leaves nothing: an empty bundle renders as no output at all.
        bundles = self.static() if self.progress.started else [{} for _ in handles]
        for handle, bundle in zip(handles, bundles, strict=True):
            handle.update(bundle, raw=True)
        for widget in self.widgets:
            widget.close()

    def dispose(self) -> None:
        """Stop the thread and close both widgets' comms (the run's cell is re-run)."""
        self.progress.dispose()
        self.variables.widget.close()

    def text(self) -> str:
        """One line: the progress summary, then the variables summary."""
        return f"{self.progress.text()} | {self.variables.text()}"
