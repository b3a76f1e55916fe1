"""Where a run's steps are shown: a comm to the JupyterLab extension, or inline.

The message protocol is in ``docs/protocol.md``.  A frontend extension says it
is there by opening a comm to :data:`FRONTEND_TARGET` when it connects to the
kernel; a run then opens a comm to :data:`RUN_TARGET` and streams
``run_started``, ``step_writing`` (the model's reply as it is written, into the cell
that becomes the step's), ``step_added``, ``step_output``, ``step_finished`` and
``run_finished``.  Without an extension, each step is rendered in the task
cell's own output as one collapsible block (code, then output), updated in
place while the step runs, with a plain-text form for text-only frontends.

A candidates run (``RLMConfig.candidates`` > 1) shows every candidate's steps live as
they come: with the extension, each step cell carries ``candidate`` in its
``metadata.rlm`` (its label names it); inline, each block's title names its candidate.
At the end the chosen candidate's steps are the run's steps, and the others are folded
into one rendered summary output in the task cell (:func:`candidates_summary`: each
candidate's answer, votes, steps and seconds, each expandable to its steps):
``run_finished`` tells the extension which candidate was chosen (it removes the other
candidates' cells), and inline the other candidates' blocks are emptied.  Either way
the run's record (:attr:`StepRenderer.step_outputs`, for ``%rlm export``) keeps the
chosen candidate's steps only.

``run_finished`` also says how the run ended, from the engine's one table
(:mod:`.outcome`): ``answer_source``, ``votes``, ``tone`` (``ok``, ``caution``,
``error``), ``ending`` (the kind) and its sentence ``ending_words`` (``answer_note``:
the same sentence when the tone is not ``ok``), and ``run_started`` whether the task
cell is prose (``prose``: the extension then shows it as plain text, not Python).
"""

from __future__ import annotations

import html
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from ..engine import Event, RunObserver
from ..engine.frontends import (
    CandidateStarted,
    ModelWriting,
    RunFinished,
    RunStarted,
    StepFinished,
    StepNotice,
    StepStarted,
    Totals,
    child_runs,
    output_digest,
    short_answer,
    step_source,
    writing_source,
)
from ..executors import Executor
from ..export import CellRLM
from ..models import model_label
from ..redaction import redact_data
from .outcome import ending_of
from .protocol import (
    FRONTEND_TARGET,
    RUN_TARGET,
    CellMetadata,
    Continues,
    RunMessage,
    StepAdded,
    StepOutput,
    StepWriting,
    VariableInfo,
)
from .protocol import RunFinished as RunFinishedMessage
from .protocol import RunStarted as RunStartedMessage
from .protocol import StepFinished as StepFinishedMessage
from .shell_executor import RichOutputCallback, output_text, record_cut_streams
from .variables_view import ROOT_STYLE

if TYPE_CHECKING:
    from ..engine import RLMResult

__all__ = ["RUN_TARGET", "FRONTEND_TARGET", "FrontendRegistry", "NotebookExecutor",
           "StepRenderer", "candidates_summary"]
Publish = Callable[[dict[str, Any], dict[str, Any], str, bool], None]
"""``publish(data, metadata, display_id, update)``: shows a display in the task cell."""
_UPDATE_INTERVAL = 0.25  # seconds between inline refreshes of a running step
ANSWER_NOW_TITLE = "Answer now (the run had stopped; its last call for an answer)"
"""The title of the "answer now" call's block or cell: not a further step."""


class NotebookExecutor(Executor, Protocol):
    """An executor whose steps a notebook shows (the shell's
    :class:`~rlm_kernel.jupyter.shell_executor.ShellExecutor`, the isolated
    :class:`~rlm_kernel.jupyter.isolated_steps.IsolatedSteps`): an
    :class:`~rlm_kernel.executors.Executor` that hands each rich output of a step
    (an nbformat output dict) to :attr:`on_rich_output` when set."""

    on_rich_output: RichOutputCallback | None


