"""The ``%rlm`` sub-commands over finished runs: ``export`` (notebook or rlm log),
``replay`` (the record answers instead of a model), ``continue`` (from a step, its code
edited or not) and ``%%rlm recorded`` (the sub-call record of an exported notebook).
A mixin of :class:`~rlm_kernel.jupyter.magic.RLMMagics`, which holds the runs."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from .protocol import RunMessage
from .session import bind_session_functions

if TYPE_CHECKING:
    from ..engine import RLMConfig, RLMResult

__all__ = ["RunCommands", "RunRecord"]


@dataclass
class RunRecord:
    """One finished run, kept for ``%rlm export``."""

    run_id: str
    result: RLMResult
    cell_id: str | None
    setup_cells: list[str]
    step_outputs: list[list[dict[str, Any]]] = field(default_factory=list)
    execution_counts: list[int | None] = field(default_factory=list)
    messages: list[RunMessage] = field(default_factory=list)


class RunCommands:
    """``%rlm export | replay | continue`` and ``%%rlm recorded`` (needs ``self.runs``,
    ``self.shell``, ``self.run_task``, ``self.run_config`` of the magics class)."""

    runs: dict[str, RunRecord]
    shell: Any
    # The magics class's methods (jupyter/magic.py, jupyter/settings.py).
    run_task: Callable[..., Any]
    run_config: Callable[..., RLMConfig]

    def _continue(self, opts: argparse.Namespace, cell: str | None) -> Any:
        """``%rlm continue --from STEP [--run ID]`` (the step's recorded code) or
        ``%%rlm continue --from STEP`` with the step's edited code as the cell body:
        the run goes on from that step; the earlier steps are not run again."""
        from ..engine import Continuation

        if not opts.from_step:
            raise UsageError("usage: %rlm continue --from STEP [--run ID]  (%%rlm continue "
                             "--from STEP: the cell body is the step's new code)")
        rec = self._run_record(opts.run, "continue")
        try:
            cont = Continuation(rec.result, opts.from_step,
                                code=None if cell is None else cell.strip("\n"))
        except ValueError as exc:
            raise UsageError(f"%rlm continue: {exc}") from None
        if opts.context is None:
            opts.context = [v.name for v in rec.result.variables
                            if v.name in self.shell.user_ns]
        return self.run_task(rec.result.question, opts, continuation=cont,
                             continues=rec.run_id)

    def _run_record(self, run_id: str | None, verb: str,
                    cell_id: str | None = None) -> RunRecord:
        """The run ``run_id`` of this session; without it, the last run started from
        the cell ``cell_id`` (:attr:`RunRecord.cell_id`), else the last run.

        Raises:
            UsageError: no run yet, or no such run."""
        if not self.runs:
            raise UsageError(f"%rlm {verb}: no run yet in this session")
        if not run_id and cell_id:
            of_cell = [r for r in self.runs.values() if r.cell_id == cell_id]
            run_id = of_cell[-1].run_id if of_cell else None
        rec = self.runs.get(run_id) if run_id else list(self.runs.values())[-1]
        if rec is None:
            raise UsageError(f"%rlm {verb}: no run {run_id!r}; runs: {', '.join(self.runs)}")
        return rec

    def _use_recorded(self, body: str) -> None:
        """``%%rlm recorded`` + a JSON list of exchanges (an exported notebook's first
        cell): ``llm_query`` & co. outside runs answer from them first."""
        import json

        try:
            exchanges = json.loads(body)
            assert isinstance(exchanges, list)
        except (ValueError, AssertionError):
            raise UsageError("%%rlm recorded: the cell must hold a JSON list of recorded "
                             "exchanges") from None
        config = self.run_config()
        bind_session_functions(self.shell, config.models()[1], exchanges,
                               router=config.router)

    def _replay(self, args: list[str], opts: argparse.Namespace) -> Any:
        """``%rlm replay [PATH.ipynb|PATH.json] [--run ID]``: run a recorded task again
        on the current variables, the record answering instead of any model."""
        from ..engine import load_recording

        if len(args) > 1:
            raise UsageError("usage: %rlm replay [PATH.ipynb | PATH.json] [--run ID]")
        source: Any = args[0] if args else self._run_record(opts.run, "replay").result
        try:
            recording = load_recording(source)
        except (OSError, ValueError) as exc:
            raise UsageError(f"%rlm replay: {exc}") from None
        if not getattr(opts, "returns", None) and recording.answer_type:
            opts.returns = recording.answer_type  # the record's answer type, asked again
        return self.run_task(recording.question, opts, replay=recording)

    def _export(self, args: list[str], run_id: str | None, fmt: str | None = None,
                cell_id: str | None = None, to_frontend: bool = False) -> None:
        """``%rlm export PATH.ipynb`` (a notebook that re-runs) or ``%rlm export
        PATH.jsonl --format rlm`` (alexzhang13/rlm's log, for its visualizer).

        The run: ``--run ID``; else the last run of the cell the request names
        (``cell_id``, JupyterLab's ``metadata.cellId``: the toolbar's export sends the
        selected task cell's); else the last run of the session.

        ``to_frontend`` (``--to-frontend``, the toolbar's export): nothing is written
        where the kernel runs; the notebook is sent as one ``display_data`` of MIME
        :data:`~rlm_kernel.jupyter.protocol.NOTEBOOK_MIME` (metadata ``{"path": PATH,
        "run_id": ...}``) and the frontend saves it next to the open notebook.  A
        kernel behind a gateway (on another machine, in the gateway's working folder)
        cannot write there.  Notebooks only: ``--format rlm`` is refused."""
        from ..export import export_rlm_log, export_run

        if len(args) != 1:
            raise UsageError("usage: %rlm export PATH.ipynb [--run ID] [--to-frontend]  |  "
                             "%rlm export PATH.jsonl --format rlm [--run ID]")
        rec = self._run_record(run_id, "export", cell_id)
        if to_frontend:
            if fmt == "rlm" or (fmt is None and args[0].endswith(".jsonl")):
                raise UsageError("%rlm export --to-frontend: notebooks only (PATH.ipynb)")
            self._send_export(rec, args[0])
            return
        try:
            if fmt == "rlm" or (fmt is None and args[0].endswith(".jsonl")):
                cfg = self.run_config()
                export_rlm_log(rec.result, args[0], max_iterations=cfg.max_iterations,
                               max_depth=cfg.max_depth)
            else:
                export_run(rec.result, args[0], run_id=rec.run_id,
                           setup_cells=rec.setup_cells, step_outputs=rec.step_outputs,
                           execution_counts=rec.execution_counts)
        except (OSError, ValueError) as exc:
            raise UsageError(f"%rlm export: {exc}") from None
        print(f"exported run {rec.run_id} to {args[0]}")

    def _send_export(self, rec: RunRecord, path: str) -> None:
        """The notebook of run ``rec`` as a ``display_data`` for the frontend to save
        as ``path`` (see :meth:`_export`)."""
        from IPython.display import publish_display_data

        from ..export import export_run
        from .protocol import NOTEBOOK_MIME

        try:
            nb = export_run(rec.result, None, run_id=rec.run_id,
                            setup_cells=rec.setup_cells, step_outputs=rec.step_outputs,
                            execution_counts=rec.execution_counts)
        except ValueError as exc:
            raise UsageError(f"%rlm export: {exc}") from None
        publish_display_data(
            {NOTEBOOK_MIME: dict(nb), "text/plain": f"run {rec.run_id} as {path}"},
            metadata={NOTEBOOK_MIME: {"path": path, "run_id": rec.run_id}})
