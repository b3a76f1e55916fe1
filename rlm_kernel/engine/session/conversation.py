"""Follow-up tasks: the session's earlier tasks, told to the model of the next one.

A notebook is worked in small steps (ask, look, ask again).  A :class:`Conversation`
keeps one :class:`TaskRecord` per task: the question, the answer, the code of the steps
that got there and the variables those steps left (with their
:class:`~rlm_kernel.repl_types.REPLVariable` metadata), so "those", "the longest one" and
"now do the same for X" can be resolved.  ``RLM.run(..., history=conversation)`` puts
:meth:`Conversation.prompt_section` into the task message, after the question (which
is also restated at its end: the current question is what the model reads first and
last), and binds the whole record, as data, to the REPL variable :data:`HISTORY_NAME`.

A follow-up points back with "that file", "it", "those": the section opens with the
previous task's question and answer (:meth:`Conversation.follow_up`), right under the
new question, and says that those words mean that answer.  Told only in the list of
earlier tasks, after a paragraph of instructions, a small model lost the referent: asked
"How many functions are defined at the top level of that file?" after "Which file
defines ...?" (``encoder.py``), it counted over every file of ``context``
(``bench/bench_followups.py`` measures right answers on such pairs).  The previous
task is not told a second time in the list: it is named there by its number only.

Earlier tasks are told as what they found: the question, the answer and the variables
their code left, marked as made by that code (never as the user's data).  Their code is
told only with ``code=True`` (``RLMConfig.history_code``): a small model shown an earlier
task's steps tends to run them again instead of answering the new question
(``bench/bench_followups.py`` counts those copies); the code stays in
:data:`HISTORY_NAME` for a model that asks for it.  A step that copies an earlier
task's step is not a repetition (:mod:`~rlm_kernel.engine.repetition` counts a run's
own steps): asking again is not looping.

Long histories are compacted, never silently cut: the newest :attr:`Conversation.keep_full`
tasks are told in full, older ones in one line each, and when even those do not fit in
:attr:`Conversation.max_chars` the section says how many are left out and where they are
(``rlm_history``), after ``rlms``' persistent sessions (``context_0..n`` and history
compaction).  Re-running a task (the same ``key``: the notebook cell's id) replaces its
record in place.

The variables earlier tasks' steps created are the conversation's working state, not
read-only inputs: :meth:`Conversation.working_names` says which names still hold what a
task left, so a caller protects only what the user loaded.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from ...repl_types import REPLVariable
from ...text import middle_cut
from ..step import TRACEBACK_LINE

__all__ = ["HISTORY_NAME", "Conversation", "TaskRecord"]

log = logging.getLogger(__name__)

HISTORY_NAME = "rlm_history"
"""The REPL variable that holds the earlier tasks in full (a list of dicts, oldest
first: ``question``, ``answer``, ``stopped_by``, ``code``, ``variables``)."""

CODE_CHARS = 700
"""Characters of a task's code told to the model (the end of it: the steps that
answered)."""
ANSWER_CHARS = 300
"""Characters of a task's answer told to the model in full form (one-line form: 120)."""
PREVIEW_CHARS = 80
"""Characters of a left variable's preview in the section."""
CUT_HINT = f"the whole is in {HISTORY_NAME}"
"""What the marker of a question or answer cut short in the section says
(:func:`rlm_kernel.text.middle_cut`)."""


