"""Model replies for scripted runs, shared by the test suites."""

from __future__ import annotations


def block(code: str, thought: str = "Thinking.") -> str:
    """A model reply: ``thought`` (the reasoning, one or more lines), then ``code`` in
    one ```` ```repl ```` fenced block, the shape the engine's step splits into
    reasoning and code."""
    return f"{thought}\n```repl\n{code}\n```"
