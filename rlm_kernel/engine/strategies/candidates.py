"""Candidates and agreement: N independent trajectories of one task, one answer by vote.

With ``RLMConfig.candidates = N`` (> 1) :class:`CandidateRuns` runs the task up to N
times, one :class:`~rlm_kernel.engine.run.Run` after the other in the same executor,
and returns the trajectory of the candidate whose answer most candidates agree on
(:mod:`rlm_kernel.engine.answer.vote`: values normalised, ties broken by fewer failed steps,
then a higher stated ``RLM_CONFIDENCE``, then the earlier candidate).  This is
self-consistency over whole RLM trajectories (Wang et al., 2023, "Self-Consistency
Improves Chain of Thought Reasoning in Language Models", ICLR 2023, arXiv:2203.11171),
as self-reflective program search selects among sampled context-interaction programs
(Alizadeh-Vahid et al., 2026, "Recursive Language Models Meet Uncertainty: The
Surprising Effectiveness of Self-Reflective Program Search for Long Context", SRLM,
arXiv:2603.15653).

- **Diversity.** Candidate 1 runs exactly as a single run does (the clients as built,
  ``RLMConfig.temperature``).  Candidates 2..N call the root model at
  ``RLMConfig.candidate_temperature`` with a seed of their own
  (:func:`candidate_seed`), through :class:`SampledClient`; ``llm_query`` sub-calls
  keep the configured temperature (and so the sub-call cache serves all candidates).
- **Early stop.** After each candidate the vote is counted; once the leading answer
  has more votes than the runner-up plus every candidate not yet run
  (:meth:`~rlm_kernel.engine.answer.vote.Tally.decided`: N=3, two agree: stop after 2; N=5:
  three), no more candidates run (``RLMConfig.candidates_early_stop``; off: all N run).
- **Budgets.** All candidates share the run's :class:`BudgetGuard` and
  :class:`UsageLedger`: ``max_llm_calls``, ``max_tokens``, ``max_seconds`` and
  ``max_cost_usd`` cover them together.  A candidate stopped by the budget (or by an
  interrupt) ends the whole run with the vote over the candidates so far; it votes
  itself only if it had an answer.
- **Namespace.** The user's namespace ends as if only the chosen candidate had run:
  a shallow snapshot (name -> object) is taken before the first candidate; after each,
  its bindings (names added, rebound or deleted relative to the snapshot) are kept
  and the snapshot is restored; at the end the chosen candidate's bindings are
  applied.  In-place changes to objects that existed before (``data.append(...)``,
  ``df.loc[...] = ...``) are not undone: every candidate sees, and leaves, them.
  Works for any :class:`~rlm_kernel.executors.Executor`.
- **Result.** The chosen candidate's :class:`RLMResult` (history, answer, stop reason,
  ``exchanges`` for replay, which replays that trajectory alone), with ``calls`` and
  ``seconds`` over all candidates and ``candidates``: one summary per candidate run.
  ``votes`` is ``(k, n)``: k of the n candidates that ran agree with the answer;
  ``answer_source`` is ``vote`` where the chosen candidate's own was ``data`` or
  ``output``, and stays ``no_input``, ``ungrounded`` or ``forced`` (a vote does not
  remedy those; :func:`~rlm_kernel.engine.answer.sources.voted_source`).
- **Events.** See :mod:`rlm_kernel.engine.events`: every event carries ``candidate``
  and ``candidates``; ``candidate_started`` / ``candidate_finished`` frame each
  candidate; one ``run_started`` and one ``run_finished`` frame the whole run.

Imports nothing from Jupyter.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Hashable, MutableMapping
from dataclasses import dataclass, field, replace
from typing import Any

from ...executors import Executor, WorkerError
from ...models import CallOptions, ClientWrapper, Completion, LanguageModel
from ..answer.sources import voted_source
from ..answer.vote import Ballot, Tally, answer_key, tally
from ..events import (
    CandidateFinished,
    CandidateStarted,
    Event,
    Observer,
    RunFinished,
    RunStarted,
    StepFinished,
    emit,
    usage_totals,
)
from ..replay.recording import Recorder
from ..replay.resume import Continuation
from ..result import RLMResult
from ..run import EXECUTOR_ERRORS, Run, end_by_executor_error
from ..services import RunServices
from ..session.task import TaskSpec
from .children import child_runner

__all__ = ["CandidateRuns", "SampledClient", "candidate_seed", "short_answer",
           "vote_line"]

log = logging.getLogger(__name__)

_ABSENT = object()
_ROOT_ROLES = ("root", "final")
_ENDS_THE_RUN = ("budget", "interrupt")


def candidate_seed(index: int) -> int | None:
    """The sampling seed of candidate ``index`` (from 1): None for candidate 1 (the
    client's own, as in a single run), else ``index`` itself, so each candidate
    samples differently and a rerun samples the same (where the provider honours
    seeds, llama-cpp-python's server among them)."""
    return None if index <= 1 else index


class SampledClient(ClientWrapper):
    """A :class:`~rlm_kernel.models.LanguageModel` that gives root-model calls
    (``role`` ``root`` or ``final``) a temperature and a seed of its own; a call that
    names its own temperature (a resample) keeps it.  ``llm_query`` sub-calls pass
    unchanged.

    Args:
        client: the model client.
        temperature: sampling temperature of root calls.
        seed: sampling seed of root calls (None: the client's default).
    """

    def __init__(self, client: LanguageModel, temperature: float, seed: int | None) -> None:
        super().__init__(client)
        self.temperature = temperature
        self.seed = seed

    def call(self, messages: list[dict[str, str]], options: CallOptions) -> Completion:
        """One call of the wrapped client; see ``LanguageModel.complete``.

        Raises:
            LLMError: the call failed.
        """
        if options.role in _ROOT_ROLES:
            options = replace(
                options,
                temperature=self.temperature if options.temperature is None
                else options.temperature,
                seed=self.seed if options.seed is None else options.seed)
        return super().call(messages, options)


@dataclass
class _Candidate:
    """One finished candidate: its result, namespace bindings and evidence."""

    index: int
    result: RLMResult | None = None
    key: Hashable | None = None  # its answer's vote key (None: no answer)
    changed: dict[str, Any] = field(default_factory=dict)  # names added or rebound
    deleted: set[str] = field(default_factory=set)  # names of the snapshot it deleted
    failed_steps: int = 0
    confidence: float | None = None
    recorder: Recorder = field(default_factory=Recorder)
    first_call: int = 0  # its calls are the ledger's [first_call:last_call]
    last_call: int = 0

    def ballot(self) -> Ballot:
        """The candidate as the vote sees it (no answer: no vote)."""
        return Ballot(self.index, self.key, self.failed_steps, self.confidence)


class CandidateRuns:
    """Up to ``config.candidates`` runs of one task and the vote over their answers
    (see the module docstring).

    Args:
        question: the task, in natural language.
        variables: the REPL variables the model is told about, by name.
        services: the run's services (:class:`~rlm_kernel.engine.services.RunServices`;
            ``config.candidates`` > 1, ``config.candidate_temperature``); the usage
            ledger and budget guard are shared by all candidates (and their child runs);
            each candidate runs on services of its own derived from these (its sampled
            root client, its own recorder, an observer that tags its events); the
            observer is told about every event (see :mod:`rlm_kernel.engine.events`).
        executor: where every candidate's code runs (its namespace is shared and
            restored between candidates).
        task: the task's terms, as for :class:`~rlm_kernel.engine.run.Run`.
    """

    def __init__(self, question: str, variables: dict[str, Any], services: RunServices, *,
                 executor: Executor, task: TaskSpec | None = None) -> None:
        self.question, self.variables, self.services = question, variables, services
        self.config = config = services.config
        self.task = task
        self.executor = executor
        self.ledger, self.guard, self.observer = services.ledger, services.guard, \
            services.observer
        self.total = config.candidates
        self.done: list[_Candidate] = []
        self.start = time.perf_counter()
        self.broken: Exception | None = None  # the executor error that ended the runs

    # -- the run ------------------------------------------------------------------------
    def execute(self, continuation: Continuation | None = None) -> RLMResult:
        """Run the candidates, vote, leave the chosen candidate's namespace, and return
        its result with the run's totals and the ``candidates`` summaries.  Never
        raises for errors of the model, its code or the budget (each candidate's
        :meth:`Run.execute` turns them into a stop reason), nor, once a candidate has
        run, for an error of the executor (:data:`~rlm_kernel.engine.run.EXECUTOR_ERRORS`):
        no candidate runs after it, the namespace is left as the executor has it, and
        the vote is over the candidates that ran.

        Args:
            continuation: every candidate continues an earlier run from this step
                (:mod:`rlm_kernel.engine.replay.resume`).
        """
        ns = self.executor.namespace
        snapshot = dict(ns.items())
        try:
            for index in range(1, self.total + 1):
                if index > 1 and (self.guard.exceeded or self.guard.reason()):
                    log.info("candidates: the budget is used up after %d", index - 1)
                    break
                try:
                    cand = self._run_one(index, continuation, ns, snapshot)
                except EXECUTOR_ERRORS as exc:  # a candidate's start (its inputs bound)
                    if not self.done:
                        raise  # before anything ran: as a single run's start
                    self.broken = exc
                    log.warning("candidates: the REPL failed before candidate %d: %s",
                                index, exc)
                    break
                votes = tally([c.ballot() for c in self.done])
                decided = votes.decided(self.total)
                self._notify_finished(cand, votes, decided)
                if (decided and self.config.candidates_early_stop) \
                        or (cand.result is not None and cand.result.stopped_by in _ENDS_THE_RUN) \
                        or self.broken is not None:
                    break
        except KeyboardInterrupt:  # outside a run's own handling: keep what was done
            self.done = [c for c in self.done if c.result is not None]
            log.info("candidates: interrupted after %d", len(self.done))
            if self.broken is None:
                _restore(ns, snapshot)
            if not self.done:  # not even the first candidate ran
                raise
        votes = tally([c.ballot() for c in self.done])
        return self._finish(votes, ns)

    def _run_one(self, index: int, continuation: Continuation | None,
                 ns: MutableMapping[str, Any], snapshot: dict[str, Any]) -> _Candidate:
        """Candidate ``index`` from start to end; its bindings are kept and the
        namespace is put back to ``snapshot``."""
        cand = _Candidate(index, first_call=len(self.ledger.calls))
        root, sub = self.services.root, self.services.sub
        temperature, seed = None, candidate_seed(index)
        if index > 1:
            temperature = self.config.candidate_temperature
            sampled = SampledClient(root, temperature, seed)
            sub = sampled if sub is root else sub
            root = sampled
        # its own services: its record (steps restart at 1), its clients, its observer
        services = replace(self.services, root=root, sub=sub, recorder=cand.recorder,
                           observer=self._observer(cand, temperature, seed), replay=None)
        run = Run(self.question, self.variables, services, executor=self.executor, depth=0,
                  child_runner=child_runner(services, 0, self.executor,
                                           self.task.folder if self.task else None),
                  task=self.task)
        self.done.append(cand)
        try:
            cand.result = res = run.execute(continuation)
            if res.answer is not None:  # normalised once (it may render the value)
                cand.key = answer_key(res.answer_value, res.answer)
        finally:
            cand.last_call = len(self.ledger.calls)
            self._take_bindings(cand, run, ns, snapshot)
        log.info("candidate %d/%d: %s (%s, %d steps, %d failed)", index, self.total,
                 cand.result.answer, cand.result.stopped_by, cand.result.steps,
                 cand.failed_steps)
        return cand

    def _take_bindings(self, cand: _Candidate, run: Run, ns: MutableMapping[str, Any],
                       snapshot: dict[str, Any]) -> None:
        """Keep what ``cand`` did to the namespace and put the namespace back to
        ``snapshot``; not when its executor failed (:attr:`broken`: its REPL's names
        cannot be read, the candidate's result says so)."""
        if run.executor_error is not None and cand.result is not None:
            self.broken = run.executor_error
        if isinstance(self.broken, WorkerError):
            return
        try:
            cand.changed, cand.deleted = _bindings(ns, snapshot)
            _restore(ns, snapshot)
        except EXECUTOR_ERRORS as exc:
            self.broken = exc
            if cand.result is not None:
                end_by_executor_error(cand.result, exc, after_run=True)

    def _finish(self, votes: Tally, ns: MutableMapping[str, Any]) -> RLMResult:
        """The chosen candidate's result with the run's totals and summaries; its
        bindings applied to the namespace (unless the REPL's worker failed: the result
        then says so); ``run_finished`` told."""
        chosen = next(c for c in self.done if c.index == votes.chosen)
        result = chosen.result
        assert result is not None  # every candidate in self.done ran
        result.candidates = [self._summary(c, votes, c is chosen) for c in self.done]
        if isinstance(self.broken, WorkerError):  # its names are gone with the worker
            end_by_executor_error(result, self.broken, after_run=True)
        else:
            try:
                for name in chosen.deleted:
                    ns.pop(name, None)
                ns.update(chosen.changed)
            except EXECUTOR_ERRORS as exc:
                end_by_executor_error(result, exc, after_run=True)
        result.calls = list(self.ledger.calls)
        result.seconds = time.perf_counter() - self.start
        if result.answer is not None and votes.winner is not None:
            result.votes = (votes.votes(votes.winner), len(self.done))
            result.answer_source = voted_source(result.answer_source)
        log.info("candidates: %d of %d ran; candidate %d chosen (%d votes)", len(self.done),
                 self.total, chosen.index, votes.votes(votes.winner))
        self._notify(RunFinished(result=result, answer_source=result.answer_source,
                                 votes=result.votes), chosen.index)
        return result

    def _summary(self, cand: _Candidate, votes: Tally, chosen: bool) -> dict[str, Any]:
        """One entry of ``RLMResult.candidates`` (keys documented there)."""
        res = cand.result
        assert res is not None
        calls = self.ledger.calls[cand.first_call:cand.last_call]
        return {"index": cand.index, "answer": res.answer,
                "votes": votes.votes(cand.key), "steps": res.steps,
                "stopped_by": res.stopped_by, "failed_steps": cand.failed_steps,
                "confidence": cand.confidence, "llm_calls": len(calls),
                "tokens": sum(c.prompt_tokens + c.completion_tokens for c in calls),
                "cost_usd": round(sum(c.cost_usd for c in calls), 6),
                "seconds": round(res.seconds, 3), "chosen": chosen}

    # -- events -------------------------------------------------------------------------
    def _observer(self, cand: _Candidate, temperature: float | None,
                  seed: int | None) -> Observer:
        """The observer of one candidate's run: it notes the candidate's evidence
        (failed steps, last stated confidence), adds ``candidate``/``candidates`` to
        every event, counts top-level ``elapsed`` from the first candidate's start,
        and turns the run's own ``run_started`` (but the first) and ``run_finished``
        into ``candidate_started`` (``candidate_finished`` follows the vote)."""
        def observe(event: Event) -> None:
            top = event.depth == 0
            if top and isinstance(event, StepFinished):
                outcome = event.outcome
                if not outcome.success or not outcome.code:
                    cand.failed_steps += 1
                if "confidence" in outcome.signals:
                    cand.confidence = outcome.signals["confidence"]
            if top and isinstance(event, RunFinished):
                return
            elapsed = time.perf_counter() - self.start if top else event.elapsed
            if not (top and isinstance(event, RunStarted) and cand.index > 1):
                emit(self.observer, replace(event, elapsed=elapsed, candidate=cand.index,
                                            candidates=self.total))
            if top and isinstance(event, RunStarted):
                self._notify(CandidateStarted(temperature=temperature, seed=seed),
                             cand.index)

        return observe

    def _notify_finished(self, cand: _Candidate, votes: Tally, decided: bool) -> None:
        res = cand.result
        assert res is not None
        winner = next((c.result for c in self.done if c.index == votes.chosen), None)
        leading = winner.answer if winner is not None and votes.winner is not None else None
        self._notify(CandidateFinished(
            answer=res.answer, stopped_by=res.stopped_by, steps=res.steps,
            votes=votes.votes(cand.key), leading=leading,
            leading_votes=votes.votes(votes.winner), decided=decided), cand.index)

    def _notify(self, event: Event, index: int) -> None:
        """Tell the observer ``event`` for candidate ``index`` (top level, with totals)."""
        if self.observer is None:
            return
        emit(self.observer, replace(event, depth=0, elapsed=time.perf_counter() - self.start,
                                    totals=usage_totals(self.ledger), candidate=index,
                                    candidates=self.total))


def short_answer(answer: str | None, limit: int = 60) -> str:
    """An answer's text on one line for a summary: quoted (``repr``), cut to ``limit``
    characters with ``…``; ``no answer`` for None."""
    if answer is None:
        return "no answer"
    text = repr(" ".join(answer.split()))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def vote_line(candidates: list[dict[str, Any]]) -> str:
    """``RLMResult.candidates`` in one line: each candidate's answer and votes, the
    chosen one marked, e.g. ``#1 '41' (1 vote) · #2 '42' (2 votes, chosen) · #3 '42.0'
    (2 votes)``."""
    parts = []
    for c in candidates:
        votes = int(c.get("votes") or 0)
        what = f"{votes} vote{'' if votes == 1 else 's'}"
        if c.get("answer") is None:
            what = str(c.get("stopped_by"))
        parts.append(f"#{c.get('index')} {short_answer(c.get('answer'))} "
                     f"({what}{', chosen' if c.get('chosen') else ''})")
    return " · ".join(parts)


# -- the namespace ------------------------------------------------------------------------
def _bindings(ns: MutableMapping[str, Any],
              snapshot: dict[str, Any]) -> tuple[dict[str, Any], set[str]]:
    """What a candidate did to the names of ``ns`` relative to ``snapshot``: the names
    added or rebound (to another object) with their objects, and the names deleted."""
    changed = {name: value for name, value in list(ns.items())
               if snapshot.get(name, _ABSENT) is not value}
    deleted = {name for name in snapshot if name not in ns}
    return changed, deleted


def _restore(ns: MutableMapping[str, Any], snapshot: dict[str, Any]) -> None:
    """Put ``ns`` back to ``snapshot``'s names and objects (a shallow restore)."""
    for name in [n for n in list(ns.keys()) if n not in snapshot]:
        ns.pop(name, None)
    for name, value in snapshot.items():
        if ns.get(name, _ABSENT) is not value:
            ns[name] = value
