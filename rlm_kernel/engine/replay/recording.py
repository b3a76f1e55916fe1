"""A run's model exchanges, recorded as they happen, and replayed without a model.

Every call a run makes (root steps, resamples, the last "answer now" call, ``llm_query``
sub-calls, child runs) passes a :class:`RecordedClient` (one of the wrappers of a run's
clients, :func:`~rlm_kernel.engine.services.compose_client`), which appends one
*exchange* to the run's :class:`Recorder`, in call order::

    {"step": 3, "role": "root" | "final" | "sub", "depth": 0,
     "response": "<the reply text>", "prompt": "<sub-calls only: the request>"}

An MCP tool call made by step code is one exchange too (role ``tool``, appended by
:meth:`Recorder.record_entry`): ``{"step", "role": "tool", "depth", "server", "tool",
"arguments", "response" | "error", "seconds"}``; replay and a re-run exported notebook
answer the call from it (:mod:`rlm_kernel.engine.session.mcp_tools`).

``step`` is the top-level step during which the call was made.  Sizes are capped:
a response at :data:`RESPONSE_CHARS` characters, a sub-call's prompt at
:data:`PROMPT_CHARS` (a longer reply replays cut, and its step is then likely to
diverge).  Secrets are redacted as in step output.

:class:`ReplayModel` answers a run from such a record instead of a model: root-role
calls take the recorded root replies in order; a sub-call takes the first unused
recorded sub-call with the same prompt.  :func:`load_recording` reads a record from an
:class:`RLMResult`, its ``to_dict()`` JSON, or an exported notebook.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...executors import Redactor
from ...models import (
    CallOptions,
    ClientWrapper,
    Completion,
    LanguageModel,
    LLMCall,
    LLMError,
    UsageLedger,
)

__all__ = ["PROMPT_CHARS", "RESPONSE_CHARS", "RecordedClient", "RecordedFirst", "Recorder",
           "Recording", "ReplayModel", "load_recording", "output_digest", "step_exchanges"]

RESPONSE_CHARS = 50_000  # characters of a recorded reply
PROMPT_CHARS = 10_000  # characters of a recorded sub-call prompt
_ROOT_ROLES = ("root", "final")


def output_digest(text: str) -> str:
    """SHA-256 (hex) of a step's text output: what replay compares to find divergence."""
    return hashlib.sha256(text.encode("utf-8", "backslashreplace")).hexdigest()


def _request_text(messages: list[dict[str, str]]) -> str:
    """The last user message of a call (a sub-call's prompt)."""
    for message in reversed(messages):
        if message.get("role") == "user":
            return str(message.get("content", ""))
    return ""


class Recorder:
    """The exchanges of one run tree (children share their parent's recorder; each
    candidate of a candidates run has its own).

    Attributes:
        exchanges: the exchanges in call order (see the module docstring).
        root_prompts: the messages of each top-level root-model call (``root`` and
            ``final`` roles at depth 0), in call order.
        step: the top-level step in progress, from 1 (set by the loop); recorded on
            every exchange.
    """

    def __init__(self) -> None:
        self.exchanges: list[dict[str, Any]] = []
        self.root_prompts: list[list[dict[str, str]]] = []  # top-level root calls' messages
        self.step = 0  # the top-level step in progress (set by the loop)
        self._redact = Redactor()
        self._lock = threading.Lock()

    def record(self, role: str, messages: list[dict[str, str]], text: str,
               depth: int) -> None:
        """Append one exchange (``role`` as the client was called with)."""
        entry: dict[str, Any] = {"step": self.step, "role": role, "depth": depth,
                                 "response": self._redact(text)[:RESPONSE_CHARS]}
        if role not in _ROOT_ROLES:
            entry["prompt"] = self._redact(_request_text(messages))[:PROMPT_CHARS]
        with self._lock:
            self.exchanges.append(entry)
            if role in _ROOT_ROLES and depth == 0:
                self.root_prompts.append(list(messages))


    def record_entry(self, entry: dict[str, Any]) -> None:
        """Append an exchange that is not a model call (an MCP tool call, role ``tool``:
        ``server``, ``tool``, ``arguments``, ``response`` or ``error``), its ``step`` the
        top-level step in progress."""
        with self._lock:
            self.exchanges.append({"step": self.step, **entry})


