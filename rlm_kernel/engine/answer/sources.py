"""How an answer was reached (``RLMResult.answer_source``): which of the user's inputs a
run's executed code read, and the one rule that names the answer's source.

**What counts as reading an input: a read in code that RAN.**  Each step's executor
records which watched names its code read while it ran
(:mod:`rlm_kernel.executors.reads`: the step's loads of those names are instrumented;
``REPLResult.names_read``, kept in the trajectory as ``REPLEntry.names_read``);
:func:`read_watch` says what to watch and :func:`inputs_in_reads` turns the record into
inputs.  A step reads the input ``x`` when, in code that ran,

- it loads the name ``x`` and gets the input itself (``len(context)``, a ``def``'s,
  lambda's or comprehension's body when it is called; not a parameter or a local of
  the same name, not the model's own rebinding: the object is compared, not the name);
- it reads ``x`` through its text: a subscript or a call given ``"x"`` that returns the
  input (``globals()["context"]``, ``globals().get("context")``, ``getattr(m,
  "context")``, ``eval("context")``), or an executed ``FINAL_VAR("x")``.  A string that
  only names an input (``_ = "context"``, ``print("context")``) reads nothing, nor does
  code that did not run (``if False: context``, a function never called);
- it calls a data helper that reads the run's main variable when given no data
  (``search("word")``, ``split_documents()``, ``parse_records()``, ``code_outline()``;
  ``search("w", other)`` reads ``other`` instead);
- it calls (or names) one of the user's tools, or a helper of the working folder (or
  ``open``/``pathlib``/``os.listdir``/``glob``/``.read_text`` while a working folder is
  given: the folder is then an input).

The record is trusted as far as it can be: in the isolated executor the worker reports
it, and model code can forge it, but a forged read only claims what one real read in the
same step would give, and labels only that run's own answer (the module docstring of
:mod:`rlm_kernel.executors.reads`).

Limits, on purpose: code compiled at run time (``eval("len(context)")``, ``exec``) and
a name built at run time are not seen (the answer is then said to be reached without
the data: a false alarm, never a false assurance).  ``SHOW_VARS()`` is not a read: it
prints the metadata the task message gave already.

Code an IPython magic runs (``%time n = len(context)`` in the notebook's executor) is
compiled at run time too: not seen.

**Steps with no record** (``names_read`` None: an executor without ``read_watch``, a
trajectory from before the record) are read statically, as before: a step reads ``x``
when its code loads the name or holds the text ``"x"``, reached or not (code that does
not parse as Python is read with its magics' names dropped and its ``!`` lines left out;
if it still does not parse, a whole-word match of each name counts).

**The source** (:func:`answer_source`), first rule that applies:

1. ``no_input``: no executed code read any input (or the run had none);
2. ``ungrounded``: the answer is a literal the grounding check
   (:func:`~rlm_kernel.engine.answer.grounding.finding`) found in no output and no variable;
3. ``forced``: the answer came from the "answer now" call after the run stopped early
   (the step limit, a stuck run);
4. ``output``: the answer was taken from text (a ``FINAL`` written in prose, or a
   termination policy's answer made of the model's words), not from an executed ``FINAL``;
5. ``data``: an executed ``FINAL``/``FINAL_VAR`` in a run that read the user's data.

A run a working folder's ``finish()`` ended is ``finish``: its answer is the folder's
change as the host computed it (:mod:`~rlm_kernel.executors.folder_diff`), not a value
these rules judge.

A candidates run turns its chosen candidate's ``data`` or ``output`` into ``vote``
(:func:`voted_source`); the warnings 1-3 stay: a vote does not remedy them.
"""

from __future__ import annotations

import ast
import logging
import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...executors import DATA_HELPERS, reads_main_variable

if TYPE_CHECKING:  # pragma: no cover
    from ...executors import ReadWatch
    from ...repl_types import REPLEntry

__all__ = ["ANSWER_SOURCES", "ANSWER_SOURCE_KINDS", "DATA_HELPERS", "FOLDER_READERS",
           "STOP_REASONS", "TONES", "AnswerSource", "RunEnding", "StopReason", "answer_source",
           "any_input_read", "how_reached", "inputs_in_reads", "inputs_read", "is_plain",
           "read_watch", "run_ending", "voted_source"]

log = logging.getLogger(__name__)


FOLDER_READERS = frozenset({"open", "Path", "pathlib", "listdir", "scandir", "walk", "glob",
                            "iglob", "read_text", "read_bytes", "iterdir", "rglob"})
"""Names that read files: a read of the working folder's inputs when one is given."""


