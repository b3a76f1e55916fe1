"""After a step: its history entry and ``step_finished`` (with a replay's divergence),
what the termination policy says of it and what the model is told next (the answer
check, or the step's output with the next step's line); and the last "answer now"
call after ``max_iterations`` steps."""

from __future__ import annotations

from .config import RLMConfig
from .prompts import answer_now_message, build_messages, next_message
from .recording import Recording
from .run_state import RunState, action_result, check_message, policy_context, reply_text
from .step import StepOutcome, run_reply

__all__ = ["after_step", "answer_now", "record_step"]


def after_step(cfg: RLMConfig, run: RunState, step: int, outcome: StepOutcome) -> bool:
    """Judge a step: ask the termination policy (with :func:`action_result` and
    :func:`policy_context`), then end the run with its answer (True), hold its
    ``FINAL`` for the answer check, or add the next user message.  True also when
    ``max_consecutive_errors`` steps in a row failed or ran no code."""
    done, answer = run.policy.should_terminate(action_result(outcome, step),
                                               policy_context(run, step, outcome, cfg))
    check = (done and outcome.final and run.pending is None and cfg.verify_answer
             and step < cfg.max_iterations)
    if done and not check:
        run.result.answer_value = outcome.answer_value if outcome.final else answer
        run.result.answer, run.result.stopped_by = answer, "final"
        return True
    run.turns.append({"role": "assistant", "content": outcome.reply_for_history})
    if check:  # one look back before the answer is accepted
        run.pending = outcome
        text = check_message(cfg, run.question, outcome, run.result.history, step)
        run.notify("answer_check", {"step": step, "answer": outcome.answer})
    else:
        text = next_message(outcome.code, outcome.output, outcome.success, step + 1,
                            cfg.max_iterations, limit=cfg.max_output_chars,
                            repeated_from=run.seen_code.get(outcome.code),
                            error=outcome.error_for_model,
                            question=run.question if cfg.restate_question else None)
    run.seen_code.setdefault(outcome.code, step)
    run.turns.append({"role": "user", "content": text})
    run.failures = 0 if outcome.success and outcome.code else run.failures + 1
    if cfg.max_consecutive_errors and run.failures >= cfg.max_consecutive_errors:
        run.result.stopped_by = "error"
        run.result.error = f"{run.failures} steps in a row failed or ran no code"
        return True
    return False


def record_step(replay: Recording | None, run: RunState, step: int,
                outcome: StepOutcome) -> None:
    """Append the step to the run's history (with the sub-calls made while its
    code ran), note a replay's first divergence, tell the observer
    ``step_finished`` (``diverged``: this step's output differs from the record)."""
    result = run.result
    result.history = result.history.append(
        reasoning=outcome.reasoning, code=outcome.code, output=outcome.output,
        execution_time=outcome.seconds, llm_calls=outcome.llm_calls)
    diverged = (replay is not None and run.depth == 0
                and replay.diverges(len(result.history) - 1, outcome.output))
    if diverged and result.diverged_at is None:
        result.diverged_at = step
    exchanges = [e for e in run.guard.recorder.exchanges if e["step"] == step] \
        if run.depth == 0 else []
    run.notify("step_finished", {"step": step, "outcome": outcome, "diverged": diverged,
                                 "exchanges": exchanges,
                                 "entry": result.history.entries[-1]})


def answer_now(cfg: RLMConfig, run: RunState, replay: Recording | None) -> None:
    """After ``max_iterations`` steps: one last call asking for ``FINAL`` now; its
    code runs only if it calls ``FINAL``/``FINAL_VAR``, else its text is the answer."""
    result = run.result
    run.guard.check()
    if run.depth == 0:
        run.guard.recorder.step = cfg.max_iterations + 1
    messages = build_messages(run.first, run.turns, cfg.history_window, run.prompt_chars)
    messages.append({"role": "user", "content": answer_now_message(cfg.max_iterations)})
    reply = reply_text(run.root, messages, role="final", stop=cfg.stop_sequences())
    outcome = run_reply(reply, run.executor, run.tools, cfg.max_iterations + 1, cfg,
                        run.notify, final_only=True)
    if outcome.code:  # the FINAL call ran: it is part of the trajectory
        record_step(replay, run, cfg.max_iterations + 1, outcome)
    if outcome.final:
        result.answer, result.answer_value = outcome.answer, outcome.answer_value
    else:
        result.answer = outcome.reasoning.strip() or reply.strip() or None
        result.answer_value = result.answer
