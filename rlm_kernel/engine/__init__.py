"""The RLM loop, with nothing of Jupyter in it; this module is its one public surface.

The layers above (``export``, ``cli``, ``jupyter``) import the engine from here only
(an import-linter contract in ``pyproject.toml`` holds them to it).  Inside:

- ``rlm`` (:class:`RLM`, the facade: clients, services, the run) and ``run``
  (:class:`~.run.Run`: one run, a step top to bottom: prompt, root-model reply, code,
  history, termination); ``step`` (a reply's parts and the step record);
  ``repl_functions`` (what model code calls: ``llm_query``, ``FINAL``, the context
  helpers); ``repetition`` (a step that repeats an earlier one);
- ``prompts`` (every text the model reads), ``config`` (:class:`RLMConfig`, the one
  source of settings) and ``options`` (the same settings as command-line options);
- ``services`` (what a run shares with its child runs and candidates: settings,
  clients, ledger, budget guard, recorder, observer; a run's model clients composed in
  one place), ``budget`` (limits held by the host), ``events`` (what observers see),
  ``result`` (:class:`RLMResult`); ``mapping`` (many independent runs on a
  ``concurrent.futures`` executor: :meth:`RLM.map`, ``rlm batch``);
- ``answer/`` (the answer's text, typed answers, grounding, answer sources, the vote),
  ``strategies/`` (candidates, ``rlm_query``'s child runs), ``replay/`` (recording,
  resume), ``session/`` (task terms, user tools, the conversation, warm start).

The engine reaches a model only through :func:`rlm_kernel.models.make_client`
and the :class:`~rlm_kernel.models.LanguageModel` protocol, and code only through
an :class:`~rlm_kernel.executors.Executor`; importing it loads no Jupyter module
and no litellm.
"""

from __future__ import annotations

from .answer.sources import (
    ANSWER_SOURCE_KINDS,
    STOP_REASONS,
    TONES,
    AnswerSource,
    RunEnding,
    how_reached,
    is_plain,
    run_ending,
)
from .answer.text import answer_text, describe_variable
from .answer.types import parse_type
from .config import RLMConfig, Setting, settings
from .events import (
    AnswerCheck,
    CandidateFinished,
    CandidateStarted,
    Event,
    ModelCall,
    Observer,
    RunFinished,
    RunObserver,
    RunStarted,
    StepFinished,
    StepNotice,
    StepOutput,
    StepStarted,
    SubCall,
    Totals,
)
from .mapping import (
    CLUSTER_EXTRA,
    ClusterMissing,
    ContextRef,
    load_context,
    local_dask_executor,
    map_runs,
    plain_data,
    run_task,
    sendable,
    worker_name,
)
from .options import add_setting_options, config_overrides, non_empty, positive_int
from .repetition import without_comments
from .repl_functions import RESERVED_NAMES, SESSION_NAMES, session_functions, user_variables
from .replay.recording import load_recording, output_digest, step_exchanges
from .replay.resume import Continuation
from .result import ANSWER_SOURCES, RLMResult
from .rlm import RLM
from .session.conversation import HISTORY_NAME, Conversation
from .session.task import check_tools, describe_tool
from .session.warmup import prewarm
from .step import SIGNAL_NAMES, TRACEBACK_LINE, step_source
from .strategies.candidates import short_answer, vote_line

__all__ = [
    # running
    "RLM", "RLMConfig", "RLMResult", "Continuation", "Conversation", "prewarm",
    # many runs at once (RLM.map, rlm batch)
    "CLUSTER_EXTRA", "ClusterMissing", "ContextRef", "load_context", "local_dask_executor", "map_runs",
    "plain_data", "run_task", "sendable", "worker_name",
    # settings as options
    "Setting", "settings", "add_setting_options", "config_overrides", "non_empty",
    "positive_int",
    # what observers see
    "Event", "Observer", "RunObserver", "Totals", "RunStarted", "ModelCall", "StepStarted",
    "StepOutput", "SubCall", "StepNotice", "StepFinished", "AnswerCheck", "RunFinished",
    "CandidateStarted", "CandidateFinished",
    # answers
    "ANSWER_SOURCES", "ANSWER_SOURCE_KINDS", "AnswerSource", "RunEnding", "STOP_REASONS",
    "TONES", "answer_text", "run_ending",
    "describe_variable", "how_reached", "is_plain", "parse_type",
    "short_answer", "vote_line",
    # the REPL namespace and the task's terms
    "HISTORY_NAME", "RESERVED_NAMES", "SESSION_NAMES", "SIGNAL_NAMES", "check_tools", "describe_tool",
    "session_functions", "user_variables",
    # steps and replay
    "TRACEBACK_LINE", "load_recording", "output_digest", "step_exchanges", "step_source",
    # repetition
    "without_comments",
]

