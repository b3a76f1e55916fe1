"""The RLM loop, with nothing of Jupyter in it; this module is its one public surface.

It exports the user's API: :class:`RLM`, its settings (:class:`RLMConfig`,
:class:`Setting`), its result (:class:`RLMResult`), follow-up tasks
(:class:`Conversation`), continuation and replay (:class:`Continuation`,
:func:`load_recording`), observers (:class:`Event`, :data:`Observer`,
:class:`RunObserver`; the event kinds are in :mod:`~rlm_kernel.engine.events`) and the
REPL's reserved names (:data:`RESERVED_NAMES`).  The layers above (``export``,
``batch``, ``cli``, ``jupyter``) import the engine from here and from
:mod:`~rlm_kernel.engine.frontends` (what front ends need beyond the user's API) only;
an import-linter contract in ``pyproject.toml`` holds them to it.  Inside:

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
  ``result`` (:class:`RLMResult`); ``names`` (the REPL's reserved names, at the
  bottom); ``mapper`` (the hook through which :meth:`RLM.map` reaches
  :mod:`rlm_kernel.batch.mapping`, many independent runs on an executor);
- ``answer/`` (the answer's text, typed answers, grounding, answer sources, the vote),
  ``strategies/`` (candidates, ``rlm_query``'s child runs), ``replay/`` (recording,
  resume), ``session/`` (task terms, user tools, the conversation, warm start).

The engine reaches a model only through :func:`rlm_kernel.models.make_client`
and the :class:`~rlm_kernel.models.LanguageModel` protocol, and code only through
an :class:`~rlm_kernel.executors.Executor`; importing it loads no Jupyter module
and no litellm.
"""

from __future__ import annotations

from . import moved_modules
from .config import RLMConfig, Setting
from .events import Event, Observer, RunObserver
from .names import RESERVED_NAMES
from .replay.recording import load_recording
from .replay.resume import Continuation
from .result import RLMResult
from .rlm import RLM
from .session.conversation import Conversation

moved_modules.install()  # the 0.1.0 module paths (engine.loop ...) still import, warned

__all__ = [
    "RLM", "RLMConfig", "RLMResult", "Setting",
    # follow-up tasks, continuation and replay
    "Continuation", "Conversation", "load_recording",
    # watching a run
    "Event", "Observer", "RunObserver",
    # the REPL's names model code may not rebind
    "RESERVED_NAMES",
]