class FrontendRegistry:
    """Remembers whether a frontend extension announced itself on this kernel."""

    def __init__(self) -> None:
        # comm id -> what the extension announced (a protocol.Announcement, unchecked)
        self.frontends: dict[str, dict[str, Any]] = {}

    def register(self, kernel: Any) -> None:
        """Accept ``comm_open`` on :data:`FRONTEND_TARGET` from extensions."""
        manager = getattr(kernel, "comm_manager", None)
        if manager is None:
            return

        def opened(comm: Any, msg: dict[str, Any]) -> None:
            data = msg.get("content", {}).get("data", {}) or {}
            self.frontends[comm.comm_id] = data

            @comm.on_close
            def _closed(_msg: dict[str, Any]) -> None:
                self.frontends.pop(comm.comm_id, None)

        manager.register_target(FRONTEND_TARGET, opened)

    @property
    def present(self) -> bool:
        """True if at least one extension is connected."""
        return bool(self.frontends)


class StepRenderer(RunObserver):
    """An engine observer that shows the top run's steps via the comm or inline.

    Args:
        run_id: the run's id; cell_id: the task cell's id (from the request).
        publish: ``callable(data: dict, metadata: dict, display_id: str, update: bool)``
            that shows a display in the task cell (the shell's real publisher).
        use_comm: send the comm protocol instead of rendering inline.
        executor: the run's :class:`NotebookExecutor` (for execution counts and
            captured outputs).

    What it shows leaves the kernel (the notebook's cells, live with the extension or
    inline without it): every display and comm message has the secrets the process
    knows redacted (:func:`rlm_kernel.redaction.redact_data`) as it is sent.
    """

    def __init__(self, run_id: str, cell_id: str | None, publish: Publish, *, use_comm: bool,
                 executor: NotebookExecutor) -> None:
        self.run_id, self.cell_id = run_id, cell_id
        self.continues: dict[str, Any] | None = None  # {run_id, from_step} of a continued run
        self.publish = _redacted_publisher(publish)
        self.use_comm = use_comm
        self.executor = executor
        self.comm: Any = None
        self.step_outputs: list[list[dict[str, Any]]] = []
        self.execution_counts: list[int | None] = []
        self.current: dict[str, Any] | None = None
        self._last_refresh = 0.0
        self._lock = threading.Lock()
        self.messages: list[RunMessage] = []  # what was sent, for export and tests
        self.candidate: int | None = None  # in a candidates run: the one running now
        self.candidates = 0  # in a candidates run: how many were asked for
        self.step_candidates: list[int | None] = []  # per item of step_outputs
        self.no_data: bool | None = None  # the run had no data at all (run_started says)
        self._blocks: list[dict[str, Any]] = []  # a candidates run: each finished step
        self.children_seen = 0  # sub-agents of the top run folded into step outputs
        self.writing: dict[str, Any] | None = None  # the step whose reply is being written

    # -- engine events ----------------------------------------------------------------
    def notify(self, event: Event) -> None:
        """Show the top run's events (a child run's steps are not cells: a child of the
        top run, when it ends, is folded into the output of the step that started it,
        :meth:`on_child_finished`)."""
        if event.depth == 0:
            event.deliver(self)
        elif event.depth == 1 and isinstance(event, RunFinished):
            self.on_child_finished(event)

    def on_child_finished(self, event: RunFinished) -> None:
        """A sub-agent (an ``rlm_query`` child of the top run) ended: its run, folded
        (an HTML ``<details>`` block in Markdown: question, answer, each step's code and
        output, its own sub-agents), becomes an output of the running step's cell."""
        from ..export import child_markdown

        if self.current is None:
            return
        self.children_seen += 1
        kept = child_runs(str(self.children_seen), self.current["step"], event.result)
        summary = (f"Sub-agent {kept[0].id}: {kept[0].answer}" if kept[0].answer is not None
                   else f"Sub-agent {kept[0].id}: no answer ({kept[0].stopped_by})")
        self.on_rich_output({"output_type": "display_data", "metadata": {},
                             "data": {"text/markdown": child_markdown(kept[0], kept),
                                      "text/plain": summary}})

    def on_rich_output(self, output: dict[str, Any]) -> None:
        """Called by the executor with each nbformat output of the running step."""
        if self.current is None:
            return
        output = {k: v for k, v in output.items() if k != "transient"}
        with self._lock:
            self.current["outputs"].append(output)
        if self.use_comm:
            self._send(StepOutput(type="step_output", run_id=self.run_id, cell_id=self.cell_id,
                                  step=self.current["step"], output=output))
        elif time.monotonic() - self._last_refresh >= _UPDATE_INTERVAL:
            self._render_inline(update=True)

    def on_run_started(self, event: RunStarted) -> None:
        """Open the run's comm with ``run_started`` (with the extension); list the MCP
        tools the model may call in the task cell."""
        self.no_data = bool(getattr(event, "no_data", False))
        if event.depth == 0 and (event.mcp_tools or event.mcp_problems):
            self._show_tools(event.mcp_tools, event.mcp_problems)
        if not self.use_comm:
            return
        from comm import create_comm

        msg = RunStartedMessage(type="run_started", run_id=self.run_id, cell_id=self.cell_id,
                                question=event.question, model=event.model,
                                max_iterations=event.max_iterations,
                                variables=[VariableInfo(name=v.name, type=v.type_name,
                                                        length=v.total_length,
                                                        unit=v.length_unit)
                                           for v in event.variables],
                                prose=_task_is_prose(), model_label=model_label(event.model))
        if self.continues is not None:
            msg["continues"] = Continues(run_id=self.continues["run_id"],
                                         from_step=self.continues["from_step"])
        msg = redact_data(msg)
        self.messages.append(msg)
        self.comm = create_comm(target_name=RUN_TARGET, data=msg)

    def _show_tools(self, tools: list[str], problems: list[str]) -> None:
        """One display in the task cell: the MCP tools the model may call (as its task
        message lists them) and the servers that did not start."""
        head = f"MCP tools the model can call ({len(tools)})"
        items = "".join(f"<li><code>{html.escape(t.lstrip('- '))}</code></li>" for t in tools)
        gone = "".join(f"<li>{html.escape(p)}</li>" for p in problems)
        body = (f"<details open class='rlm-mcp-tools'><summary><b>{html.escape(head)}</b>"
                "</summary>" + (f"<ul>{items}</ul>" if items else "")
                + (f"<p>Not available:</p><ul>{gone}</ul>" if gone else "") + "</details>")
        plain = "\n".join([head + ":", *tools]
                          + (["not available:", *problems] if problems else []))
        self.publish({"text/html": body, "text/plain": plain}, {},
                     f"rlm-{self.run_id}-mcp-tools", False)

    def on_candidate_started(self, event: CandidateStarted) -> None:
        """Note which candidate runs now (its steps' cells name it)."""
        self.candidate, self.candidates = event.candidate, event.candidates or 0

    def on_model_writing(self, event: ModelWriting) -> None:
        """The model writes a step's reply: its cell, marked as being written, takes the
        reply so far (``step_writing``), or inline its block (refreshed at most each
        0.25 s)."""
        block = {"step": event.step, "source": writing_source(event.reply), "outputs": [],
                 "candidate": event.candidate, "tokens": event.pieces,
                 "tokens_per_second": event.tokens_per_second,
                 "answer_now": False, "shown": False}
        first = self.writing is None or self.writing["step"] != event.step
        if not first and self.writing is not None:
            if self.writing["source"] == block["source"]:  # the end, nothing new: no message
                return
            block["shown"] = self.writing["shown"]
        self.writing = block
        if self.use_comm:
            self._send_writing("writing")
        elif first or event.done or time.monotonic() - self._last_refresh >= _UPDATE_INTERVAL:
            self._render_inline(update=bool(block["shown"]), block=block)
            block["shown"] = True

    def _send_writing(self, state: str) -> None:
        """``step_writing`` of the reply being written, in ``state``."""
        w = self.writing
        if w is None:
            return
        self._send(StepWriting(type="step_writing", run_id=self.run_id, cell_id=self.cell_id,
                               step=w["step"], source=w["source"],
                               state=state,  # type: ignore[typeddict-item]
                               tokens=w["tokens"], tokens_per_second=w["tokens_per_second"]))

    def _end_writing(self, state: str) -> None:
        """The reply being written will not become a step's cell: it was ``cut`` by a
        stop (its cell stays, marked so) or held no code (``dropped``: its cell goes)."""
        w, self.writing = self.writing, None
        if w is None:
            return
        if self.use_comm:
            self.writing = w
            self._send_writing(state)
            self.writing = None
        elif w["shown"]:
            if state == "dropped":
                self.publish({}, {}, self._display_id(w), True)
            else:
                w["status"] = "cut by a stop while the model wrote it"
                self._render_inline(update=True, block=w)

    def on_step_started(self, event: StepStarted) -> None:
        """Add the step's cell (``step_added``; the cell of its reply as it was written
        becomes it), or its inline block (in place of the written reply's)."""
        shown = self.writing is not None and self.writing["step"] == event.step \
            and bool(self.writing["shown"])
        self.writing = None
        self.current = {"step": event.step, "source": step_source(event.reasoning, event.code),
                        "outputs": [], "started": time.monotonic(),
                        "candidate": event.candidate,
                        "answer_now": bool(getattr(event, "answer_now", False))}
        if self.use_comm:
            rlm = self._cell_rlm(event.step)
            msg = StepAdded(type="step_added", run_id=self.run_id, cell_id=self.cell_id,
                            step=event.step, source=self.current["source"],
                            metadata=CellMetadata(rlm=rlm))
            if self.current["answer_now"]:
                msg["answer_now"] = True
            self._send(msg)
        else:
            self._render_inline(update=shown)

    def _cell_rlm(self, step: int, *, exchanges: list[dict[str, Any]] | None = None,
                  output_sha256: str | None = None) -> CellRLM:
        """A step cell's ``metadata.rlm`` (with ``candidate`` in a candidates run)."""
        rlm = CellRLM(run_id=self.run_id, step=step, role="step", task_cell=self.cell_id)
        if exchanges is not None:
            rlm["exchanges"] = exchanges
        if output_sha256 is not None:
            rlm["output_sha256"] = output_sha256
        if self.current is not None and self.current.get("candidate") is not None:
            rlm["candidate"] = self.current["candidate"]
        if self.current is not None and self.current.get("answer_now"):
            rlm["answer_now"] = True
        return rlm

    def on_step_notice(self, event: StepNotice) -> None:
        """The host's note on the running step (a protected input put back, an answer
        of the wrong type refused): shown in the step's cell as its model saw it, on
        stderr, and kept in the step's outputs."""
        if self.current is not None and self.current["step"] == event.step:
            self.on_rich_output({"output_type": "stream", "name": "stderr",
                                 "text": event.text + "\n"})

    def on_step_finished(self, event: StepFinished) -> None:
        """Finish the step's cell (``step_finished``: count, seconds) or inline block."""
        cur, outcome = self.current, event.outcome
        if cur is None or cur["step"] != event.step:  # a reply without code: no cell
            if self.writing is not None and self.writing["step"] == event.step:
                self._end_writing("dropped")
            return
        count = getattr(self.executor, "last_execution_count", None)
        cur["count"], cur["seconds"] = count, outcome.seconds
        cut = getattr(self.executor, "last_cut_streams", None) or {}  # a flood's kept end
        self.step_outputs.append(_merge_streams(record_cut_streams(cur["outputs"], cut)))
        self.execution_counts.append(count)
        self.step_candidates.append(cur.get("candidate"))
        if self.use_comm:
            rlm = self._cell_rlm(event.step, exchanges=list(event.exchanges),
                                 output_sha256=output_digest(outcome.output))
            self._send(StepFinishedMessage(type="step_finished", run_id=self.run_id,
                                           cell_id=self.cell_id, step=event.step,
                                           execution_count=count,
                                           seconds=round(outcome.seconds, 3),
                                           success=outcome.success,
                                           metadata=CellMetadata(rlm=rlm),
                                           diverged=event.diverged))
        else:
            self._render_inline(update=True)
        if cur.get("candidate") is not None:
            self._blocks.append(cur)
        self.current = None

    def on_run_finished(self, event: RunFinished) -> None:
        """Keep the chosen candidate's steps; send ``run_finished`` and close the comm
        (a reply still being written was cut by the stop: its cell stays, marked so)."""
        self._end_writing("cut")
        res = event.result
        candidates = list(getattr(res, "candidates", None) or [])
        chosen = next((c["index"] for c in candidates if c.get("chosen")), None)
        if candidates:
            self._candidates_finished(candidates, chosen)
        if self.use_comm:
            source, votes = getattr(res, "answer_source", None), getattr(res, "votes", None)
            end = ending_of(res, self.no_data)
            msg = RunFinishedMessage(type="run_finished", run_id=self.run_id,
                                     cell_id=self.cell_id, answer=res.answer,
                                     stopped_by=res.stopped_by, error=res.error,
                                     totals=event.totals or _result_totals(res),
                                     seconds=round(res.seconds, 3),
                                     answer_source=source,
                                     votes=list(votes) if votes else None,
                                     answer_note=(end.words if res.answer is not None
                                                  and end.tone != "ok" else None),
                                     tone=end.tone,  # type: ignore[typeddict-item]
                                     ending=end.kind, ending_words=end.words)
            if candidates:
                msg["chosen"] = chosen
                msg["candidates"] = [dict(c) for c in candidates]
            diff = getattr(res, "diff", None)
            if diff is not None:
                msg["diff"] = diff
            self._send(msg)
            if self.comm is not None:
                self.comm.close()

    def _candidates_finished(self, candidates: list[dict[str, Any]],
                             chosen: int | None) -> None:
        """The end of a candidates run: keep the chosen candidate's steps as the run's
        record, take the other candidates' inline blocks away (the extension removes
        their cells on ``run_finished``) and show one summary output in the task cell,
        each candidate expandable to its steps."""
        keep = [i for i, c in enumerate(self.step_candidates) if c == chosen]
        self.step_outputs = [self.step_outputs[i] for i in keep]
        self.execution_counts = [self.execution_counts[i] for i in keep]
        self.step_candidates = [self.step_candidates[i] for i in keep]
        if not self.use_comm:
            for block in self._blocks:
                if block["candidate"] != chosen:
                    self.publish({}, {}, self._display_id(block), True)
        steps = {c["index"]: [b for b in self._blocks if b["candidate"] == c["index"]]
                 for c in candidates}
        where = "the step cells below" if self.use_comm else "the steps above"
        self.publish(candidates_summary(candidates, steps, asked=self.candidates,
                                        chosen_where=where),
                     {}, f"rlm-{self.run_id}-candidates", False)

    # -- plumbing ---------------------------------------------------------------------
    def _send(self, msg: RunMessage) -> None:
        """Keep ``msg`` (redacted) in :attr:`messages` and send it on the run's comm."""
        msg = redact_data(msg)
        self.messages.append(msg)
        if self.comm is not None:
            self.comm.send(msg)

    def _display_id(self, block: dict[str, Any]) -> str:
        """The display id of a step's inline block (with its candidate in a candidates
        run: step numbers restart with each candidate)."""
        if block.get("candidate") is not None:
            return f"rlm-{self.run_id}-{block['candidate']}-{block['step']}"
        return f"rlm-{self.run_id}-{block['step']}"

    def _render_inline(self, *, update: bool, block: dict[str, Any] | None = None) -> None:
        """Show (or update) the running step's block, or ``block`` (a reply being
        written: its status says so, with the model's tokens a second)."""
        cur = block or self.current
        if cur is None:
            return
        self._last_refresh = time.monotonic()
        with self._lock:
            outputs = _merge_streams(cur["outputs"])
        text = "".join(output_text(o) for o in outputs)
        count = cur.get("count")
        if "tokens" in cur:
            rate = cur["tokens_per_second"]
            status = cur.get("status") or (
                f"the model writes… {cur['tokens']} tokens" + (f", {rate:.1f}/s" if rate else ""))
        else:
            status = (f"[{count}] {cur['seconds']:.2f} s" if "seconds" in cur else "running…")
        name = ANSWER_NOW_TITLE if cur.get("answer_now") else f"Step {cur['step']}"
        head = f"{name} · {status}"
        display_id = self._display_id(cur)
        if cur.get("candidate") is not None:
            head = f"{name} · candidate {cur['candidate']}/{self.candidates} · {status}"
        body = (f"<details open><summary><b>{html.escape(head)}</b></summary>"
                f"<pre style='border-left:3px solid #7b61ff;padding-left:6px'>"
                f"{html.escape(cur['source'])}</pre>"
                + (f"<pre>{html.escape(text)}</pre>" if text else "") + "</details>")
        plain = f"── {head} ──\n{cur['source']}\n" + (f"{text}" if text else "")
        self.publish({"text/html": body, "text/plain": plain}, {}, display_id, update)