@dataclass
class TaskRecord:
    """One earlier task of the conversation.

    Attributes:
        question: the task as asked.
        answer: its answer as text, or None when the run ended without one.
        stopped_by: why the run ended (``final``, ``max_iterations`` ...).
        code: the code of its steps that ran without error, in order (the last one
            called ``FINAL``).
        variables: metadata of the variables its steps created or rebound.
        key: what identifies the task in its session (a notebook cell's id); a task
            run again under the same key replaces this record.
        run_id: the run that answered it (for export).
        answer_source: how the answer was reached
            (:data:`~rlm_kernel.engine.result.ANSWER_SOURCES`; ``no_input``: without any
            data of the user's), None when unknown.
        ids: ``{name: id(value)}`` of the left variables when the run ended (to tell
            whether a name still holds the task's value); not in :meth:`to_dict`.
    """

    question: str
    answer: str | None
    stopped_by: str
    code: list[str] = field(default_factory=list)
    variables: list[REPLVariable] = field(default_factory=list)
    key: str | None = None
    run_id: str | None = None
    answer_source: str | None = None
    ids: dict[str, int] = field(default_factory=dict, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: every field but ``ids``; ``variables`` as dicts."""
        data = asdict(self)
        data.pop("ids")
        data["variables"] = [v.to_dict() for v in self.variables]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TaskRecord:
        """The inverse of :meth:`to_dict` (unknown keys ignored)."""
        return cls(question=str(data.get("question", "")), answer=data.get("answer"),
                   stopped_by=str(data.get("stopped_by", "")),
                   code=[str(c) for c in data.get("code") or []],
                   variables=[REPLVariable(**v) for v in data.get("variables") or []],
                   key=data.get("key"), run_id=data.get("run_id"),
                   answer_source=data.get("answer_source"))

    def as_data(self) -> dict[str, Any]:
        """The record as the model reads it in :data:`HISTORY_NAME`."""
        return {"question": self.question, "answer": self.answer,
                "stopped_by": self.stopped_by, "code": "\n\n".join(self.code),
                "variables": [v.name for v in self.variables]}


class Conversation:
    """The earlier tasks of a session, oldest first.

    Args:
        tasks: records to start from (e.g. :meth:`from_list` of a saved run).
        keep_full: the newest tasks told in full (question, answer, code, variables);
            older ones get one line each.
        max_chars: the most characters :meth:`prompt_section` may take (about a third
            as many tokens); the oldest one-line tasks are left out first, with a note.
    """

    def __init__(self, tasks: Iterable[TaskRecord] = (), *, keep_full: int = 3,
                 max_chars: int = 4000) -> None:
        self.tasks: list[TaskRecord] = list(tasks)
        self.keep_full, self.max_chars = keep_full, max_chars

    def __len__(self) -> int:
        return len(self.tasks)

    def __bool__(self) -> bool:
        return bool(self.tasks)

    # -- keeping the record -----------------------------------------------------------
    def record(self, result: Any, namespace: Mapping[str, Any], *, key: str | None = None,
               run_id: str | None = None) -> TaskRecord:
        """Add the task ``result`` answered, or replace the task recorded under ``key``.

        Args:
            result: the run's :class:`~rlm_kernel.engine.result.RLMResult`.
            namespace: the REPL namespace right after the run (the left variables'
                identities are taken from it).
            key: the task's identity in the session (a cell id); None: always added.
            run_id: the run's id, kept for export.
        """
        code = [e.code for e in result.history.entries
                if e.code and TRACEBACK_LINE not in e.output]
        left = list(getattr(result, "new_variables", []) or [])
        ids = {v.name: id(namespace[v.name]) for v in left if v.name in namespace}
        task = TaskRecord(question=result.question, answer=result.answer,
                          stopped_by=result.stopped_by, code=code, variables=left, key=key,
                          run_id=run_id, answer_source=getattr(result, "answer_source", None),
                          ids=ids)
        for i, old in enumerate(self.tasks):
            if key is not None and old.key == key:
                self.tasks[i] = task
                log.debug("conversation: task %s replaced", key)
                return task
        self.tasks.append(task)
        return task

    def before(self, key: str | None) -> Conversation:
        """The conversation a (re-)run of the task ``key`` sees: every task but its own
        earlier record (the same settings)."""
        kept = [t for t in self.tasks if key is None or t.key != key]
        return Conversation(kept, keep_full=self.keep_full, max_chars=self.max_chars)

    def clear(self) -> None:
        """Forget every task (``%%rlm --new``)."""
        self.tasks.clear()

    def working_names(self, namespace: Mapping[str, Any]) -> set[str]:
        """Names that still hold the value an earlier task's steps left (not rebound
        since by the user): the conversation's working state."""
        names: set[str] = set()
        for task in self.tasks:
            for name, ident in task.ids.items():
                if name in namespace and id(namespace[name]) == ident:
                    names.add(name)
        return names

    # -- what the model is told -------------------------------------------------------
    def prompt_section(self, *, code: bool = False) -> str | None:
        """The task message's account of the earlier tasks (None when there are none),
        put right under the new question: first :meth:`follow_up` (the previous task's
        question and answer, and that "that", "it", "those" mean that answer), then the
        list: the newest :attr:`keep_full` tasks in full (question, answer, the variables
        their code left; with ``code``, the end of that code too; the previous task by
        its number only, its question and answer being told above), older ones in one
        line each, the oldest left out (and said to be) when the section would pass
        :attr:`max_chars`.

        Args:
            code: tell the code of the tasks told in full (``RLMConfig.history_code``);
                else only where it is (:data:`HISTORY_NAME`).
        """
        if not self.tasks:
            return None
        n = len(self.tasks)
        full_from = max(0, n - self.keep_full)
        blocks = [_full(i + 1, t, code, last=i == n - 1) if i >= full_from
                  else _line(i + 1, t) for i, t in enumerate(self.tasks)]
        head = (f"{self.follow_up()}\n\nEarlier tasks in this session, done already (oldest "
                f"first): answer the task above, do not redo them. Their variables were "
                f"made by their code, not given by the user; {HISTORY_NAME} holds each "
                f"task with its code.")
        dropped, room = 0, self.max_chars - 80  # 80: the "(N older tasks ...)" note
        while _size(head, blocks[dropped:]) > room:
            if dropped < full_from:  # the oldest one-line task goes first
                dropped += 1
            elif full_from < n - 1:  # then the oldest full task becomes one line
                blocks[full_from] = _line(full_from + 1, self.tasks[full_from])
                full_from += 1
            else:  # the newest task is always told in full
                break
        body = blocks[dropped:]
        if dropped:
            body.insert(0, f"({dropped} older task{'s' * (dropped != 1)} not shown: read "
                           f"{HISTORY_NAME}[:{dropped}].)")
        return "\n".join([head, *body])

    def follow_up(self) -> str | None:
        """What the new task follows, told right under its question (None when there
        is no earlier task): the previous task's question and answer, and that "that",
        "it", "those" in the new task refer to that answer (the answer named again in
        that sentence, cut to 120 characters); when the previous run ended
        without an answer, that it did.  A follow-up of a follow-up names the last one
        (the one before is in the list of earlier tasks)."""
        if not self.tasks:
            return None
        last = self.tasks[-1]
        asked = middle_cut(_flat(last.question), 400, CUT_HINT)
        if last.answer is None:
            return (f"It follows the previous task: {asked}\n"
                    f"That task ended without an answer (the run stopped by "
                    f"{last.stopped_by}).")
        answer = _answer(last, ANSWER_CHARS)
        return (f"It follows the previous task: {asked}\n"
                f"Its answer: {answer}\n"
                f"In the task above, \"that\", \"it\", \"those\" and \"the same\" refer to "
                f"the previous task: to its answer, "
                f"{middle_cut(_flat(last.answer), 120, CUT_HINT)}, or to what it found.")

    def as_data(self) -> list[dict[str, Any]]:
        """The value bound to :data:`HISTORY_NAME`."""
        return [t.as_data() for t in self.tasks]

    def to_list(self) -> list[dict[str, Any]]:
        """JSON-ready records (:meth:`TaskRecord.to_dict`), for a run's record."""
        return [t.to_dict() for t in self.tasks]

    @classmethod
    def from_list(cls, items: Iterable[Mapping[str, Any]], **kwargs: Any) -> Conversation:
        """The inverse of :meth:`to_list`."""
        return cls([TaskRecord.from_dict(d) for d in items], **kwargs)