class RecordedClient(ClientWrapper):
    """A :class:`~rlm_kernel.models.LanguageModel` whose every answered call is appended
    to a :class:`Recorder` (its role, the messages as sent, the reply text, the client's
    ``depth``); recording only.  A call that fails, or whose reply has no text, is not
    recorded.

    Args:
        client: the model client to record.
        recorder: where the exchanges go.
    """

    def __init__(self, client: LanguageModel, recorder: Recorder) -> None:
        super().__init__(client)
        self.recorder = recorder

    def call(self, messages: list[dict[str, str]], options: CallOptions) -> Completion:
        """The wrapped client's call, then its exchange recorded; see
        ``LanguageModel.complete``.

        Raises:
            LLMError: the call failed (nothing is recorded).
        """
        completion = super().call(messages, options)
        text = getattr(completion, "text", None)
        if isinstance(text, str):
            self.recorder.record(options.role, messages, text, options.call_depth(self.depth))
        return completion


@dataclass
class Recording:
    """What a replay needs from a recorded run.

    Attributes:
        question: the recorded task.
        exchanges: the run's exchanges in call order (see the module docstring).
        outputs: per history entry (index 0 = step 1), the output's
            :func:`output_digest`, or None where unknown.
        model: the recorded root model string.
        answer_type: the answer type the run asked for, as written (``"int"``), or
            None; a replay asks for it again unless told otherwise.
    """

    question: str = ""
    exchanges: list[dict[str, Any]] = field(default_factory=list)
    outputs: list[str | None] = field(default_factory=list)
    model: str = ""
    answer_type: str | None = None

    def diverges(self, index: int, output: str) -> bool:
        """True when history entry ``index``'s output differs from the record's."""
        recorded = self.outputs[index] if index < len(self.outputs) else None
        return recorded is not None and recorded != output_digest(output)


class ReplayModel:
    """A :class:`~rlm_kernel.models.LanguageModel` that answers from a :class:`Recording`.

    Calls cost nothing and are recorded in the ledger under ``replay/<model>``.

    Raises (from :meth:`complete`):
        LLMError: the record has no reply for this call (more root turns than
            recorded, or a sub-call prompt it never saw).
    """

    context_window: int | None = None
    max_tokens: int | None = None

    def __init__(self, recording: Recording) -> None:
        self.recording = recording
        self.model = f"replay/{recording.model or 'model'}"
        self.ledger: UsageLedger | None = None
        self.depth = 0
        self._root = [e for e in recording.exchanges if e.get("role") in _ROOT_ROLES]
        self._subs = [e for e in recording.exchanges
                      if e.get("role") not in (*_ROOT_ROLES, "tool")]
        self._used: set[int] = set()
        self._lock = threading.Lock()

    def check(self) -> None:
        """Nothing to check: no provider is called."""

    def complete(self, messages: list[dict[str, str]], **options: Any) -> Completion:
        """The recorded reply for this call (see the class docstring); of the options
        (:class:`~rlm_kernel.models.CallOptions`) only ``role`` is read (and ``stream``
        gets the whole reply at once).

        Raises:
            LLMError: the record has no reply for this call.
            TypeError: an unknown option."""
        opts = CallOptions(**options)
        role = opts.role
        with self._lock:
            text = self._next_root() if role in _ROOT_ROLES else \
                self._matching_sub(_request_text(messages))
        call = LLMCall(model=self.model, role=role, depth=opts.call_depth(self.depth))
        if self.ledger is not None:
            self.ledger.record(call)
        if opts.stream is not None and text:  # the recorded reply, written at once
            opts.stream(text)
        return Completion(text=text, call=call)

    def _next_root(self) -> str:
        if not self._root:
            raise LLMError("replay: the record has no more root-model replies "
                           "(the run went further than the recorded one)")
        return str(self._root.pop(0)["response"])

    def _matching_sub(self, prompt: str) -> str:
        key = Redactor()(prompt)[:PROMPT_CHARS]
        for i, entry in enumerate(self._subs):
            if i not in self._used and entry.get("prompt") == key:
                self._used.add(i)
                return str(entry["response"])
        raise LLMError(f"replay: no recorded sub-call for the prompt {prompt[:80]!r}")