def _redacted_publisher(publish: Publish) -> Publish:
    """``publish`` with its display data and metadata redacted first."""
    def send(data: dict[str, Any], metadata: dict[str, Any], display_id: str,
             update: bool) -> None:
        publish(redact_data(data), redact_data(metadata), display_id, update)

    return send


def candidates_summary(candidates: list[dict[str, Any]],
                       steps: dict[int, list[dict[str, Any]]], *, asked: int = 0,
                       chosen_where: str = "the run's steps") -> dict[str, str]:
    """One display bundle (``text/html`` and ``text/plain``) that sums up a candidates
    run: a line for the vote, then one expandable ``<details>`` per candidate (its
    answer, votes, steps, seconds and stop reason; open it for its steps' code and
    output; the chosen one points to ``chosen_where``).

    Args:
        candidates: ``RLMResult.candidates`` (``index``, ``answer``, ``votes``,
            ``steps``, ``seconds``, ``stopped_by``, ``chosen``).
        steps: candidate index -> its finished steps (``step``, ``source``,
            ``outputs``: nbformat output dicts, ``count``, ``seconds``).
        asked: how many candidates the run was asked for (0: as many as ran).
        chosen_where: where the chosen candidate's steps are shown.
    """
    esc = html.escape
    chosen = next((c for c in candidates if c.get("chosen")), None)
    ran = f"{len(candidates)} of {asked}" if asked and asked != len(candidates) \
        else str(len(candidates))
    if chosen is not None:
        votes = int(chosen.get("votes") or 0)
        head = (f"Candidates: {ran} ran · candidate {chosen['index']} chosen "
                f"({votes} of {len(candidates)} agreed on its answer)")
    else:
        head = f"Candidates: {ran} ran · none chosen"
    parts = [f'<div style="font-weight:bold;margin:0">{esc(head)}</div>']
    plain = [head]
    for c in candidates:
        line = _candidate_line(c)
        plain.append(f"  {line}")
        if c.get("chosen"):
            body = f"<div style='margin:2px 0 4px 16px'>Its steps are {esc(chosen_where)}.</div>"
        else:
            body = "".join(_step_html(b) for b in steps.get(c["index"], [])) or \
                "<div style='margin:2px 0 4px 16px'><i>No step ran code.</i></div>"
        style = "margin:2px 0;padding:0" + (";font-weight:bold" if c.get("chosen") else "")
        parts.append(f'<details class="rlm-candidate" data-candidate="{int(c["index"])}" '
                     f'style="margin:0"><summary style="{style};cursor:pointer">'
                     f"{esc(line)}</summary>{body}</details>")
    return {"text/html": f'<div class="rlm-candidates" style="{ROOT_STYLE}">'
                         + "".join(parts) + "</div>",
            "text/plain": "\n".join(plain)}


