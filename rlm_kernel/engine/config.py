"""Settings of a run: one immutable dataclass, the one source of every setting.

Each field carries its help text, its lower bound and, for the ones a user sets per
run, its command-line flag (``dataclasses.field(metadata=...)``).  The ``rlm``
command's options, the ``%rlm`` magic's options and the ``c.RLM`` traitlets of the
kernel are all built from :func:`settings`; ``None`` means "no limit" everywhere.
"""

from __future__ import annotations

import functools
import math
import os
from dataclasses import MISSING, dataclass, field, fields, replace
from typing import Any

from ..executors import passed_names
from .prompts import STOP_SEQUENCES

__all__ = ["EMBEDDED_STEP_SECONDS", "PROVIDER_STEP_SECONDS", "RLMConfig", "Setting",
           "settings"]


def _opt(default: Any, help: str, *, low: float | None = None, above: bool = False,
         high: float | None = None, flag: str | None = None,
         choices: tuple[str, ...] | None = None) -> Any:
    """A config field: ``low`` is the least value allowed (``above``: values must be
    more than it), ``high`` the most; ``flag`` is its option in ``rlm run`` and
    ``%rlm``."""
    return field(default=default, metadata={"help": help, "low": low, "above": above,
                                            "high": high, "choices": choices,
                                            "flag": flag})


MAX_STEP_SECONDS = 1_000_000.0
"""The longest step time limit accepted (seconds, about 11.5 days): the time limit's
timers cannot hold an unbounded one (``inf``, ``1e300``); None is no limit."""
EMBEDDED_STEP_SECONDS = 120.0
"""A step's share of the embedded model's default time budget (``auto_max_seconds``):
twice its slowest step at its measured speed on 2 idle cores (~20 tokens/s written,
~60 read: a full 1,024-token reply, about 50 s, plus reading the step's output, 3,000
characters, about 15 s).  Its mean step is much shorter (about 6 s on the eval's dev
split, idle), but cores shared with other work make every step slower: on the dev
split with four clients of one model server a 2-step task took 485 s and a 3-step one
was cut at 568 s by a 60-s share.  The budget is a backstop; a run that loops is
stopped sooner by ``repeat_limit``."""
PROVIDER_STEP_SECONDS = 30.0
"""A step's share of a provider model's default time budget: a chat model's reply takes
seconds, a reasoning model's tens of seconds."""


