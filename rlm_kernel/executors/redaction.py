"""Secret values kept out of everything a step's output reaches.

Model code can ``print(os.environ)``.  What it prints goes to the model's next
prompt, the trajectory, the CLI's step printout, ``--json`` and the exported
notebook; a :class:`Redactor` replaces every secret value (:mod:`rlm_kernel.redaction`:
the values of environment variables named like keys, a fleet's keys, a client's
``api_key``; a secret once seen stays secret) with ``[redacted NAME]`` before any of
those see it.  This module adds what the executors redact: chat messages
(:func:`redact_messages`) and nbformat output dicts (:func:`redact_output`).

The environment of the processes model code runs in is not a filtered copy of the
host's but an allow-list: :mod:`rlm_kernel.executors.environment`.
"""

from __future__ import annotations

from typing import Any

from ..redaction import (
    MIN_SECRET_CHARS,
    SECRET_NAME,
    Redactor,
    known_secrets,
    redact_data,
    redact_text,
    remember_environment,
    remember_secret,
    remember_settings,
)

__all__ = ["Redactor", "SECRET_NAME", "MIN_SECRET_CHARS", "known_secrets", "redact_data",
           "redact_messages", "redact_output", "redact_text", "remember_environment",
           "remember_secret", "remember_settings"]


def redact_messages(messages: list[dict[str, Any]],
                    redact: Redactor) -> list[dict[str, Any]]:
    """Chat messages with secrets redacted in every text ``content`` (a new list; the
    messages given are not changed)."""
    if not redact:
        return messages
    return [{**m, "content": redact(m["content"])} if isinstance(m.get("content"), str)
            else m for m in messages]


def redact_output(output: dict[str, Any], redact: Redactor) -> dict[str, Any]:
    """An nbformat output dict with secrets redacted in its text, data and traceback."""
    if not redact:
        return output
    out = dict(output)
    if isinstance(out.get("text"), str):
        out["text"] = redact(out["text"])
    if isinstance(out.get("evalue"), str):
        out["evalue"] = redact(out["evalue"])
    if isinstance(out.get("traceback"), list):
        out["traceback"] = [redact(line) if isinstance(line, str) else line
                            for line in out["traceback"]]
    if isinstance(out.get("data"), dict):
        out["data"] = {k: redact(v) if isinstance(v, str) else v for k, v in out["data"].items()}
    return out

