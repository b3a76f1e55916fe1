"""Repetition in a trajectory: a step of a run that does what an earlier step of the
same run did.

A small model at temperature 0 that repeats a step once usually repeats it until the
step limit (the same search eight times, the same failing line five times, the same
probe with a counter in it every step).  What counts is what the step *does*, not how
its text is spelled, so a step is reduced to a :class:`StepSignature` of four parts,
and a part seen ``limit`` times (default 2: the second time) is a :class:`Repetition`:

- **code**, normalised by :func:`normalise_code`: comments, blank lines, layout and
  quoting are dropped (the code is parsed and written back by :func:`ast.unparse`); a
  top-level ``print(x)`` is ``x`` (the REPL shows a step's last expression anyway);
  the names the step itself binds are renamed ``_v0``, ``_v1`` ... in order of first
  appearance (``hits = search("x")`` and ``found = search('x')  # again`` are one
  step).  Names the step only reads (``context``, an earlier step's ``hits``) are
  kept.  A reply without code is its prose with white space collapsed.
- **output** of a step that ran without error, white space collapsed and memory
  addresses (``0x7f...``) masked; outputs shorter than :data:`MIN_OUTPUT_CHARS`
  (``[]``, ``0``, ``True``) are not compared: different searches that find nothing are
  exploring, not repeating.
- **error** of a failed step: its last error line (``NameError: name 'x' is not
  defined``), or the host's message about it (a ``FINAL`` refused for its type).
- **near**: the code *and* its result (the output, when it is compared, or the
  error) with every number masked (:func:`code_shape`, :func:`result_shape`): the same
  step with a counter, a slice bound, an attempt number or a name's digits changed,
  that shows the same thing but for its numbers.  Both must match: the same code
  reading another slice shows other text (other work), and other code (another search
  text, another helper, another variable) is another step.  A step whose output is not
  compared (short or none) has no near part.

Only the steps of the run itself count: a step that does what a step of an earlier
task did (the same question asked again, a follow-up that reuses a search) is copying
work that was right, not looping.

The masking of numbers follows the token-class abstraction of clone detectors (Type-2
clones: identical code but for identifiers and literals; Roy, Cordy and Koschke,
"Comparison and evaluation of code clone detection techniques and tools: a
qualitative approach", Science of Computer Programming 74(7), 2009), applied to numbers only: a string literal or a name
changed is a different call, unless only its digits changed.

Pure: imports only the standard library; no model, no executor, no Jupyter.
"""

from __future__ import annotations

import ast
import io
import logging
import re
import tokenize
from dataclasses import dataclass, field

__all__ = ["MIN_OUTPUT_CHARS", "Repetition", "RepetitionDetector", "StepSignature",
           "code_shape", "error_line", "normalise_code", "normalise_output", "result_shape",
           "signature", "without_comments"]

log = logging.getLogger(__name__)

MIN_OUTPUT_CHARS = 20
"""Outputs shorter than this (after normalising) are not compared."""

NUMBER_MARK = "#"
"""What every number (a run of digits) becomes in a step's shape."""

_ADDRESS = re.compile(r"0x[0-9a-fA-F]{6,}")
_DIGITS = re.compile(r"\d+")
# a hex id, hash or uuid (with at least one digit): a number written in hex
_HEX_ID = re.compile(r"\b[0-9a-fA-F][0-9a-fA-F-]{6,}[0-9a-fA-F]\b")
_LAYOUT = frozenset({tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                     tokenize.DEDENT, tokenize.ENDMARKER})
_ERROR_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Warning)\b.*$")


# -- normalising ------------------------------------------------------------------------
class _Canonical(ast.NodeTransformer):
    """Unwraps top-level ``print`` calls and renames the names a step binds."""

    def __init__(self, bound: dict[str, str]) -> None:
        self.bound = bound

    def visit_Expr(self, node: ast.Expr) -> ast.AST:
        call = node.value
        if (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
                and call.func.id == "print" and call.args
                and not any(isinstance(a, ast.Starred) for a in call.args)):
            shown = call.args[0] if len(call.args) == 1 else \
                ast.Tuple(elts=list(call.args), ctx=ast.Load())
            node = ast.Expr(value=shown)
        self.generic_visit(node)
        return node

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in self.bound:
            return ast.copy_location(ast.Name(id=self.bound[node.id], ctx=node.ctx), node)
        return node