@dataclass(frozen=True, slots=True)
class RLMConfig:
    """Limits and knobs of the RLM loop.  Durations are seconds, costs US dollars,
    token counts prompt plus completion; ``None`` = no limit.

    Attributes: see :func:`settings` (one line per field, also in ``rlm run --help``
    and ``jupyter rlm --help-all``).

    Raises:
        ValueError: (on construction or :meth:`replace`) a value below its bound.
    """

    model: str | None = _opt(
        None, "Root model: a litellm model string (openai/gpt-4.1-mini ...); None or "
        "empty: $RLM_MODEL, else the embedded local model.", flag="--model")
    sub_model: str | None = _opt(
        None, "Model for llm_query, a litellm model string; None or empty: "
        "$RLM_SUB_MODEL, else the root model.", flag="--sub-model")
    router: str | None = _opt(
        None, "Model fleet: the path of a litellm Router file in the litellm proxy's "
        "format (model_list: model_name, litellm_params: model, api_base, api_key, rpm, "
        "tpm ..., model_info: id; optional router_settings: routing_strategy, "
        "num_retries, fallbacks, cooldown_time ...); model and sub_model then name a "
        "model_name of it, and every call goes through one Router (spread over its "
        "deployments, retried, failed over, within rpm/tpm).  The Python API also takes "
        "the parsed dict.  None: models are called directly.", flag="--router")
    mcp_servers: str | None = _opt(
        None, "MCP servers whose tools model code may call: the path of a JSON file in the "
        "mcpServers format the common MCP clients share ({\"mcpServers\": {\"git\": "
        "{\"command\": \"uvx\", \"args\": [\"mcp-server-git\"]}}}; an entry with a url "
        "is a streamable HTTP server).  Each server's tools are functions grouped under "
        "its name (git.git_log(repo_path=...)), called by the host.  The servers start "
        "once per process and close at its exit.  The Python API also takes the parsed "
        "dict.  None: none.", flag="--mcp-servers")
    max_tool_calls: int | None = _opt(
        None, "Budget: MCP tool calls per run (then a call raises MCPToolError and the "
        "run goes on).", low=0, flag="--max-tool-calls")
    tool_timeout: float = _opt(
        60.0, "Seconds one MCP tool call may take (and no more than the run's time "
        "left); then it raises MCPToolError.", low=0, above=True, high=MAX_STEP_SECONDS,
        flag="--tool-timeout")
    keep_alive: float | None = _opt(
        None, "Seconds the embedded model's server, when this process starts it, stays up "
        "after its last request: it outlives this process and every process (kernel, "
        "rlm run, batch workers) shares it, so the next command finds it warm; 0: it "
        "stops when this process exits.  None: $RLM_KEEP_ALIVE, else 300.  A running "
        "server is reused as it is.", low=0, flag="--keep-alive")
    max_iterations: int = _opt(
        12, "Steps (root-model calls that run code) before the last 'answer now' call.",
        low=1, flag="--max-iterations")
    max_depth: int = _opt(
        1, "Deepest child run rlm_query may start (0: it behaves like llm_query).",
        low=0, flag="--max-depth")
    child_max_iterations: int = _opt(6, "Step limit of child runs.", low=1)
    max_llm_calls: int | None = _opt(
        None, "Budget: model requests per run, root and sub-calls together.",
        low=1, flag="--max-llm-calls")
    max_tokens: int | None = _opt(
        None, "Budget: prompt + completion tokens per run.", low=1, flag="--max-tokens")
    max_cost_usd: float | None = _opt(
        None, "Budget: US dollars per run.", low=0, above=True, flag="--max-cost")
    max_seconds: float | None = _opt(
        None, "Budget: wall-clock seconds per run.  None: with auto_max_seconds, the time "
        "budget that fits the model in use (see auto_max_seconds); else no limit.",
        low=0, above=True, flag="--max-seconds")
    auto_max_seconds: bool = _opt(
        True, "When max_seconds is None, give each task a time budget that fits the model: "
        f"the embedded local model {EMBEDDED_STEP_SECONDS:g} s a step, a provider's model "
        f"{PROVIDER_STEP_SECONDS:g} s a step, times max_iterations + 1 and the number of "
        "candidates (12 steps: "
        f"{13 * EMBEDDED_STEP_SECONDS:g} s and {13 * PROVIDER_STEP_SECONDS:g} s).  A "
        "max_seconds you set wins; off: no time limit unless max_seconds is set.",
        flag="--auto-max-seconds")
    step_timeout: float | None = _opt(
        120.0, "Seconds one step's code may run before it is stopped.",
        low=0, above=True, high=MAX_STEP_SECONDS, flag="--step-timeout")
    max_output_chars: int = _opt(
        3000, "Characters of a step's output shown to the model (the user sees all).",
        low=1)
    preview_chars: int = _opt(500, "Characters of each variable's preview in the prompt.",
                              low=0)
    history_window: int = _opt(8, "Most recent steps kept in the prompt.", low=1)
    history_code: bool = _opt(
        False, "Follow-ups: tell the model the code of the earlier tasks' steps, not only "
        "their questions, answers and the variables they left (off: the code stays in "
        "rlm_history; a small model shown it tends to re-run it).",
        flag="--history-code")
    termination: str = _opt("final_pattern",
                            "Termination policy, by its PolicyRegistry name.")
    termination_config: dict[str, Any] | None = _opt(
        None, "Configuration passed to the termination policy.")
    max_concurrency: int = _opt(16, "Parallel requests of llm_query_batched.", low=1)
    max_consecutive_errors: int | None = _opt(
        5, "Failed or code-less steps in a row that end the run (stopped_by 'error').",
        low=1)
    temperature: float = _opt(0.0, "Sampling temperature of every call.", low=0)
    max_step_tokens: int | None = _opt(
        1024, "Completion cap in tokens of a root-model step (None: provider default).",
        low=1)
    max_sub_tokens: int | None = _opt(
        1024, "Completion cap in tokens of a sub-call (None: provider default).", low=1)
    cut_after_first_block: bool = _opt(
        True, "Run only the first code block of a reply and drop what follows (small "
        "models write the next turn themselves).")
    use_stop_sequences: bool = _opt(
        True, "Send stop sequences that end a reply at its first closing fence.")
    stream_replies: bool = _opt(
        True, "Stream the root model's replies: each step's reply is shown as it is "
        "written, and a stop ends the model's request (its server stops generating).")
    protect_inputs: bool = _opt(
        True, "Restore the run's input variables (context ...) if model code rebinds or "
        "deletes them, with a warning to the model.")
    context_window: int | None = _opt(
        None, "The root model's context window in tokens, to keep the prompt inside it "
        "(None: ask the client).", low=1)
    restate_question: bool = _opt(
        True, "Repeat the question in every step's message, so the form of the answer "
        "it asks for stays in view.")
    verify_answer: bool = _opt(
        False, "Before a run's first FINAL is accepted, show the model the question "
        "beside its answer to confirm or correct it (one extra step).",
        flag="--verify-answer")
    ground_answer: bool = _opt(
        True, "Before a run's first FINAL is accepted, check that its value came from "
        "executed code: a value typed into FINAL that no step output and no variable "
        "holds sends the model back once to find it with code (one extra step; with "
        "verify_answer, still one look back in all).", flag="--ground-answer")
    cache: str | None = _opt(
        "memory", "Sub-call cache (litellm's): 'memory' (this process), 'disk' (kept "
        "across sessions) or None (off); identical llm_query calls are answered from it "
        "at no cost; the root model's turns never are.", choices=("memory", "disk"))
    callbacks: str | None = _opt(
        None, "Tracing: comma-separated callback names; 'otel' records OpenTelemetry spans "
        "of the run, its steps and calls (GenAI conventions); other names turn on litellm's "
        "callbacks of that name (e.g. 'langfuse').", flag="--callbacks")
    resample_temperature: float | None = _opt(
        0.7, "The step after a repetition (see repeat_limit) is sampled at this "
        "temperature, with the repetition shown to the model (None or 0: the run's own "
        "temperature).", low=0)
    repeat_limit: int | None = _opt(
        2, "Times a step may do the same thing (the same code once comments, layout and "
        "the names it binds are set aside, the same output, or the same error) before it "
        "is a repetition: the first repetition is shown to the model and the next step "
        "sampled differently; the next one ends the run (stopped_by 'stuck') with its best "
        "answer so far from one 'answer now' call.  None: never.", low=2,
        flag="--repeat-limit")
    candidates: int = _opt(
        1, "Independent trajectories of the task; the answer is the one most of them "
        "agree on (values normalised: 42 == '42.0', case, order of a set), ties broken "
        "by fewer failed steps, then higher RLM_CONFIDENCE, then the earlier candidate; "
        "it stops once a majority is certain.  Budgets cover all candidates together; "
        "the namespace ends as if only the chosen one had run.  1: a single run.",
        low=1, flag="--candidates")
    candidates_early_stop: bool = _opt(
        True, "Stop running candidates once the leading answer cannot be outvoted (off: "
        "all N run, e.g. to measure how often any of them is right).",
        flag="--candidates-early-stop")
    candidate_temperature: float = _opt(
        0.7, "Sampling temperature of the root model in candidates 2..N (each with its "
        "own seed); candidate 1 samples at temperature, as a single run does.", low=0,
        flag="--candidate-temperature")
    executor: str | None = _opt(
        None, "Where model code runs: 'isolated' (a child process behind operating-system "
        "limits: time, memory, processes, no network; rlm_kernel.executors.isolated) or "
        "'in-process' (exec in this process).  None: the caller's default, isolated for "
        "rlm run and RLM.run, the live namespace for the rlm kernel and magic, the kind "
        "of its parent's for an rlm_query child run (rlm_kernel.executors.executor_for).",
        choices=("isolated", "in-process"), flag="--executor")
    memory_limit: int | None = _opt(
        4 << 30, "Memory of the isolated executor's sandbox in bytes (a cgroup where the "
        "host may make one, else a watch of its resident memory; and the address space "
        "of each of its processes).  A context needs about twice its size there.  None: "
        "no limit.", low=64 << 20, flag="--memory-limit")
    workdir: str | None = _opt(
        None, "Working folder: model code runs with it as its current folder and gets "
        "ls, read, grep, apply_patch, bash and run_tests confined to it (isolated: nothing outside "
        "it is writable); None: no folder helpers.", flag="--workdir")
    test_command: str | None = _opt(
        None, "The command run_tests() runs in the working folder (a command line, e.g. "
        "'pytest -q tests'); None: pytest when the folder has tests or a pytest "
        "configuration, else 'make test'.", flag="--test-command")
    test_timeout: float = _opt(
        300.0, "Seconds a run_tests() run may take; then its process group is killed.",
        low=0.1, flag="--test-timeout")
    pass_env: tuple[str, ...] = _opt(
        (), "Environment variables passed to model code by name (['DB_HOST', 'DB_USER'], "
        "or one text 'DB_HOST,DB_USER' split at commas and spaces): the isolated "
        "executor's worker and a working folder's commands get only PATH, the locale, "
        "the interpreter's PYTHON* and HOME=/tmp, plus these (and those the environment "
        "names in $RLM_PASS_ENV).  A passed value whose name looks secret, or that is a "
        "known key, is still redacted in every output.", flag="--pass-env")

    def __post_init__(self) -> None:
        for s in settings():
            s.check(getattr(self, s.name))
            if s.kind == "list":  # one tuple of names, whichever form was given
                object.__setattr__(self, s.name, tuple(passed_names(getattr(self, s.name),
                                                                    environ={})))

    def replace(self, **changes: Any) -> RLMConfig:
        """A copy with ``changes`` applied; ``None`` sets an optional setting to none
        (no limit, no cache ...).

        Raises:
            TypeError: a name is not a field of the config.
            ValueError: a value below its bound (e.g. ``max_iterations`` < 1), or None
                for a setting that needs a value.
        """
        names = {f.name for f in fields(self)}
        unknown = sorted(set(changes) - names)
        if unknown:
            raise TypeError(f"unknown RLM setting(s): {', '.join(unknown)}")
        return replace(self, **changes)

    def models(self) -> tuple[str | None, str | None]:
        """The root and sub model to use: the one place their fallbacks are read.

        Returns:
            ``(model, sub_model)``: ``model``, else ``$RLM_MODEL``; ``sub_model``, else
            ``$RLM_SUB_MODEL``, else the root model; None stands for the embedded local
            model (empty strings count as unset).
        """
        model = self.model or os.environ.get("RLM_MODEL") or None
        return model, self.sub_model or os.environ.get("RLM_SUB_MODEL") or model

    def time_budget(self, embedded: bool) -> float | None:
        """The run's wall-clock budget in seconds: ``max_seconds`` when set; else, with
        ``auto_max_seconds``, a step's share (:data:`EMBEDDED_STEP_SECONDS` for the
        embedded model, :data:`PROVIDER_STEP_SECONDS` for a provider's) times
        ``max_iterations + 1`` (the last "answer now" call) and ``candidates``; else
        None (no limit).

        Args:
            embedded: the root model is the embedded local one.
        """
        if self.max_seconds is not None or not self.auto_max_seconds:
            return self.max_seconds
        step = EMBEDDED_STEP_SECONDS if embedded else PROVIDER_STEP_SECONDS
        return step * (self.max_iterations + 1) * self.candidates

    def isolated_options(self) -> dict[str, Any]:
        """The keyword arguments of an isolated executor that these settings give
        (:class:`~rlm_kernel.executors.isolated.IsolatedExecutor`): ``memory_limit``
        (bytes) and ``pass_env`` (the names of the variables passed to model code)."""
        return {"memory_limit": self.memory_limit, "pass_env": self.pass_env}

    def stop_sequences(self) -> list[str] | None:
        """The stop sequences to send with root-model calls, or None."""
        return list(STOP_SEQUENCES) if self.use_stop_sequences else None