def read_watch(inputs: Collection[str], *, data_name: str | None = None,
               folder: Collection[str] = ()) -> ReadWatch:
    """What a run's executor watches (``read_watch``): ``(names, attribute names)``.

    Args:
        inputs (Collection[str]): the names of the user's inputs: variables and tools.
        data_name (str | None): the run's main variable (the data helpers read it).
        folder (Collection[str]): the working folder's helper names (empty: no folder).

    Returns:
        tuple[frozenset[str], frozenset[str]]: the names whose loads are recorded (the
        inputs, the data helpers when ``data_name`` is an input, the folder's helpers
        and readers), and the attribute names recorded (the folder readers).
    """
    names = set(inputs)
    if data_name in names:
        names |= DATA_HELPERS.keys()
    if folder:
        return frozenset(names | set(folder) | FOLDER_READERS), FOLDER_READERS
    return frozenset(names), frozenset()


def inputs_in_reads(reads: Iterable[str], inputs: Collection[str], *,
                    data_name: str | None = None, folder: Collection[str] = ()) -> set[str]:
    """The inputs an executor's record of executed reads (``REPLResult.names_read``)
    shows read: the input names in it, ``data_name`` for a data helper called without
    data (``"search()"``), ``"<folder>"`` for a folder helper or reader."""
    found: set[str] = set()
    readers = set(folder) | FOLDER_READERS if folder else set()
    for name in reads:
        if name in inputs:
            found.add(name)
        elif name in readers:
            found.add("<folder>")
        elif name.endswith("()") and name[:-2] in DATA_HELPERS and data_name is not None \
                and data_name in inputs:
            found.add(data_name)
    return found

_SOURCES_BEFORE_A_VOTE = frozenset({"data", "output"})


def inputs_read(code: str, inputs: Collection[str], *, data_name: str | None = None,
                folder: Collection[str] = ()) -> set[str]:
    """The inputs one step's code names, reached or not: the static rule for a step
    whose executor kept no record of its executed reads (see the module docstring).

    Args:
        code (str): the step's code as executed.
        inputs (Collection[str]): the names of the user's inputs: variables and tools.
        data_name (str | None): the variable the data helpers read when given no data
            (the run's main variable); None: none.
        folder (Collection[str]): the working folder's helper names (``ls``,
            ``read`` ...), empty without a folder; with one, a read of the folder
            counts as the input ``"<folder>"``.

    Returns:
        set[str]: the names of ``inputs`` read, plus ``"<folder>"`` for the folder.
    """
    names = set(inputs)
    if not code.strip() or not (names or folder):
        return set()
    tree = _parse(code)
    if tree is None:  # not Python even without IPython lines: whole words
        found = {n for n in names if re.search(rf"(?<![\w.]){re.escape(n)}\b", code)}
        if folder and any(re.search(rf"\b{re.escape(n)}\s*\(", code)
                          for n in (*folder, *FOLDER_READERS)):
            found.add("<folder>")
        return found
    found = set()
    readers = set(folder) | FOLDER_READERS if folder else set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            if node.id in names:
                found.add(node.id)
            elif node.id in readers:
                found.add("<folder>")
        elif isinstance(node, ast.Constant) and type(node.value) is str \
                and node.value in names:
            found.add(node.value)
        elif isinstance(node, ast.Attribute) and node.attr in readers:
            found.add("<folder>")
        if isinstance(node, ast.Call) and data_name is not None and data_name in names \
                and reads_main_variable(node):
            found.add(data_name)
    return found


def any_input_read(steps: Iterable[REPLEntry | str], inputs: Collection[str], *,
                   data_name: str | None = None, folder: Collection[str] = ()) -> bool:
    """True when any step read one of ``inputs`` (or the working folder): its record of
    executed reads (``REPLEntry.names_read``, :func:`inputs_in_reads`) where it has one,
    else its code (:func:`inputs_read`, a step given as a ``str``: its code).  See
    :func:`inputs_read` for the other arguments."""
    for step in steps:
        reads = None if isinstance(step, str) else step.names_read
        if reads is not None:
            if inputs_in_reads(reads, inputs, data_name=data_name, folder=folder):
                return True
        elif inputs_read(step if isinstance(step, str) else step.code, inputs,
                         data_name=data_name, folder=folder):
            return True
    return False


def answer_source(*, read_input: bool, ungrounded: bool = False, forced: bool = False,
                  from_text: bool = False) -> str:
    """The key of :data:`ANSWER_SOURCE_KINDS` for an answer.

    Args:
        read_input (bool): the run's executed code read at least one of the user's
            inputs (:func:`inputs_read`).
        ungrounded (bool): the grounding check found the answer in no output and no
            variable.
        forced (bool): the answer came from the "answer now" call.
        from_text (bool): the answer was taken from text, not from an executed
            ``FINAL``/``FINAL_VAR``.

    Returns:
        str: ``no_input``, ``ungrounded``, ``forced``, ``output`` or ``data``, the
        first that applies in that order.
    """
    if not read_input:
        return "no_input"
    if ungrounded:
        return "ungrounded"
    if forced:
        return "forced"
    if from_text:
        return "output"
    return "data"


