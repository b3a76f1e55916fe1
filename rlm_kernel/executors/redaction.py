"""Secret values kept out of everything a step's output reaches.

Model code can ``print(os.environ)``.  What it prints goes to the model's next
prompt, the trajectory, the CLI's step printout, ``--json`` and the exported
notebook; a :class:`Redactor` replaces the value of every secret environment
variable with ``[redacted NAME]`` before any of those see it.

A variable is secret when its name matches :data:`SECRET_NAME`, which covers
the key names litellm's providers read (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``,
``HF_TOKEN``, ``AWS_SECRET_ACCESS_KEY``, ``AZURE_API_KEY`` ...); values shorter than :data:`MIN_SECRET_CHARS`
are left alone (``1``, ``true`` would redact half of any output).

A secret once seen stays secret: every redactor made over ``os.environ`` also hides the
values the process's environment held when this module was imported or when an earlier
redactor was made, so model code that pops ``OPENAI_API_KEY`` out of ``os.environ`` in
one step cannot print it in the next.  The pattern is built with ``re.escape`` and
``re.compile`` taken when the module is imported: model code rebinding ``re.escape``
does not switch redaction off.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Mapping
from typing import Any

__all__ = ["Redactor", "SECRET_NAME", "MIN_SECRET_CHARS", "redact_output", "redact_messages",
           "remember_environment", "secret_free_environ"]

SECRET_NAME = re.compile(
    r"(^|_)(API_?KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)(_|$)", re.IGNORECASE)
"""Names of environment variables whose values are secret (``OPENAI_API_KEY``,
``GITHUB_TOKEN``, ``AWS_SECRET_ACCESS_KEY``, ``DB_PASSWORD`` ...)."""
MIN_SECRET_CHARS = 8

_escape, _compile = re.escape, re.compile  # the functions as imported, not as rebound later
_seen: dict[str, str] = {}  # secret value -> name, every one os.environ has held
_seen_lock = threading.Lock()


def _secrets(env: Mapping[str, str]) -> dict[str, str]:
    """``{value: name}`` of the secret variables of ``env``."""
    return {value: name for name, value in list(env.items())
            if SECRET_NAME.search(name) and isinstance(value, str)
            and len(value) >= MIN_SECRET_CHARS}


def secret_free_environ() -> dict[str, str]:
    """A copy of ``os.environ`` without the secret variables (names matching
    :data:`SECRET_NAME`, whatever their value's length): the environment of every process
    started for model code (the isolated executor's worker, a working-folder command)."""
    return {k: v for k, v in os.environ.items() if not SECRET_NAME.search(k)}


def remember_environment() -> dict[str, str]:
    """Add the secrets of ``os.environ`` now to those seen before; return all of them
    (``{value: name}``)."""
    with _seen_lock:
        for value, name in _secrets(os.environ).items():
            _seen.setdefault(value, name)
        return dict(_seen)


class Redactor:
    """Replaces secret values in text.

    Args:
        environ: the environment to read secrets from (default ``os.environ``, read
            when the redactor is made, plus every secret it held before: see the
            module docstring).

    Attributes:
        longest: characters of the longest secret value (0 when there is none).
    """

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        secrets = remember_environment() if environ is None else _secrets(environ)
        self._names = secrets
        self.longest = max(map(len, secrets), default=0)
        self._pattern = _compile("|".join(
            _escape(v) for v in sorted(secrets, key=len, reverse=True))) if secrets else None

    def __bool__(self) -> bool:
        return self._pattern is not None

    def outside_secrets(self, text: str, at: int, *, later: bool = True) -> int:
        """A place to cut ``text`` near ``at`` that splits no secret value: ``at``
        itself, or the end (``later``) or start of the secret value that spans it.  Each
        side of such a cut is then redacted whole.

        Args:
            text: the text to cut.
            at: the wanted cut (an index of ``text``).
            later: move a cut inside a secret to its end (True) or its start (False).
        """
        if self._pattern is None:
            return at
        for match in self._pattern.finditer(text):
            if match.start() >= at:
                break
            if at < match.end():
                return match.end() if later else match.start()
        return at

    def partial_at_end(self, text: str) -> int:
        """Characters at the end of ``text`` that begin a secret value without finishing
        it (0 when none do): a stream forwarding text in chunks holds them back until
        the next chunk shows whether the secret follows, so no chunk carries part of one.
        """
        best = 0
        for value in self._names:
            for size in range(min(len(value) - 1, len(text)), best, -1):
                if text.endswith(value[:size]):
                    best = size
                    break
        return best

    def __call__(self, text: str) -> str:
        """``text`` with every secret value replaced by ``[redacted NAME]``."""
        if self._pattern is None or not text:
            return text
        return self._pattern.sub(lambda m: f"[redacted {self._names[m.group(0)]}]", text)


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


remember_environment()  # the secrets the process started with
