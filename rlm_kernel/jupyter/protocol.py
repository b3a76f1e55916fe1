"""The kernel ↔ frontend comm messages of ``docs/protocol.md``, as ``TypedDict``s.

Field names are exactly the document's; the TypeScript mirror
(``labextension/src/protocol.ts``) is written from the same document.  The frontend
(:mod:`rlm_kernel.jupyter.frontend`) builds every message through these types.

- :class:`Announcement`: the ``comm_open`` data of :data:`FRONTEND_TARGET`
  (``rlm_kernel.frontend``), sent by an extension.
- :class:`RunStarted` (the ``comm_open`` data of :data:`RUN_TARGET`,
  ``rlm_kernel.run``), :class:`StepAdded`, :class:`StepOutput`,
  :class:`StepFinished`, :class:`RunFinished` (and :class:`StepWriting` while the model
  writes a step's reply): a run's messages, :data:`RunMessage`
  their union, :data:`MESSAGE_TYPES` the ``type`` field's value -> its class.
- :class:`~rlm_kernel.export.CellRLM`: a step cell's ``metadata.rlm``
  (:class:`CellMetadata` holds it under ``rlm``).
- :data:`NOTEBOOK_MIME`: the MIME type of an exported run sent to the frontend
  (``%rlm export PATH --to-frontend``), which saves it.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

from ..engine.frontends import Totals
from ..export import CellRLM

__all__ = ["FRONTEND_TARGET", "RUN_TARGET", "Announcement", "CellMetadata", "CellRLM", "Continues",
           "MESSAGE_TYPES", "NOTEBOOK_MIME", "RunFinished", "RunMessage", "RunStarted", "StepAdded",
           "StepFinished", "StepOutput", "StepWriting", "Totals", "VariableInfo"]

RUN_TARGET = "rlm_kernel.run"
"""The comm target a run opens (its ``comm_open`` data is :class:`RunStarted`)."""
FRONTEND_TARGET = "rlm_kernel.frontend"
"""The comm target an extension opens to announce itself (data: :class:`Announcement`)."""
NOTEBOOK_MIME = "application/x-ipynb+json"
"""A ``display_data`` of this MIME type holds an exported run's notebook (nbformat v4
JSON) for the frontend to save; its metadata under the same key: ``{path, run_id}``."""


class Announcement(TypedDict, total=False):
    """An extension's ``comm_open`` data; free-form, the kernel keeps it."""

    version: int


class VariableInfo(TypedDict):
    """One variable's metadata as the model is shown it."""

    name: str
    type: str  # the value's type name
    length: int  # in ``unit``
    unit: str  # "characters", "items", "bytes" or "rows"


class CellMetadata(TypedDict):
    """A step cell's metadata: ``{"rlm": {...}}``."""

    rlm: CellRLM


class _Message(TypedDict):
    run_id: str  # 8 hex digits, unique per run
    cell_id: str | None  # the task cell's id (execute request's metadata.cellId)


class Continues(TypedDict):
    """A continued run's origin: the run and the first step run again."""

    run_id: str
    from_step: int


class _RunStartedKeys(_Message):
    type: Literal["run_started"]
    question: str
    model: str  # litellm model string
    max_iterations: int
    variables: list[VariableInfo]


class RunStarted(_RunStartedKeys, total=False):
    """``run_started``: the ``comm_open`` data of a run; ``continues`` when the run
    goes on from a step of an earlier run (``%rlm continue``); ``prose``: the task cell
    is prose (a task written as plain text in the RLM kernel), not code;
    ``model_label``: the model as a user reads it (the embedded model named as local:
    ``local model qwen2.5-coder-1.5b (embedded, no network)``), to show instead of
    ``model``."""

    continues: Continues
    prose: bool
    model_label: str


class _StepAddedKeys(_Message):
    type: Literal["step_added"]
    step: int  # from 1
    source: str  # reasoning as "#" comment lines, then the code
    metadata: CellMetadata


