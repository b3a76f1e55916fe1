"""What the front ends (``cli``, ``jupyter``, ``export``, ``batch``) need of the engine
beyond the user's API (:mod:`rlm_kernel.engine`): the events they draw, how a run ended
in words and tones, the settings as command-line options, the REPL namespace's names and
helpers, a step's record and its replay, the answer's text and type.

The one module of the engine a layer above imports besides the engine's ``__init__``
(an import-linter contract in ``pyproject.toml`` holds them to it), so the engine's
modules can move and split without touching the front ends.  Users import
:mod:`rlm_kernel.engine`; what is here may change between releases.
"""

from __future__ import annotations

from .answer.nesting import MAX_DEPTH
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
from .answer.types import as_answer_type, parse_type
from .config import settings
from .events import (
    AnswerCheck,
    CandidateFinished,
    CandidateStarted,
    ModelCall,
    ModelWriting,
    RunFinished,
    RunStarted,
    StepFinished,
    StepNotice,
    StepOutput,
    StepStarted,
    SubCall,
    Totals,
)
from .names import SESSION_NAMES, user_variables
from .options import add_setting_options, config_overrides, non_empty, positive_int
from .repl_functions import session_functions
from .replay.recording import output_digest, step_exchanges
from .result import ANSWER_SOURCES, child_runs
from .session.conversation import HISTORY_NAME
from .session.task import check_tools, describe_tool
from .session.warmup import prewarm
from .step import SIGNAL_NAMES, TRACEBACK_LINE, step_source, writing_source
from .strategies.candidates import short_answer, vote_line

__all__ = [
    # what observers see, beyond Event and RunObserver
    "AnswerCheck", "CandidateFinished", "CandidateStarted", "ModelCall", "ModelWriting",
    "RunFinished",
    "RunStarted", "StepFinished", "StepNotice", "StepOutput", "StepStarted", "SubCall",
    "Totals",
    # a sub-agent's run as its parent keeps it
    "child_runs",
    # how a run ended, the answer's text and type
    "ANSWER_SOURCES", "ANSWER_SOURCE_KINDS", "AnswerSource", "MAX_DEPTH", "RunEnding",
    "STOP_REASONS", "TONES", "answer_text", "as_answer_type", "describe_variable",
    "how_reached", "is_plain", "parse_type", "run_ending", "short_answer", "vote_line",
    # settings as command-line options
    "add_setting_options", "config_overrides", "non_empty", "positive_int", "settings",
    # the REPL namespace and the task's terms
    "HISTORY_NAME", "SESSION_NAMES", "SIGNAL_NAMES", "check_tools", "describe_tool",
    "prewarm", "session_functions", "user_variables",
    # a step's record and its replay
    "TRACEBACK_LINE", "output_digest", "step_exchanges", "step_source",
    "writing_source",
]
