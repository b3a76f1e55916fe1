"""The ``rlm`` command: run a task over files, and manage the embedded model.

    rlm run --context FILE [--context FILE ...] [--model M] [--returns TYPE] [--json]
            [--export X.ipynb] "question"
    rlm model status | prepare | serve [--replicas N [--fleet-file PATH]]
    rlm mcp serve [--http [--port N]] [--model M ...]   (rlm-kernel as an MCP server)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from typing import TYPE_CHECKING, Any

from ..context import ContextError, load_contexts
from ..engine import Event, RunObserver
from ..engine.frontends import (
    AnswerCheck,
    CandidateFinished,
    CandidateStarted,
    ModelCall,
    ModelWriting,
    RunFinished,
    RunStarted,
    StepFinished,
    StepStarted,
    add_setting_options,
    config_overrides,
    non_empty,
    short_answer,
    vote_line,
)
from ..executors import WorkerError, filter_streams
from ..models import model_label
from ..redaction import redact_data, redact_text

if TYPE_CHECKING:
    from ..engine import RLMResult
    from ..engine.frontends import RunEnding

__all__ = ["main", "build_parser", "json_text"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``rlm`` command."""
    parser = argparse.ArgumentParser(prog="rlm", description="Recursive Language Models.")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="answer a question about files")
    run.add_argument("question", type=non_empty, nargs="?",
                     help="the task, in natural language (with --replay: default the "
                     "recorded one)")
    run.add_argument("--context", action="append", default=[], metavar="PATH",
                     help="a file (its text) or a folder (a dict {path: text} of its text "
                          "files); repeat for several, which makes a dict")
    add_setting_options(run)  # --max-iterations, budgets ... (from RLMConfig)
    run.add_argument("--returns", metavar="TYPE",
                     help="the answer's type: int, float, bool, str, list[str], "
                     "dict[str, int], Literal['yes', 'no'] ... or a JSON Schema file "
                     "(PATH.json); the answer is validated (and coerced), --json gives it "
                     "as answer_value")
    run.add_argument("--replay", metavar="RECORD",
                     help="answer from a recorded run (an exported .ipynb, or the JSON of "
                     "--json --trajectory) instead of any model; reports the first step "
                     "whose output differs (diverged_at)")
    run.add_argument("--json", action="store_true", help="print one JSON object, nothing else")
    run.add_argument("--trajectory", action="store_true",
                     help="with --json: include every step and call record")
    run.add_argument("--export", metavar="PATH.ipynb",
                     help="write the run as a notebook (kernel rlm) that re-runs top to "
                     "bottom; PATH.jsonl: as alexzhang13/rlm's trajectory log")
    from .batch import add_batch_parser

    add_batch_parser(sub)  # rlm batch TASKS.jsonl --out RESULTS.jsonl ...
    from .mcp_serve import add_mcp_parser

    add_mcp_parser(sub)  # rlm mcp serve [--http [--port N]] [settings]
    model = sub.add_parser("model", help="the embedded local model")
    model.add_argument("action", choices=["status", "prepare", "serve", "stop"],
                       help="status: weights, server and when it stops; prepare: the "
                       "weights; serve: a server until Ctrl-C; stop: the running server now")
    model.add_argument("--name", help="embedded model (default qwen2.5-coder-1.5b)")
    model.add_argument("--replicas", type=int, metavar="N",
                       help="serve: start N servers and print the fleet file for them "
                       "(rlm run --router FILE --model local-fleet)")
    model.add_argument("--fleet-file", metavar="PATH",
                       help="serve --replicas: also write the fleet file there")
    return parser


def _err(message: str) -> None:
    """``message`` on stderr as ``rlm: error: ...``, secrets redacted (an exception's
    text may quote a key)."""
    print(f"rlm: error: {redact_text(message)}", file=sys.stderr)


def _fail(args: argparse.Namespace, message: str, code: int,
          stopped_by: str = "error") -> int:
    """End ``rlm run`` without a run result: the message on stderr and, with
    ``--json``, one JSON object on stdout (the keys of a run's, ``answer`` null,
    ``stopped_by`` and ``error`` set).

    Args:
        args: the parsed command line (``json``, ``question``, ``json_fd``).
        message: the error, one readable line.
        code: the exit code to return (docs/cli.md's: 1 a failed run, 2 bad input,
            130 interrupted).
        stopped_by: ``"error"`` or ``"interrupt"``.

    Returns:
        ``code``.
    """
    _err(message)
    if getattr(args, "json", False) and getattr(args, "command", None) == "run":
        from ..engine import RLMResult

        data = RLMResult(question=getattr(args, "question", None) or "", stopped_by=stopped_by,
                         error=message, model=getattr(args, "model", None) or "",
                         sub_model=getattr(args, "sub_model", None) or "").summary()
        _write_json(data, args, getattr(args, "json_fd", None))
    return code