def _candidate_line(c: dict[str, Any]) -> str:
    """``Candidate 2 · '42' · 2 votes · 2 steps · 3.1 s · final · chosen``."""
    votes, steps = int(c.get("votes") or 0), int(c.get("steps") or 0)
    seconds = float(c.get("seconds") or 0.0)
    return " · ".join([f"Candidate {c['index']}", short_answer(c.get("answer")),
                       f"{votes} vote{'s' * (votes != 1)}", f"{steps} step{'s' * (steps != 1)}",
                       f"{seconds:.1f} s", str(c.get("stopped_by"))]
                      + (["chosen"] if c.get("chosen") else []))


def _step_html(block: dict[str, Any]) -> str:
    """One step of a candidate not chosen, for its summary: title, code, output."""
    esc = html.escape
    text = "".join(output_text(o) for o in _merge_streams(block["outputs"]))
    count = block.get("count")
    head = f"Step {block['step']}" + (f" · [{count}]" if count is not None else "") + \
        (f" · {block['seconds']:.2f} s" if "seconds" in block else "")
    pre = ("margin:2px 0 4px 0;padding:2px 6px;white-space:pre-wrap;"
           "font-family:var(--jp-code-font-family,monospace);font-size:12px;"
           "line-height:1.4;background:none")
    return (f'<div style="margin:4px 0 0 16px"><div style="margin:0">{esc(head)}</div>'
            f'<pre style="{pre};border-left:3px solid #7e57c2">{esc(block["source"])}</pre>'
            + (f'<pre style="{pre};border-left:3px solid #bdbdbd">{esc(text)}</pre>'
               if text else "") + "</div>")