class RecordedFirst:
    """A sub model for cells run outside any run (a re-run exported notebook): a call
    the record holds is answered from it; any other goes to the live model, built on
    first need by ``live()``.  So an unedited notebook re-runs with no model at all."""

    context_window: int | None = None
    max_tokens: int | None = None

    def __init__(self, exchanges: list[dict[str, Any]], live: Any) -> None:
        self._replay = ReplayModel(Recording(exchanges=list(exchanges)))
        self._live_factory = live
        self._live: Any = None
        self.model = self._replay.model
        self.ledger: UsageLedger | None = None
        self.depth = 0

    def check(self) -> None:
        """Nothing to check before the first call."""

    def complete(self, messages: list[dict[str, str]], **kwargs: Any) -> Completion:
        """The recorded reply if there is one, else the live model's."""
        self._replay.ledger = self.ledger
        try:
            return self._replay.complete(messages, **kwargs)
        except LLMError:
            if self._live is None:
                self._live = self._live_factory()
            self._live.ledger, self._live.depth = self.ledger, self.depth
            return self._live.complete(messages, **kwargs)


def step_exchanges(exchanges: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The exchanges made by step code (sub-calls and child runs): what cells re-run
    outside a run ask for."""
    return [e for e in exchanges if e.get("role") not in _ROOT_ROLES or e.get("depth", 0) > 0]


def load_recording(source: Any) -> Recording:
    """A :class:`Recording` from an :class:`RLMResult`, a ``to_dict()`` mapping, a
    ``.json`` file of one (``rlm run --json --trajectory``), or an exported ``.ipynb``
    (the last run in it).

    Raises:
        ValueError: the source holds no recorded exchanges.
        OSError: the file cannot be read.
    """
    if isinstance(source, Recording):
        return source
    if isinstance(source, (str, Path)):
        path = Path(source).expanduser()
        data = json.loads(path.read_text(encoding="utf-8"))
        rec = _from_notebook(data) if path.suffix == ".ipynb" else _from_dict(data)
    elif isinstance(source, dict):
        rec = _from_dict(source)
    else:  # an RLMResult
        rec = Recording(question=source.question, exchanges=list(source.exchanges),
                        outputs=[output_digest(e.output) for e in source.history],
                        model=source.model, answer_type=source.answer_type)
    if not rec.exchanges:
        raise ValueError("no recorded model exchanges in this record (made before "
                         "rlm-kernel recorded them?)")
    return rec


def _from_dict(data: dict[str, Any]) -> Recording:
    return Recording(question=data.get("question", ""),
                     exchanges=list(data.get("exchanges", [])),
                     outputs=[output_digest(e.get("output", ""))
                              for e in data.get("trajectory", [])],
                     model=data.get("model", ""), answer_type=data.get("answer_type"))


def _from_notebook(nb: dict[str, Any]) -> Recording:
    """The last run of an exported (or live) notebook: its cells' ``metadata.rlm``.  Of
    a live candidates run, the chosen candidate's cells (its summary cell, role
    ``candidates``, names it in ``chosen``; without one, the last candidate's)."""
    cells = [c for c in nb.get("cells", []) if isinstance(c.get("metadata", {}).get("rlm"), dict)]
    runs = [c["metadata"]["rlm"].get("run_id") for c in cells]
    last = runs[-1] if runs else None
    mine = [c["metadata"]["rlm"] for c in cells if c["metadata"]["rlm"].get("run_id") == last]
    made_by = [m["candidate"] for m in mine if m.get("candidate") is not None]
    chosen = next((m.get("chosen") for m in mine if m.get("role") == "candidates"),
                  made_by[-1] if made_by else None)
    exchanges: list[dict[str, Any]] = []
    outputs: list[str | None] = []
    for cell in cells:
        meta = cell["metadata"]["rlm"]
        if meta.get("run_id") != last or meta.get("candidate", chosen) != chosen:
            continue
        exchanges += list(meta.get("exchanges", []))
        if meta.get("role") == "step":
            outputs.append(meta.get("output_sha256"))
    run = nb.get("metadata", {}).get("rlm", {})
    return Recording(question=run.get("question", ""), exchanges=exchanges, outputs=outputs,
                     model=run.get("model", ""), answer_type=run.get("answer_type"))
