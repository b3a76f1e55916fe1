"""A run's shared services: one object for what a run, its child runs and its candidates
use together (settings, model clients, usage ledger, budget guard, replay recorder,
observer, the replay record), and the one place a run's model clients are composed.

Every model call of a run passes four wrappers, each with one job, outermost first
(:func:`compose_client`)::

    RedactedClient      secrets out of the messages (executors.redaction's Redactor)
      RecordedClient    the exchange appended to the run's Recorder (replay.recording)
        BudgetedClient  the call reserved with, and released to, the BudgetGuard (budget)
          TracedClient  the call's ``chat`` span (models.tracing)
            the client  litellm, the embedded model, a replay, a candidate's sampling

Why this order: redaction first, so the budget weighs, the record keeps and the provider
gets the same redacted messages; the record outside the budget, so a call the budget
refuses (nothing sent) is not recorded; the span innermost, so it times the request only.

A child run (``rlm_query``) derives its services with :func:`dataclasses.replace` (its
settings; no replay record) and shares the ledger, the guard and the recorder; a candidate
derives its own with its sampled root client, its own recorder and observer.  Replacing a
field composes the clients again over the new fields (``__post_init__``).

Imports nothing from Jupyter.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ..executors import Redactor, redact_messages
from ..models import CallOptions, ClientWrapper, Completion, LanguageModel, UsageLedger, tracing
from .budget import Budget, BudgetedClient, BudgetGuard
from .config import RLMConfig
from .events import Observer
from .replay.recording import RecordedClient, Recorder, Recording
from .session.mcp_tools import RunTools, open_servers

__all__ = ["RedactedClient", "RunServices", "compose_client"]


class RedactedClient(ClientWrapper):
    """A :class:`~rlm_kernel.models.LanguageModel` whose every call's messages have their
    secrets replaced (:class:`~rlm_kernel.executors.Redactor`: the values of secret
    environment variables, ``[redacted NAME]``) before they go on: a task message, a
    variable's preview, an ``rlm_query`` prompt, the answer check's message.

    Args:
        client: the model client the redacted messages go to.
    """

    def call(self, messages: list[dict[str, str]], options: CallOptions) -> Completion:
        """The wrapped client's call on the redacted messages (a secret set since the
        last call counts too: the redactor is made per call); see
        ``LanguageModel.complete``.

        Raises:
            LLMError: the call failed.
        """
        return super().call(redact_messages(messages, Redactor()), options)


def compose_client(client: LanguageModel, guard: BudgetGuard,
                   recorder: Recorder) -> LanguageModel:
    """``client`` as a run calls it: redacted, recorded, held to the budget and traced,
    in that order from the outside in (the module docstring says why).

    Args:
        client: a model client (any :class:`~rlm_kernel.models.LanguageModel`).
        guard: the budget guard every call asks first.
        recorder: where every answered call's exchange is appended.

    Returns:
        A :class:`RedactedClient` over the chain; ``model``, ``max_tokens``,
        ``context_window``, ``ledger`` and ``depth`` read (and set) ``client``'s.
    """
    return RedactedClient(RecordedClient(BudgetedClient(tracing.TracedClient(client), guard),
                                         recorder))


@dataclass(frozen=True, eq=False)
class RunServices:
    """What a run shares with its child runs and candidates (see the module docstring).

    Frozen: a run that needs other services (a child, a candidate) derives them with
    :func:`dataclasses.replace`, which composes the clients again.

    Attributes:
        config: the run's settings.
        root: the root model's client as the model layer built it (unwrapped).
        sub: ``llm_query``'s client as built (may be ``root`` itself).
        ledger: the usage ledger of the run tree (every call, children and candidates
            included); the clients record into it.
        guard: the budget guard of the run tree, asked before every call.
        recorder: where the exchanges go (:mod:`rlm_kernel.engine.replay.recording`):
            the run tree's; a candidate has its own.
        observer: ``callable(Event)`` told about each step as it happens, or None.
        replay: the record a replay run is checked against (``diverged_at``), or None.
        tools: the MCP tools of the run tree (``config.mcp_servers``; in a replay, the
            record's answers), or None; a candidate's record into its own recorder.
        root_client: ``root`` behind the run's wrappers (:func:`compose_client`): what
            the loop calls; set from the fields above, not given.
        sub_client: ``sub`` likewise (``root_client`` itself when ``sub`` is ``root``).
    """

    config: RLMConfig
    root: LanguageModel
    sub: LanguageModel
    ledger: UsageLedger
    guard: BudgetGuard
    recorder: Recorder = field(default_factory=Recorder)
    observer: Observer | None = None
    replay: Recording | None = None
    tools: RunTools | None = None
    root_client: LanguageModel = field(init=False, repr=False)
    sub_client: LanguageModel = field(init=False, repr=False)

    def __post_init__(self) -> None:
        root = self.compose(self.root)
        sub = root if self.sub is self.root else self.compose(self.sub)
        object.__setattr__(self, "root_client", root)
        object.__setattr__(self, "sub_client", sub)
        if self.tools is not None and self.tools.recorder is not self.recorder:
            object.__setattr__(self, "tools", self.tools.with_recorder(self.recorder))

    @classmethod
    def start(cls, config: RLMConfig, root: LanguageModel, sub: LanguageModel,
              budget: Budget, *, observer: Observer | None = None,
              replay: Recording | None = None) -> RunServices:
        """The services of a new top-level run: a fresh ledger (set on both clients), a
        budget guard whose clock starts now, an empty recorder, the MCP tools (the
        process's servers of ``config.mcp_servers``, started on first use; a replay's
        tools answer from its record and start none).

        Args:
            config: the run's settings.
            root / sub: the clients as built (``sub`` may be ``root``).
            budget: the run's limits.
            observer: told about each step, or None.
            replay: the record a replay is checked against, or None.

        Raises:
            ValueError / OSError: ``config.mcp_servers`` cannot be read.
        """
        ledger = UsageLedger()
        root.ledger = sub.ledger = ledger
        guard = BudgetGuard(budget, ledger, time.monotonic())
        recorder = Recorder()
        tools = None
        if replay is not None and any(e.get("role") == "tool" for e in replay.exchanges):
            tools = RunTools(None, guard, max_calls=config.max_tool_calls,
                             timeout=config.tool_timeout, recorder=recorder,
                             recorded=replay.exchanges)
        elif replay is None and config.mcp_servers:
            tools = RunTools(open_servers(config.mcp_servers), guard,
                             max_calls=config.max_tool_calls, timeout=config.tool_timeout,
                             recorder=recorder)
        return cls(config, root, sub, ledger, guard, recorder, observer, replay, tools)

    def compose(self, client: LanguageModel) -> LanguageModel:
        """``client`` behind this run's wrappers (:func:`compose_client` over
        :attr:`guard` and :attr:`recorder`): how ``llm_query(model=...)``'s clients
        are called too."""
        return compose_client(client, self.guard, self.recorder)