def json_text(data: Any) -> str:
    """``data`` as one line of strict JSON (RFC 8259), ending in a newline.

    A float that is not finite becomes the string ``"NaN"``, ``"Infinity"`` or
    ``"-Infinity"`` (Python's ``float()`` and JavaScript's ``Number()`` read those
    back), as a value or a key; other values JSON has no form for become their
    ``str``.  Data too deep to encode is given as its ``str``, cut at 10,000
    characters.

    Args:
        data: the object to print (dicts, lists, str, numbers, None ...).

    Returns:
        The JSON text; never holds the bare ``NaN`` / ``Infinity`` tokens.
    """
    try:
        return json.dumps(_finite(data), default=str, allow_nan=False) + "\n"
    except (ValueError, RecursionError, TypeError):
        flat = {str(k): (v if isinstance(v, (str, int, bool, type(None))) or
                         (isinstance(v, float) and math.isfinite(v)) else _short_str(v))
                for k, v in data.items()} if isinstance(data, dict) else _short_str(data)
        return json.dumps(flat, default=str, allow_nan=False) + "\n"


def _short_str(value: Any) -> str:
    """``str(value)`` cut at 10,000 characters, or a placeholder when even that
    fails (too deep, or its ``__str__`` raises)."""
    try:
        return str(value)[:10_000]
    except (RecursionError, Exception):  # noqa: BLE001 - a placeholder instead
        return f"<{type(value).__name__}: no JSON or text form>"


def _finite(value: Any) -> Any:
    """``value`` with every non-finite float (values and keys, in dicts, lists and
    tuples) turned into ``"NaN"``, ``"Infinity"`` or ``"-Infinity"``."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {_finite(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _write_json(data: dict[str, Any], args: argparse.Namespace, json_fd: int | None) -> None:
    """Print ``data`` as JSON (:func:`json_text`), every text in it redacted: to
    ``json_fd`` (the real stdout, kept while fd 1 points at stderr) as the ``rlm``
    command, else to the caller's stdout."""
    text = json_text(redact_data(data))
    if json_fd is not None and getattr(args, "as_command", False):
        sys.stderr.flush()
        os.write(json_fd, text.encode("utf-8", "backslashreplace"))
    else:  # called from Python: the caller's stdout, whatever it is
        if json_fd is not None:
            os.dup2(json_fd, 1)
        print(text, end="", flush=True, file=getattr(args, "real_stdout", None) or sys.stdout)


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process exit code (0 ok, 1 failed run, 2 bad input)."""
    for stream in (sys.stdout, sys.stderr):  # model output may hold lone surrogates
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    args = build_parser().parse_args(argv)
    args.as_command = argv is None  # the process is ours (see _json_stdout)
    code = _main(args)
    from ..executors import exit_hooks_added, quarantined_running

    # As a command (argv from the process), threads that model code left running and
    # exit hooks it registered (they may print into --json's stdout, or sleep) must not
    # hold or spoil the exit; called from Python, the caller's process is not ours to end.
    if argv is None and (quarantined_running() or exit_hooks_added()):
        if "rlm_kernel.models.local.server" in sys.modules:  # the host's own exit hook
            from ..models import stop_all_servers

            stop_all_servers()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def _main(args: argparse.Namespace) -> int:
    """Run the command; every failure is one message (and, for ``rlm run --json``,
    one JSON object) with the exit code of docs/cli.md: 2 bad input, 1 a failed run
    (anything else that goes wrong included), 130 interrupted."""
    try:
        if args.command == "model":
            from .model import model_command

            return model_command(args.action, args.name, replicas=args.replicas,
                                 fleet_file=args.fleet_file)
        if args.command == "batch":
            from .batch import batch_command

            return batch_command(args)
        if args.command == "mcp":
            from .mcp_serve import mcp_command

            return mcp_command(args)
        return _run(args)
    except ContextError as exc:
        return _fail(args, str(exc), 2)
    except KeyboardInterrupt:
        return _fail(args, "interrupted", 130, stopped_by="interrupt")
    except MemoryError:
        return _fail(args, _too_big(args, "this process ran out of memory"), 1)
    except Exception as exc:  # noqa: BLE001 - one readable line, never a traceback
        return _fail(args, f"internal error: {type(exc).__name__}: {exc}", 1)


def _too_big(args: argparse.Namespace, what: str, size: int | None = None) -> str:
    """The message for a context too large for memory: what ran out, how large the
    context is, and what to do."""
    if size is None:
        size = 0
        for path in getattr(args, "context", None) or ():
            for root, _, files in os.walk(path) if os.path.isdir(path) else [("", [], [path])]:
                for name in files:
                    try:
                        size += os.path.getsize(os.path.join(root, name))
                    except OSError:
                        pass
    given = getattr(args, "memory_limit", None)  # --memory-limit, where the CLI has it
    limit = _size_text(given) if given else _memory_limit()
    walled = getattr(args, "executor", None) != "in-process"
    where = (f"the isolated REPL's memory limit ({limit})" if walled and limit
             else "the memory available")
    raise_it = (f"raise --memory-limit (bytes; the context needs about twice its size "
                f"there: at least {2 * size}), " if hasattr(args, "memory_limit") else "")
    advice = (f"{raise_it}run model code in this process with --executor in-process (no "
              "memory limit), or pass a smaller context" if walled
              else "pass a smaller context")
    return (f"the context ({_size_text(size)}) is too large for {where}: {what}; "
            f"{advice}")


def _memory_limit() -> str | None:
    """The isolated REPL's address-space limit, as text (None: unknown or none)."""
    from ..executors import DEFAULT_MEMORY

    return f"{_size_text(DEFAULT_MEMORY)} of address space" if DEFAULT_MEMORY else None