def _bound_names(tree: ast.AST) -> dict[str, str]:
    """The names ``tree`` assigns (``x = ``, ``for x in``, ``with ... as x``,
    comprehension targets), renamed ``_v0`` ... in order of their first appearance."""
    stored = [n for n in ast.walk(tree)
              if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del))]
    stored.sort(key=lambda n: (n.lineno, n.col_offset))
    names: dict[str, str] = {}
    for node in stored:
        names.setdefault(node.id, f"_v{len(names)}")
    return names


def without_comments(code: str) -> str:
    """``code`` with its comments, blank lines and layout dropped, the code kept.

    Args:
        code: Python source, which need not parse (a step's code, a follow-up's copy).

    Returns:
        Its tokens other than comments, newlines and indentation, joined by single
        spaces (``"x  =  1  # one"`` -> ``"x = 1"``); for text that does not tokenize,
        its lines without ``#...`` tails, white space collapsed.  Two steps whose
        results are equal differ only in comments and layout.
    """
    try:
        tokens = [t.string for t in tokenize.generate_tokens(io.StringIO(code).readline)
                  if t.type not in _LAYOUT]
        return " ".join(tokens)
    except (tokenize.TokenError, SyntaxError, IndentationError):
        lines = (line.split("#", 1)[0] for line in code.splitlines())
        return " ".join(" ".join(lines).split())