class StepAdded(_StepAddedKeys, total=False):
    """``step_added``: insert a code cell with ``source`` below the previous step;
    ``answer_now`` (only when true, also in ``metadata.rlm``): the cell holds the
    "answer now" call after the run stopped early, to be labelled as that, not as a
    further step."""

    answer_now: bool


class _StepWritingKeys(_Message):
    type: Literal["step_writing"]
    step: int  # from 1
    source: str  # the reply so far, in a step cell's form (reasoning as "#" lines, code)
    state: Literal["writing", "cut", "dropped"]
    tokens: int  # the stream's pieces so far (one token each for llama.cpp and OpenAI)
    tokens_per_second: float


class StepWriting(_StepWritingKeys, total=False):
    """``step_writing``: the root model is writing ``step``'s reply.  ``state``
    ``writing``: insert the step's cell (the first time) or set its ``source``, marked
    as being written (``metadata.rlm.writing``); the ``step_added`` of that step then
    makes it the step's cell.  ``cut``: the run stopped while the model wrote: the cell
    stays, marked as cut (``metadata.rlm.cut``).  ``dropped``: the reply had no code (no
    step cell): remove it.  ``answer_now``: as for ``step_added``."""

    answer_now: bool


class StepOutput(_Message):
    """``step_output``: one nbformat v4 output dict of the running step."""

    type: Literal["step_output"]
    step: int
    output: dict[str, Any]


class StepFinished(_Message):
    """``step_finished``: the step's execution count, seconds and success; the cell's
    whole ``metadata`` now (with the replay record: ``exchanges``, ``output_sha256``)
    and ``diverged`` (a replay's step whose output differs from the record)."""

    type: Literal["step_finished"]
    step: int
    execution_count: int | None
    seconds: float
    success: bool  # false if the code raised or timed out
    metadata: CellMetadata
    diverged: bool


class _RunFinishedKeys(_Message):
    type: Literal["run_finished"]
    answer: str | None
    stopped_by: str  # final, max_iterations, budget, interrupt, stuck, error
    error: str | None
    totals: Totals
    seconds: float


class RunFinished(_RunFinishedKeys, total=False):
    """``run_finished``: the answer, why the run stopped, totals; the comm closes.

    ``answer_source``: how the answer was reached (a key of
    ``rlm_kernel.engine.answer.sources.ANSWER_SOURCE_KINDS``; None without an answer),
    ``votes``: ``[k, n]`` after a vote, ``answer_note``: ``ending_words`` for an answer
    whose tone is not ``ok`` (None otherwise, and without an answer).  How the run ended, from the engine's one
    table (``run_ending``), for the extension to show as it is, with no mapping of its
    own: ``tone`` (``ok`` green, ``caution`` amber, ``error`` red), ``ending`` (the
    ``answer_source`` kind, ``unknown``, or ``no_answer``) and ``ending_words`` (one
    sentence: ``The answer was computed by the model's code from your data.``, ``No
    answer: you interrupted the run.``).  After a candidates run, ``chosen`` (the
    candidate whose steps are the run's: the others' cells are removed) and
    ``candidates`` (the summaries of ``RLMResult.candidates``).  A working-folder run
    ended by ``finish()``: ``diff``, the folder's change as a unified diff (the answer
    holds it after the message), for the answer cell to show as a diff."""

    answer_source: str | None
    votes: list[int] | None
    answer_note: str | None
    tone: Literal["ok", "caution", "error"]
    ending: str
    ending_words: str
    chosen: int | None
    candidates: list[dict[str, Any]]
    diff: str


RunMessage = RunStarted | StepWriting | StepAdded | StepOutput | StepFinished | RunFinished

#: The ``type`` field's value -> the message's TypedDict.
MESSAGE_TYPES: dict[str, type] = {
    "run_started": RunStarted, "step_writing": StepWriting, "step_added": StepAdded,
    "step_output": StepOutput,
    "step_finished": StepFinished, "run_finished": RunFinished,
}