def _size_text(size: int) -> str:
    """``size`` bytes (or characters) as a short text: ``2.2 GB``, ``512 KB``."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} bytes"


def _context_size(context: Any) -> int:
    """Characters of a loaded context (a text, or a dict of texts)."""
    if isinstance(context, str):
        return len(context)
    if isinstance(context, dict):
        return sum(len(v) for v in context.values() if isinstance(v, str))
    return 0


def _run(args: argparse.Namespace) -> int:
    from ..engine import RLM
    from ..engine.frontends import parse_type
    from ..models import LLMError, is_embedded

    if args.export and not args.export.endswith((".ipynb", ".jsonl")):
        return _fail(args, f"--export needs a path ending in .ipynb or .jsonl, got "
                     f"{args.export}", 2)
    context: Any = load_contexts(args.context) if args.context else None
    printer = None if args.json else StepPrinter(live=sys.stdout.isatty())
    recording = _recording(args.replay) if args.replay else None
    if recording is not None and not args.question:
        question = recording.question
    elif args.question:
        question = args.question
    else:
        return _fail(args, "the question is missing", 2)
    try:
        returns = args.returns or (recording.answer_type if recording else None)
        answer_type = parse_type(returns) if returns else None
    except (ValueError, TypeError) as exc:
        return _fail(args, f"--returns: {exc}", 2)
    rlm = RLM(observer=printer, replay=recording, **config_overrides(args))
    model = rlm.model
    if recording is None and is_embedded(model):
        from .model import prepare_with_progress

        try:
            prepare_with_progress(None if not model or model == "local" else model[6:])
        except Exception as exc:  # noqa: BLE001 - LocalModelError and its integrity subclass
            return _fail(args, str(exc), 1)
    real_stdout = args.real_stdout = sys.stdout
    json_fd = args.json_fd = _json_stdout() if args.json else None
    try:
        try:
            result = rlm.run(question, context=context, output_type=answer_type)
        except LLMError as exc:
            return _fail(args, str(exc), 1)
        except ValueError as exc:  # a setting the run cannot use (--workdir ...)
            return _fail(args, str(exc), 2)
        except MemoryError:
            return _fail(args, _too_big(args, "this process ran out of memory",
                                        _context_size(context)), 1)
        except WorkerError as exc:
            if "memory" in str(exc).lower():
                return _fail(args, _too_big(args, f"the isolated REPL could not take it "
                                            f"({exc})", _context_size(context)), 1)
            return _fail(args, f"the isolated REPL could not start: {exc} (--executor "
                         "in-process runs model code in this process)", 1)
        except Exception as exc:  # noqa: BLE001 - one readable line, never a traceback
            return _fail(args, f"internal error: {type(exc).__name__}: {exc}", 1)
        except KeyboardInterrupt:
            return _fail(args, "interrupted", 130, stopped_by="interrupt")
        finally:
            sys.stdout = real_stdout
            filter_streams()  # threads model code left running stay muted
        try:
            return _report(result, args, json_fd)
        except Exception as exc:  # noqa: BLE001 - the object is owed while fd 1 is stderr
            return _fail(args, f"internal error: {type(exc).__name__}: {exc}", 1)
    finally:
        args.json_fd = args.real_stdout = None
        if json_fd is not None:
            if not getattr(args, "as_command", False):  # the caller's stdout back
                os.dup2(json_fd, 1)
            os.close(json_fd)


def _json_stdout() -> int:
    """With ``--json`` the process's stdout carries the JSON object only: point file
    descriptor 1 (and ``sys.stdout``) at stderr, so what model code writes to it in any
    way (``print``, ``os.write(1, ...)``, a subprocess, a thread left running, an
    ``atexit`` hook) goes there, and return a duplicate of the real stdout for the
    object.  As the ``rlm`` command, descriptor 1 stays on stderr to the end."""
    sys.stdout.flush()
    real = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return real


def _report(result: RLMResult, args: argparse.Namespace, json_fd: int | None = None) -> int:
    """Write ``--export``, print the answer (or, to ``json_fd``, the JSON object); the
    exit code."""
    export_error = _export(result, args) if args.export else None
    if args.json:
        data = result.to_dict() if args.trajectory else result.summary()
        end = _ending(result)  # the one table's words and tone, as every view shows them
        data.update(tone=end.tone, ending=end.kind, ending_words=end.words)
        if args.export and export_error is None:
            data["export"] = args.export
        _write_json(data, args, json_fd)
    else:
        _print_answer(result)
        if result.diverged_at is not None:
            _err(f"the replay diverged at step {result.diverged_at}: its output differs "
                 "from the record's")
        if args.export and export_error is None:
            print(f"{'Log' if args.export.endswith('.jsonl') else 'Notebook'}: {args.export}")
    if export_error is not None:
        _err(export_error)
        return 1
    if result.stopped_by == "error":
        if not args.json:
            _err(result.error or "the run failed")
        return 1
    return 0 if result.answer is not None else 1


def _recording(path: str) -> Any:
    """The record ``--replay`` names.

    Raises:
        ContextError: the file cannot be read or holds no record."""
    from ..engine import load_recording

    try:
        return load_recording(path)
    except (OSError, ValueError) as exc:
        raise ContextError(f"--replay {path}: {exc}") from None


def _export(result: RLMResult, args: argparse.Namespace) -> str | None:
    """Write ``--export``'s notebook (or rlm log, for ``.jsonl``); returns an error
    message, or None when written."""
    from ..export import cli_setup_cells, export_rlm_log, export_run

    try:
        if args.export.endswith(".jsonl"):
            export_rlm_log(result, args.export, max_iterations=args.max_iterations,
                           max_depth=args.max_depth)
        else:
            export_run(result, args.export, setup_cells=cli_setup_cells(args.context))
    except OSError as exc:
        return f"cannot write {args.export}: {exc.strerror or exc}"
    return None


def _ending(result: RLMResult) -> RunEnding:
    """How ``result``'s run ended: the one table's kind, tone and words
    (:func:`~rlm_kernel.engine.answer.sources.run_ending`)."""
    from ..engine.frontends import run_ending

    return run_ending(result.answer is not None, result.stopped_by,
                      getattr(result, "answer_source", None), getattr(result, "votes", None),
                      no_data=not result.variables)


def _print_answer(result: RLMResult) -> None:
    """The answer, then how the run ended in the words every view uses (one line: ``The
    answer was computed by the model's code from your data.``, ``No answer: you
    interrupted the run.``), the error's details, and the totals; secrets redacted."""
    print()
    if result.answer is not None:
        print(redact_text(f"Answer: {result.answer}"))
    print(_ending(result).words)
    if result.answer is None and result.error:
        print(redact_text(f"  {result.error}"))
    print(f"({result.steps} steps, {result.llm_calls} LLM calls, "
          f"{result.prompt_tokens:,}+{result.completion_tokens:,} tokens, "
          f"${result.cost_usd:.4f}, {result.seconds:.1f} s, stopped by {result.stopped_by})")