def voted_source(source: str | None) -> str | None:
    """The source of a candidates run's answer given its chosen candidate's own:
    ``vote`` for ``data`` and ``output``; a warning (``no_input``, ``ungrounded``,
    ``forced``) stays; None (no answer) stays None."""
    return "vote" if source in _SOURCES_BEFORE_A_VOTE else source


TONES: dict[str, dict[str, str]] = {
    "ok": {"bar": "#4caf50", "text": "#2e7d32", "widget": "success"},
    "caution": {"bar": "#ff9800", "text": "#b26a00", "widget": "warning"},
    "error": {"bar": "#f44336", "text": "#c62828", "widget": "danger"},
}
"""The tones a run's end is shown in, each view's colour for it: ``bar`` (a bar or an
edge), ``text`` (words on a light background), ``widget`` (the ipywidgets bar style).
``ok`` (green): an answer computed by the model's code from the user's data, at a
``FINAL``; ``caution`` (amber): any other answer, and a stop without one; ``error``
(red): a run that failed without an answer.  Colours: Material Design's green 500/800,
orange 500 and red 500/800 (material.io, "The color system", 2014 palette)."""


@dataclass(frozen=True)
class AnswerSource:
    """One kind of ``RLMResult.answer_source``: its words and its tone, for every view.

    Attributes:
        phrase (str): the words, lower-case, without a final period, read after "The
            answer was ..." (:func:`how_reached`, :func:`run_ending`): the same words in
            the task cell, the answer cell, the export, ``rlm run`` and ``--json``.
        tone (str): a key of :data:`TONES`: ``ok`` (green) for ``data`` and ``finish`` only; every
            other kind is shown for what it is, ``caution`` (amber).
        no_data_phrase (str | None): :attr:`phrase` when the run was given no data at
            all (``no_input`` only).
    """

    phrase: str
    tone: str = "caution"
    no_data_phrase: str | None = None

    @property
    def plain(self) -> bool:
        """True for a plain success, shown green (``tone`` ``ok``)."""
        return self.tone == "ok"

    @property
    def sentence(self) -> str:
        """The words (:attr:`phrase`; one wording for every view)."""
        return self.phrase


ANSWER_SOURCE_KINDS: dict[str, AnswerSource] = {
    "data": AnswerSource("computed by the model's code from your data", tone="ok"),
    "output": AnswerSource("taken from text the model wrote, not from a FINAL its code ran"),
    "ungrounded": AnswerSource(
        "not found in your data or in any output of the model's code "
        "(the grounding check could not find it)"),
    "vote": AnswerSource("chosen by a vote"),
    "no_input": AnswerSource("reached without reading your data",
                             no_data_phrase="reached without any data (none was given)"),
    "forced": AnswerSource("the model's best guess, asked for after the run stopped early"),
    "finish": AnswerSource("the change the model's code made to the working folder, "
                           "as a diff the host computed (finish())", tone="ok"),
}
"""How an answer was reached, by ``RLMResult.answer_source`` kind: the one table of
words and tones the command line, the notebook (task cell, answer cell) and the export
read (:class:`AnswerSource`)."""

ANSWER_SOURCES: dict[str, str] = {kind: s.phrase for kind, s in ANSWER_SOURCE_KINDS.items()}
"""How an answer was reached (``RLMResult.answer_source``), in words
(:attr:`AnswerSource.phrase`).  Only ``data`` and ``finish`` (a working folder's change,
ended by ``finish()``) are a plain success; every other kind is shown for what it is."""


@dataclass(frozen=True)
class StopReason:
    """One ``RLMResult.stopped_by`` reason: what it means and how a run that ended
    so without an answer is said and shown.

    Attributes:
        meaning (str): what the reason means, lower-case, read after "the run stopped
            because" (``you interrupted it``).
        no_answer (str): the sentence for a run that ended so without an answer
            (``No answer: you interrupted the run.``).
        tone (str): a key of :data:`TONES` for such a run: ``error`` for ``error``
            only, ``caution`` otherwise.
    """

    meaning: str
    no_answer: str
    tone: str = "caution"


STOP_REASONS: dict[str, StopReason] = {
    "final": StopReason("the model gave its answer", "No answer."),
    "max_iterations": StopReason("it reached its step limit",
                                 "No answer: the run reached its step limit."),
    "budget": StopReason("it reached its budget", "No answer: the run reached its budget."),
    "interrupt": StopReason("you interrupted it", "No answer: you interrupted the run."),
    "stuck": StopReason("the model repeated itself",
                        "No answer: the run stopped because the model repeated itself."),
    "error": StopReason("it failed", "No answer: the run failed.", tone="error"),
}
"""The endings of a run by ``stopped_by``, in words and tone (:class:`StopReason`)."""