def _canonical(code: str) -> tuple[str, frozenset[str]] | None:
    """``ast.unparse`` of ``code`` with top-level ``print(...)`` unwrapped and its bound
    names renamed, with the new names; None when ``code`` does not parse."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):  # ValueError: a null byte in the source
        return None
    bound = _bound_names(tree)
    tree = _Canonical(bound).visit(tree)
    return ast.unparse(ast.fix_missing_locations(tree)), frozenset(bound.values())


def normalise_code(code: str) -> str:
    """The form of a step's code that two spellings of the same step share.

    Args:
        code: Python source (a step's code; may not parse).

    Returns:
        ``ast.unparse`` of the code with top-level ``print(...)`` calls unwrapped and
        the step's own bound names renamed ``_v0`` ...; for code that does not parse,
        its tokens without comments, joined by single spaces.  "" for blank code.
        Idempotent: ``normalise_code(normalise_code(c)) == normalise_code(c)``.
    """
    if not code.strip():
        return ""
    canonical = _canonical(code)
    return without_comments(code) if canonical is None else canonical[0]


def _mask_digits(text: str) -> str:
    return _DIGITS.sub(NUMBER_MARK, text)


def code_shape(code: str) -> str:
    """A step's code with every number masked: the same step with a counter, a slice
    bound or a name's digits changed has the same shape.

    Args:
        code: Python source (a step's code; may not parse).

    Returns:
        The tokens (:mod:`tokenize`) of :func:`normalise_code`'s form, joined by single
        spaces, with each number literal :data:`NUMBER_MARK` and each run of digits in
        a name or a string literal masked the same way (``probe_7``, ``"attempt 7"``);
        the renamed bound names (``_v0`` ...) are kept.  Names read and the text of
        string literals are kept: ``search("class ")`` and ``search("def ")`` have
        different shapes.  "" for blank code.
    """
    if not code.strip():
        return ""
    canonical = _canonical(code)
    text, renamed = canonical if canonical is not None else (code, frozenset())
    shown: list[str] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type in _LAYOUT:
                continue
            if tok.type == tokenize.NUMBER:
                shown.append(NUMBER_MARK)
            elif tok.type == tokenize.NAME and tok.string in renamed:
                shown.append(tok.string)
            else:
                shown.append(_mask_digits(tok.string))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return _mask_digits(without_comments(code))
    return " ".join(shown)


def result_shape(text: str) -> str:
    """A step's normalised output or error line with every number masked: hex ids,
    hashes and uuids (a run of 8 or more hex digits and dashes with a digit in it), then
    every run of digits, as :data:`NUMBER_MARK` (``attempt 501 of 12`` ->
    ``attempt # of #``).  "" for "" (a result not compared)."""
    def hex_id(match: re.Match[str]) -> str:
        return NUMBER_MARK if any(c.isdigit() for c in match[0]) else match[0]

    return _mask_digits(_HEX_ID.sub(hex_id, text))


def normalise_output(output: str) -> str:
    """``output`` with white space collapsed and memory addresses masked; "" when
    shorter than :data:`MIN_OUTPUT_CHARS` (not compared)."""
    text = _ADDRESS.sub("0x?", " ".join(output.split()))
    return text if len(text) >= MIN_OUTPUT_CHARS else ""


def error_line(output: str) -> str:
    """The error of a failed step's output: its last line that names an exception
    (``ZeroDivisionError: division by zero``), else its last non-blank line; ""
    for blank output."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for line in reversed(lines):
        if _ERROR_LINE.match(line):
            return _ADDRESS.sub("0x?", line)
    return _ADDRESS.sub("0x?", lines[-1]) if lines else ""


# -- signatures -------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class StepSignature:
    """What a step did, in the parts repetition is judged on ("" = not compared).

    Attributes:
        code: the normalised code (:func:`normalise_code`), or ``"text: ..."`` for a
            reply without code (its prose, white space collapsed).
        output: the normalised output of a step that succeeded (:func:`normalise_output`).
        error: the error line of a step that failed (:func:`error_line`).
        near: the code's shape and its result's (:func:`code_shape`,
            :func:`result_shape` of the output or error), when the result is compared;
            for a reply without code, its prose's shape.
    """

    code: str = ""
    output: str = ""
    error: str = ""
    near: str = ""

    def parts(self) -> dict[str, str]:
        """The non-empty parts by name (``code``, ``output``, ``error``, ``near``)."""
        return {k: v for k, v in (("code", self.code), ("output", self.output),
                                  ("error", self.error), ("near", self.near)) if v}


def signature(code: str, output: str, success: bool, *, reply: str = "",
              error: str | None = None) -> StepSignature:
    """The :class:`StepSignature` of one step.

    Args:
        code: the code that ran ("" when the reply had none).
        output: everything it printed (with a traceback when it failed).
        success: False when the code raised or timed out, or the host refused its
            ``FINAL``.
        reply: the model's reply, used for a reply without code.
        error: the host's message about the step (``StepOutcome.error_for_model``), used
            as its error when given.
    """
    if not code:
        prose = " ".join(reply.split())
        return StepSignature(code="text: " + prose, near="text: " + result_shape(prose)) \
            if prose else StepSignature()
    norm = normalise_code(code)
    if success and not error:
        shown, failed = normalise_output(output), ""
    else:
        shown, failed = "", " ".join(error.split()) if error else error_line(output)
    result = shown or failed
    near = f"{code_shape(code)}\n=> {result_shape(result)}" if result else ""
    return StepSignature(code=norm, output=shown, error=failed, near=near)


@dataclass(frozen=True, slots=True)
class Repetition:
    """A step found repeating an earlier step of its run (data only: what the model and
    the notebook read of it is :func:`~rlm_kernel.engine.prompts.repeated_step`).

    Attributes:
        step: the step repeated (the first that showed the repeated part).
        what: the parts repeated, in the order code, output, error; or ``("near",)``
            when only the near part repeated (the same code and result but for their
            numbers).
        error: the step's error line when ``"error"`` or ``"near"`` is in ``what`` and
            the step failed, else None.
    """

    step: int
    what: tuple[str, ...]
    error: str | None = None


@dataclass
class RepetitionDetector:
    """Counts each part of each step's signature and reports a repetition.  One
    detector serves one run: only its own steps are counted.

    Args:
        limit: how many times a part may be seen before it counts as a repetition
            (2: the second time), at least 2.

    Raises:
        ValueError: ``limit`` below 2.
    """

    limit: int = 2
    _seen: dict[tuple[str, str], list[int]] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        if self.limit < 2:
            raise ValueError(f"the repetition limit must be at least 2, got {self.limit}")

    def repeats_code(self, code: str) -> Repetition | None:
        """The repetition running ``code`` would make (its normalised code seen
        ``limit - 1`` times already), checked before it runs; records nothing."""
        steps = self._seen.get(("code", normalise_code(code)), []) if code.strip() else []
        if len(steps) + 1 < self.limit:
            return None
        return Repetition(step=steps[0], what=("code",))

    def observe(self, step: int, sig: StepSignature) -> Repetition | None:
        """Record ``step``'s signature; the repetition it makes, if any.

        Args:
            step: the step's number (from 1).
            sig: what it did (:func:`signature`).

        Returns:
            A :class:`Repetition` when one of its parts has now been seen ``limit``
            times (this step included), naming the first step that showed a repeated
            part (``near`` only when no exact part repeated); else None.
        """
        firsts: dict[str, int] = {}
        for kind, value in sig.parts().items():
            steps = self._seen.setdefault((kind, value), [])
            steps.append(step)
            if len(steps) >= self.limit:
                firsts[kind] = steps[0]
        if len(firsts) > 1:
            firsts.pop("near", None)  # an exact part says more
        if not firsts:
            return None
        what = tuple(firsts)
        log.debug("step %d repeats step %d (%s)", step, min(firsts.values()), ", ".join(what))
        return Repetition(step=min(firsts.values()), what=what,
                          error=(sig.error or None) if {"error", "near"} & set(what) else None)