class StepPrinter(RunObserver):
    """Prints each step as it happens: the code, then a short output (a child run's
    steps indented by its depth); in a candidates run, a line when each candidate
    starts and ends, and the vote at the end.

    Args:
        stream: where to print (default ``sys.stdout``); the "waiting for the model"
            lines go to ``sys.stderr``.
        live: print the top run's replies as the model writes them (dimmed), and then
            not again as the step's code; for a terminal (``rlm run`` sets it when
            ``stream`` is a TTY and ``--json`` is not given).
    """

    OUTPUT_LINES = 12
    DIM, PLAIN = "\x1b[2m", "\x1b[0m"  # ANSI SGR: faint, reset

    def __init__(self, stream: Any = None, *, live: bool = False) -> None:
        self.stream = stream or sys.stdout
        self.live = live
        self._written: set[int] = set()  # steps whose reply was printed as it came
        self._t0 = time.monotonic()

    @staticmethod
    def _indent(event: Event) -> str:
        return "  " * event.depth

    def on_run_started(self, event: RunStarted) -> None:
        """The model and the variables (a child run: its question)."""
        out = self.stream
        if event.depth > 0:
            print(f"{self._indent(event)}↳ sub-run: {event.question[:80]}", file=out,
                  flush=True)
            return
        names = ", ".join(f"{v.name} ({v.type_name})" for v in event.variables) or "none"
        print(f"Model: {model_label(event.model)}   variables: {names}", file=out, flush=True)
        if event.no_data:
            print("No data: the model is told there is none and must answer from its "
                  "own knowledge or computation (give files with --context PATH).",
                  file=out, flush=True)

    def on_model_call(self, event: ModelCall) -> None:
        """A timed "waiting for the model" line, on stderr."""
        print(f"{self._indent(event)}[{time.monotonic() - self._t0:6.1f}s] step "
              f"{event.step}: waiting for the model...", file=sys.stderr, flush=True)

    def on_model_writing(self, event: ModelWriting) -> None:
        """With ``live``: the top run's reply as it is written, dimmed."""
        if not self.live or event.depth > 0:
            return
        out = self.stream
        if event.step not in self._written:
            self._written.add(event.step)
            print(f"── step {event.step} (the model writes) ──", file=out)
        out.write(f"{self.DIM}{event.text}{self.PLAIN}")
        if event.done:
            out.write("\n")
        out.flush()

    def on_step_started(self, event: StepStarted) -> None:
        """The step's first line of reasoning and its code (not again when its reply
        was printed as it came: then only where the step starts)."""
        indent, out = self._indent(event), self.stream
        if event.depth == 0 and event.step in self._written:
            print(f"── step {event.step}: its code runs ──", file=out, flush=True)
            return
        print(f"{indent}── step {event.step} ──", file=out)
        if event.reasoning:
            print(f"{indent}# {event.reasoning.splitlines()[0][:160]}", file=out)
        for line in event.code.splitlines():
            print(f"{indent}  {line}", file=out)
        out.flush()

    def on_step_finished(self, event: StepFinished) -> None:
        """The step's output, its first :attr:`OUTPUT_LINES` lines."""
        indent, out = self._indent(event), self.stream
        lines = event.outcome.output.rstrip("\n").splitlines()
        shown = lines[: self.OUTPUT_LINES]
        for line in shown:
            print(f"{indent}  │ {line[:200]}", file=out)
        if len(lines) > len(shown):
            print(f"{indent}  │ ... ({len(lines) - len(shown)} more lines)", file=out)
        out.flush()

    def on_answer_check(self, event: AnswerCheck) -> None:
        """A held FINAL and why it is held."""
        why = ("no output or variable holds it; the model is sent back to find it "
               "with code" if event.reason == "grounding"
               else "the model checks it against the question")
        print(f"{self._indent(event)}(FINAL {event.answer!r:.80}: {why})", file=self.stream,
              flush=True)

    def on_candidate_started(self, event: CandidateStarted) -> None:
        """``── candidate 2/3 ── (temperature 0.7, seed 2)``."""
        how = (f" (temperature {event.temperature:g}, seed {event.seed})"
               if event.temperature is not None else "")
        print(f"── candidate {event.candidate}/{event.candidates} ──{how}", file=self.stream,
              flush=True)

    def on_candidate_finished(self, event: CandidateFinished) -> None:
        """The candidate's answer, its votes so far, and whether the vote is decided."""
        votes = event.votes
        got = (f"answer {short_answer(event.answer)} ({votes} vote{'s' * (votes != 1)} "
               "so far)" if event.answer is not None else "no answer")
        lead = (f"; a majority is certain: {short_answer(event.leading)}"
                if event.decided else "")
        steps = f"{event.steps} step{'s' * (event.steps != 1)}"
        print(f"   candidate {event.candidate}/{event.candidates}: {got}, stopped by "
              f"{event.stopped_by} after {steps}{lead}", file=self.stream, flush=True)

    def on_run_finished(self, event: RunFinished) -> None:
        """A candidates run's vote, in one line."""
        ran = getattr(event.result, "candidates", None)
        if event.depth == 0 and ran:
            asked = event.candidates if event.candidates is not None else len(ran)
            print(f"Vote ({len(ran)} of {asked} candidates ran): {vote_line(ran)}",
                  file=self.stream, flush=True)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