@dataclass(frozen=True)
class RunEnding:
    """How a run ended, as every view shows it (:func:`run_ending`).

    Attributes:
        kind (str): the answer's ``answer_source`` kind (a key of
            :data:`ANSWER_SOURCE_KINDS`; ``unknown``: a result that does not say), or
            ``no_answer`` for a run that ended without one.
        tone (str): a key of :data:`TONES` (``ok``, ``caution``, ``error``).
        words (str): one sentence: ``The answer was computed by the model's code from
            your data.``, ``No answer: you interrupted the run.``
    """

    kind: str
    tone: str
    words: str


def run_ending(has_answer: bool, stopped_by: str, source: str | None,
               votes: tuple[int, int] | list[int] | None = None, *,
               no_data: bool = False) -> RunEnding:
    """How a run ended, from the one table: its kind, tone and sentence.

    Args:
        has_answer (bool): the run has an answer (``RLMResult.answer`` is not None).
        stopped_by (str): ``RLMResult.stopped_by``.
        source (str | None): ``RLMResult.answer_source``.
        votes (tuple[int, int] | None): ``RLMResult.votes``.
        no_data (bool): the run was given no data at all.

    Returns:
        RunEnding: ``ok`` only for an answer from the user's data at a ``FINAL`` (or a
        result that does not say how, at a ``FINAL``); an answer kept when the run then
        stopped otherwise is ``caution`` and says why it stopped; no answer is
        ``caution``, or ``error`` after an error; never ``ok``.
    """
    stop = STOP_REASONS.get(stopped_by)
    if not has_answer:
        if stop is None:
            return RunEnding("no_answer", "caution", f"No answer: the run stopped ({stopped_by}).")
        return RunEnding("no_answer", stop.tone, stop.no_answer)
    if source is None:
        words = "The run does not say how the answer was reached."
        tone = "ok"
    else:
        words = f"The answer was {how_reached(source, votes, no_data=no_data)}."
        kind = ANSWER_SOURCE_KINDS.get(source)
        tone = kind.tone if kind is not None else "caution"
    if stopped_by != "final":
        tone = "caution" if tone == "ok" else tone
        meaning = stop.meaning if stop is not None else stopped_by
        words = f"{words[:-1]}; the run stopped because {meaning}."
    return RunEnding(source or "unknown", tone, words)


def is_plain(source: str | None) -> bool:
    """True when an answer reached this way is a plain success, shown green
    (:attr:`AnswerSource.plain`: ``data``, ``finish``), or when the result does not say (None: a
    result from before answers said how); False for every other kind, known or not."""
    if source is None:
        return True
    kind = ANSWER_SOURCE_KINDS.get(source)
    return kind is not None and kind.plain


def how_reached(source: str | None, votes: tuple[int, int] | list[int] | None = None,
                *, no_data: bool = False) -> str | None:
    """How an answer was reached, as the words a user reads (the CLI's line, the
    exported notebook's answer cell), e.g. ``reached without reading your data``.

    Args:
        source (str | None): ``RLMResult.answer_source`` (None: no answer).
        votes (tuple[int, int] | None): ``RLMResult.votes``, ``(k, n)``.
        no_data (bool): the run was given no data at all (``no_input`` then says so).

    Returns:
        str | None: a lower-case phrase without a final period; None for no answer.
        With ``votes``, a vote's count follows (``chosen by a vote: 2 of 3 candidates
        agreed``; after a warning: ``...; 2 of 3 candidates agreed``).
    """
    if source is None:
        return None
    kind = ANSWER_SOURCE_KINDS.get(source)
    if kind is None:
        text = source
    else:
        text = kind.no_data_phrase if no_data and kind.no_data_phrase else kind.phrase
    if votes:
        k, n = votes
        counted = f"{k} of {n} candidate{'s' * (n != 1)} agreed"
        text += f": {counted}" if source == "vote" else f"; {counted}"
    return text


_MAGIC = re.compile(r"^(\s*)%%?\w+\s?")  # a line or cell magic's name (%time, %%timeit)


def _parse(code: str) -> ast.Module | None:
    """``code`` as Python, or with its IPython lines read as the code they run (a
    magic's name dropped: ``%time n = len(context)`` reads ``n = len(context)``;
    ``!shell`` lines left out), or None when neither parses."""
    lines = [_MAGIC.sub(r"\1", line) for line in code.splitlines()
             if not line.lstrip().startswith("!")]
    for text in (code, "\n".join(lines)):
        try:
            return ast.parse(text)
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            continue
    return None