@dataclass(frozen=True)
class Setting:
    """One field of :class:`RLMConfig`, as the CLI, the magic and traitlets see it.

    Attributes:
        name: the field name (``max_llm_calls``).
        kind: ``int``, ``float``, ``bool``, ``str``, ``dict`` or ``list`` (names: a
            list or tuple of them, or one text of them separated by commas or spaces,
            kept as a tuple).
        optional: ``None`` is allowed (no limit / not set).
        default: the default value.
        help: one line for ``--help``.
        low / above: the least value (``above``: values must be more than ``low``).
        flag: the per-run option (``--max-llm-calls``) or None.
        choices: the values a text setting may take besides None, or None (any text).
        high: the most a number may be, or None (any finite number).
    """

    name: str
    kind: str
    optional: bool
    default: Any
    help: str
    low: float | None
    above: bool
    flag: str | None
    choices: tuple[str, ...] | None = None
    high: float | None = None

    def check(self, value: Any) -> None:
        """Raise ValueError if ``value`` is out of bounds, not finite (``inf``: use
        None for no limit), not one of ``choices`` (None passes if optional) or, for a
        ``list`` setting, holds something that is not the name of an environment
        variable."""
        if self.kind == "list" and value is not None:
            passed_names(value, environ={})  # raises ValueError naming the bad one
            return
        if value is None:
            if not self.optional:
                raise ValueError(f"{self.name} cannot be None")
            return
        if self.choices is not None and value not in self.choices:
            raise ValueError(f"{self.name} must be one of {', '.join(self.choices)} or None, "
                             f"got {value!r}")
        if self.low is None or self.kind not in ("int", "float"):
            return
        if isinstance(value, float) and math.isnan(value):
            raise ValueError(f"{self.name} must be a number, got nan")
        if value < self.low or (self.above and value == self.low) or \
                (self.high is not None and value > self.high):
            raise ValueError(f"{self.name} must be {self.bound()}, got {value!r}")
        if isinstance(value, float) and math.isinf(value):
            raise ValueError(f"{self.name} must be a finite number (None: no limit), "
                             f"got {value!r}")

    def bound(self) -> str:
        """The bound in words: ``at least 1`` / ``more than 0 and at most 1e+06``
        (``or None``)."""
        text = f"{'more than' if self.above else 'at least'} {self.low:g}"
        text += f" and at most {self.high:g}" if self.high is not None else ""
        return text + (" (or None: no limit)" if self.optional else "")


_KINDS = {"int": "int", "float": "float", "bool": "bool", "str": "str",
          "dict[str, Any]": "dict", "tuple[str, ...]": "list"}


@functools.cache
def settings() -> tuple[Setting, ...]:
    """Every field of :class:`RLMConfig` with its type, default, help, bound and flag,
    in declaration order."""
    out = []
    for f in fields(RLMConfig):
        annotation = str(f.type)
        optional = annotation.endswith("| None")
        kind = _KINDS[annotation.removesuffix("| None").strip()]
        default = None if f.default is MISSING else f.default
        meta = f.metadata
        out.append(Setting(f.name, kind, optional, default, meta["help"], meta["low"],
                           meta["above"], meta["flag"], meta["choices"], meta["high"]))
    return tuple(out)