def _size(head: str, blocks: list[str]) -> int:
    return len(head) + sum(len(b) + 1 for b in blocks)


def _flat(text: str) -> str:
    """``text`` stripped, and its runs of spaces made one when it is one line."""
    return " ".join(text.split()) if "\n" not in text.strip() else text.strip()


def _answer(task: TaskRecord, limit: int) -> str:
    if task.answer is None:
        return f"(no answer: the run stopped by {task.stopped_by})"
    made = " (made without any data of the user's)" if task.answer_source == "no_input" \
        else ""
    return middle_cut(_flat(task.answer), limit, CUT_HINT) + made


def _line(index: int, task: TaskRecord) -> str:
    """A task in one line: question and answer."""
    return f"{index}. Task: {middle_cut(_flat(task.question), 150, CUT_HINT)} -> Answer: {_answer(task, 120)}"


def _full(index: int, task: TaskRecord, with_code: bool = True, *, last: bool = False) -> str:
    """A task in full: question, answer, the variables it left and (``with_code``) the
    end of its code.  ``last``: the previous task, whose question and answer
    :meth:`Conversation.follow_up` tells: named by its number only."""
    if last:
        lines = [f"{index}. The previous task (question and answer above)."]
    else:
        lines = [f"{index}. Task: {middle_cut(_flat(task.question), 400, CUT_HINT)}",
                 f"   Answer: {_answer(task, ANSWER_CHARS)}"]
    if task.variables:
        shown = "; ".join(_variable(v) for v in task.variables[:8])
        more = len(task.variables) - 8
        lines.append(f"   Variables it left: {shown}" + (f"; and {more} more" if more > 0 else ""))
    code = "\n\n".join(task.code) if with_code else ""
    if code:
        if len(code) > CODE_CHARS:
            code = "# ... (earlier code in rlm_history)\n" + code[-CODE_CHARS:].split("\n", 1)[-1]
        lines.append("   Its code:\n" + "\n".join(f"   | {row}" for row in code.splitlines()))
    return "\n".join(lines)


def _variable(var: REPLVariable) -> str:
    preview = " ".join(var.preview.split())
    if len(preview) > PREVIEW_CHARS:
        preview = preview[: PREVIEW_CHARS - 3] + "..."
    return f"{var.name} ({var.type_name}, {var.total_length:,} {var.length_unit}: {preview})"
