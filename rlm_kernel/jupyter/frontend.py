"""Where a run's steps are shown: a comm to the JupyterLab extension, or inline.

The message protocol is in ``docs/protocol.md``.  A frontend extension says it
is there by opening a comm to :data:`FRONTEND_TARGET` when it connects to the
kernel; a run then opens a comm to :data:`RUN_TARGET` and streams
``run_started``, ``step_added``, ``step_output``, ``step_finished`` and
``run_finished``.  Without an extension, each step is rendered in the task
cell's own output as one collapsible block (code, then output), updated in
place while the step runs, with a plain-text form for text-only frontends.
"""

from __future__ import annotations

import html
import threading
import time
from typing import Any

from ..engine.events import Event
from ..engine.recording import output_digest
from ..engine.step import step_source
from ..export import CellRLM
from .protocol import (
    FRONTEND_TARGET,
    RUN_TARGET,
    Announcement,
    CellMetadata,
    Continues,
    RunFinished,
    RunMessage,
    RunStarted,
    StepAdded,
    StepFinished,
    StepOutput,
    VariableInfo,
)
from .shell_executor import output_text

__all__ = ["RUN_TARGET", "FRONTEND_TARGET", "FrontendRegistry", "StepRenderer"]
_UPDATE_INTERVAL = 0.25  # seconds between inline refreshes of a running step


class FrontendRegistry:
    """Remembers whether a frontend extension announced itself on this kernel."""

    def __init__(self) -> None:
        self.frontends: dict[str, Announcement] = {}

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


class StepRenderer:
    """An engine observer that shows steps via the comm or inline.

    Args:
        run_id: the run's id; cell_id: the task cell's id (from the request).
        publish: ``callable(data: dict, metadata: dict, display_id: str, update: bool)``
            that shows a display in the task cell (the shell's real publisher).
        use_comm: send the comm protocol instead of rendering inline.
        executor: the ShellExecutor (for execution counts and captured outputs).
    """

    def __init__(self, run_id: str, cell_id: str | None, publish: Any, *, use_comm: bool,
                 executor: Any) -> None:
        self.run_id, self.cell_id = run_id, cell_id
        self.continues: dict[str, Any] | None = None  # {run_id, from_step} of a continued run
        self.publish = publish
        self.use_comm = use_comm
        self.executor = executor
        self.comm: Any = None
        self.step_outputs: list[list[dict[str, Any]]] = []
        self.execution_counts: list[int | None] = []
        self.current: dict[str, Any] | None = None
        self._last_refresh = 0.0
        self._lock = threading.Lock()
        self.messages: list[RunMessage] = []  # what was sent, for export and tests

    # -- engine events ----------------------------------------------------------------
    def __call__(self, event: Event) -> None:
        d = event.data
        if d.get("depth", 0) != 0:
            return
        handler = getattr(self, f"_on_{event.kind}", None)
        if handler is not None:
            handler(d)

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

    def _on_run_started(self, d: dict[str, Any]) -> None:
        if not self.use_comm:
            return
        from comm import create_comm

        msg = RunStarted(type="run_started", run_id=self.run_id, cell_id=self.cell_id,
                         question=d["question"], model=d["model"],
                         max_iterations=d["max_iterations"],
                         variables=[VariableInfo(name=v.name, type=v.type_name,
                                                 length=v.total_length, unit=v.length_unit)
                                    for v in d["variables"]])
        if self.continues is not None:
            msg["continues"] = Continues(run_id=self.continues["run_id"],
                                         from_step=self.continues["from_step"])
        self.messages.append(msg)
        self.comm = create_comm(target_name=RUN_TARGET, data=msg)

    def _on_step_started(self, d: dict[str, Any]) -> None:
        self.current = {"step": d["step"], "source": step_source(d["reasoning"], d["code"]),
                        "outputs": [], "started": time.monotonic()}
        if self.use_comm:
            rlm = CellRLM(run_id=self.run_id, step=d["step"], role="step",
                          task_cell=self.cell_id)
            self._send(StepAdded(type="step_added", run_id=self.run_id, cell_id=self.cell_id,
                                 step=d["step"], source=self.current["source"],
                                 metadata=CellMetadata(rlm=rlm)))
        else:
            self._render_inline(update=False)

    def _on_step_finished(self, d: dict[str, Any]) -> None:
        cur = self.current
        if cur is None or cur["step"] != d["step"]:  # a reply without code: no cell
            return
        count = getattr(self.executor, "last_execution_count", None)
        cur["count"], cur["seconds"] = count, d["outcome"].seconds
        self.step_outputs.append(_merge_streams(cur["outputs"]))
        self.execution_counts.append(count)
        if self.use_comm:
            rlm = CellRLM(run_id=self.run_id, step=d["step"], role="step",
                          task_cell=self.cell_id, exchanges=list(d.get("exchanges", [])),
                          output_sha256=output_digest(d["outcome"].output))
            self._send(StepFinished(type="step_finished", run_id=self.run_id,
                                    cell_id=self.cell_id, step=d["step"],
                                    execution_count=count,
                                    seconds=round(d["outcome"].seconds, 3),
                                    success=d["outcome"].success,
                                    metadata=CellMetadata(rlm=rlm),
                                    diverged=bool(d.get("diverged", False))))
        else:
            self._render_inline(update=True)
        self.current = None

    def _on_run_finished(self, d: dict[str, Any]) -> None:
        res = d["result"]
        if self.use_comm:
            self._send(RunFinished(type="run_finished", run_id=self.run_id,
                                   cell_id=self.cell_id, answer=res.answer,
                                   stopped_by=res.stopped_by, error=res.error,
                                   totals=d["totals"], seconds=round(res.seconds, 3)))
            if self.comm is not None:
                self.comm.close()

    # -- plumbing ---------------------------------------------------------------------
    def _send(self, msg: RunMessage) -> None:
        """Keep ``msg`` in :attr:`messages` and send it on the run's comm."""
        self.messages.append(msg)
        if self.comm is not None:
            self.comm.send(msg)

    def _render_inline(self, *, update: bool) -> None:
        cur = self.current
        if cur is None:
            return
        self._last_refresh = time.monotonic()
        with self._lock:
            outputs = _merge_streams(cur["outputs"])
        text = "".join(output_text(o) for o in outputs)
        count = cur.get("count")
        status = (f"[{count}] {cur['seconds']:.2f} s" if "seconds" in cur else "running…")
        head = f"Step {cur['step']} · {status}"
        body = (f"<details open><summary><b>{html.escape(head)}</b></summary>"
                f"<pre style='border-left:3px solid #7b61ff;padding-left:6px'>"
                f"{html.escape(cur['source'])}</pre>"
                + (f"<pre>{html.escape(text)}</pre>" if text else "") + "</details>")
        plain = f"── {head} ──\n{cur['source']}\n" + (f"{text}" if text else "")
        self.publish({"text/html": body, "text/plain": plain}, {},
                     f"rlm-{self.run_id}-{cur['step']}", update)


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