def _result_totals(result: RLMResult) -> Totals:
    """A result's own usage sums (for a ``run_finished`` made without ``totals``)."""
    return Totals(llm_calls=result.llm_calls, prompt_tokens=result.prompt_tokens,
                  completion_tokens=result.completion_tokens, cost_usd=result.cost_usd)


def _task_is_prose() -> bool:
    """Whether the cell being run is a prose task (the RLM kernel runs a cell of
    plain text as a task): its execute request's code is prose, not a ``%rlm`` line
    or cell (:func:`rlm_kernel.jupyter.prose.is_prose`)."""
    from IPython import get_ipython

    from .prose import is_prose

    kernel = getattr(get_ipython(), "kernel", None)
    if kernel is None or not getattr(kernel, "prose_tasks", False):
        return False
    try:
        code = (kernel.get_parent() or {}).get("content", {}).get("code", "")
    except Exception:  # noqa: BLE001 - no request context
        return False
    text = code.strip() if isinstance(code, str) else ""
    return bool(text) and not text.startswith("%") and is_prose(text)


def _merge_streams(outputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Join consecutive stream outputs of the same name, as notebooks store them."""
    merged: list[dict[str, Any]] = []
    for out in outputs:
        if (out.get("output_type") == "stream" and merged
                and merged[-1].get("output_type") == "stream"
                and merged[-1]["name"] == out["name"]):
            merged[-1] = {**merged[-1], "text": merged[-1]["text"] + out["text"]}
        elif out.get("output_type") != "clear_output":
            merged.append(dict(out))
    return merged
