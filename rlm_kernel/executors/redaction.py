"""Secret values kept out of everything a step's output reaches.

Model code can ``print(os.environ)``.  What it prints goes to the model's next
prompt, the trajectory, the CLI's step printout, ``--json`` and the exported
notebook; a :class:`Redactor` replaces the value of every secret environment
variable with ``[redacted NAME]`` before any of those see it.

A variable is secret when its name matches :data:`SECRET_NAME`, which covers
the key names litellm's providers read (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``,
``HF_TOKEN``, ``AWS_SECRET_ACCESS_KEY``, ``AZURE_API_KEY`` ...); values shorter than :data:`MIN_SECRET_CHARS`
are left alone (``1``, ``true`` would redact half of any output).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["Redactor", "SECRET_NAME", "MIN_SECRET_CHARS", "redact_output"]

SECRET_NAME = re.compile(
    r"(^|_)(API_?KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)(_|$)", re.IGNORECASE)
"""Names of environment variables whose values are secret (``OPENAI_API_KEY``,
``GITHUB_TOKEN``, ``AWS_SECRET_ACCESS_KEY``, ``DB_PASSWORD`` ...)."""
MIN_SECRET_CHARS = 8


class Redactor:
    """Replaces secret values in text.

    Args:
        environ: the environment to read secrets from (default ``os.environ``,
            read when the redactor is made).
    """

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        secrets = {value: name for name, value in env.items()
                   if SECRET_NAME.search(name) and len(value) >= MIN_SECRET_CHARS}
        self._names = secrets
        self._pattern = re.compile("|".join(
            re.escape(v) for v in sorted(secrets, key=len, reverse=True))) if secrets else None

    def __bool__(self) -> bool:
        return self._pattern is not None

    def __call__(self, text: str) -> str:
        """``text`` with every secret value replaced by ``[redacted NAME]``."""
        if self._pattern is None or not text:
            return text
        return self._pattern.sub(lambda m: f"[redacted {self._names[m.group(0)]}]", text)


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
