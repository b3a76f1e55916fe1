"""The system prompt and the per-turn messages of the RLM loop; nothing else.

The prompt follows the RLM protocol (Zhang, Kraska & Khattab, "Recursive
Language Models", 2025): the data lives in REPL variables, the model sees only
their metadata, writes ```repl blocks, and ends with FINAL/FINAL_VAR.  It is
written to be strict enough for a 1.5B coder model at temperature 0: the
first reply must be code, one block per reply, one worked example, and search
recipes for the shapes ``context`` usually has.  Messages are append-only
from step to step so a local server can reuse its cached prompt prefix.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from .repl_types import REPLVariable

__all__ = [
    "SYSTEM_PROMPT",
    "build_messages",
    "STOP_SEQUENCES",
    "task_message",
    "step_output_message",
    "no_code_message",
    "answer_now_message",
    "next_message",
    "truncate_output",
    "SUB_CALL_SYSTEM_PROMPT",
]

SYSTEM_PROMPT = """\
You answer a question about data that is stored in Python variables. You cannot see the data; \
you explore it by writing Python code that runs in a persistent REPL, and you read what the \
code prints.

How you work:
1. Every reply is a short thought (one line) followed by exactly ONE code block that starts \
with ```repl and ends with ```. Your first reply must be a ```repl block. Never guess: find \
the answer by running code.
2. The variables listed in the task already exist. Never redefine them, never open files, \
never invent sample data.
3. Print only small things: lengths, slices, search hits. Never print all of a large variable.
4. When the output shows the answer, reply with a ```repl block that calls FINAL(answer), for \
example FINAL(hits[0]) or FINAL("42"). FINAL_VAR("name") returns the variable called name.
5. You may also call llm_query(prompt) -> str to ask a helper model about a piece of text \
(under 4000 characters), llm_query_batched(list_of_prompts) -> list of str, and SHOW_VARS() to \
list the variables.

Recipes:
- dict of {path: text}: hits = [p for p, t in context.items() if "def name(" in t]
- long str: hits = [(n, l) for n, l in enumerate(context.splitlines(), 1) if "word" in l] \
(n is the line number, counting from 1)
- Search for the most specific text the question gives (for example "class Name(" or \
"def name(") so that you get few hits. If there are several hits, choose the one that \
answers the question, not simply the first.
- Use the re module for patterns. Use .lower() for case-insensitive search.

Example 1.
Task: Which file defines the class Parser? Variables: context (dict, 40 items).
Reply:
I will search every file for the class definition.
```repl
hits = [p for p, t in context.items() if "class Parser" in t]
print(hits)
```
Output: ['pkg/parse.py']
Reply:
The search found one file.
```repl
FINAL(hits[0])
```

Example 2.
Task: On which line is the function load defined? Variables: context (str, 90,000 characters).
Reply:
I will look for the line that starts the definition.
```repl
hits = [(n, l) for n, l in enumerate(context.splitlines(), 1) if "def load(" in l]
print(hits)
```
Output: [(212, 'def load(fp, *, cls=None):')]
Reply:
Line 212 defines load.
```repl
FINAL(hits[0][0])
```

Example 3.
Task: How many lines of the file `docs/intro.txt` mention "error"? Variables: context (dict).
Reply:
The question names one file, so I will count in that file only.
```repl
lines = context["docs/intro.txt"].splitlines()
n = len([l for l in lines if "error" in l])
print(n)
```
Output: 7
Reply:
The file has 7 such lines.
```repl
FINAL(n)
```"""

SUB_CALL_SYSTEM_PROMPT = (
    "You are a helpful assistant. Answer the request directly and concisely, "
    "using only the text you are given."
)

# Cut the reply after its first code block: small models otherwise go on to
# write the REPL's output and the next turn themselves.
STOP_SEQUENCES = ["\n```\n", "\nOutput:"]


def build_messages(first: str, turns: list[dict[str, str]], window: int,
                   max_chars: int | None = None) -> list[dict[str, str]]:
    """The chat messages of one root-model call.

    Args:
        first: the task message (:func:`task_message`).
        turns: assistant/user message pairs of the steps so far.
        window: most recent steps to keep (0 = all).
        max_chars: prompt size limit in characters (None = none); older steps
            are dropped first, then the newest output is cut to fit.

    Returns:
        ``[system, task, (note of dropped steps), recent turns...]``.
    """
    head = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": first}]
    keep = list(turns[-2 * window:] if window > 0 else turns)
    size = sum(len(m["content"]) for m in head) + 200

    def total() -> int:
        return size + sum(len(m["content"]) for m in keep)

    while max_chars and len(keep) > 2 and total() > max_chars:
        keep = keep[2:]
    if max_chars and keep and total() > max_chars:
        last = keep[-1]
        room = max(500, len(last["content"]) - (total() - max_chars))
        keep[-1] = {"role": last["role"], "content": truncate_output(last["content"], room)}
    dropped = (len(turns) - len(keep)) // 2
    if dropped:
        head += [{"role": "assistant", "content": f"(I ran {dropped} earlier steps; their "
                  "variables still exist in the REPL.)"}, {"role": "user", "content": "Continue."}]
    return head + keep


def truncate_output(text: str, limit: int) -> str:
    """Cut ``text`` to at most about ``limit`` characters, keeping head and tail.

    The cut part is replaced by a marker giving how many characters were
    dropped, so the model knows to print less.
    """
    if limit <= 0 or len(text) <= limit:
        return text
    head = text[: limit * 2 // 3]
    tail = text[-(limit - len(head)):]
    dropped = len(text) - len(head) - len(tail)
    return f"{head}\n... [{dropped:,} characters truncated: print less] ...\n{tail}"


def _step_line(step: int, max_steps: int) -> str:
    left = max_steps - step + 1
    if left <= 1:
        return (f"Step {step} of {max_steps}: this is your LAST step. "
                "Reply with a ```repl block that calls FINAL(...).")
    return f"Step {step} of {max_steps}. Reply with one thought line and one ```repl block."


_HOW_TO_SEARCH = {
    "str": "`{n}` is ONE string (not a dict): search it line by line with "
           "enumerate({n}.splitlines(), 1).",
    "dict": "`{n}` is a dict{keys}: to search all values loop over {n}.items(); to read "
            "the value of one key use {n}[key].",
    "list": "`{n}` is a list: loop over enumerate({n}) to search its items.",
}


_KEY_SAMPLE = 8  # dict keys named in the search tip


def _key_sample(value: Any) -> str:
    if not isinstance(value, dict) or not value:
        return ""
    keys = [repr(k)[:60] for k in itertools.islice(value, _KEY_SAMPLE)]
    more = ", ..." if len(value) > _KEY_SAMPLE else ""
    return f" with {len(value):,} keys ({', '.join(keys)}{more})"


def task_message(question: str, variables: Sequence[REPLVariable], max_steps: int,
                 values: Mapping[str, Any] | None = None) -> str:
    """First user message: the question, the variables' metadata, how to search
    each variable given its type (naming a dict's first keys when ``values`` is
    given), and the step line."""
    values = values or {}
    if variables:
        listing = "\n\n".join(var.format() for var in variables)
        tips = [_HOW_TO_SEARCH[v.type_name].format(n=v.name, keys=_key_sample(values.get(v.name)))
                for v in variables if v.type_name in _HOW_TO_SEARCH]
        if tips:
            listing += "\n\n" + "\n".join(tips)
    else:
        listing = "(no data variables; answer with code and FINAL)"
    return (f"Task: {question}\n\nVariables in the REPL:\n{listing}\n\n"
            f"{_step_line(1, max_steps)}")


def step_output_message(output: str, step: int, max_steps: int, *, failed: bool,
                        limit: int) -> str:
    """User message after a step: its (truncated) output and the next step line."""
    shown = truncate_output(output.rstrip("\n"), limit) if output.strip() else "(no output)"
    hint = ""
    if failed:
        hint = "\nThe code failed. Read the error, fix the code, and try again."
    elif not output.strip():
        hint = "\nNothing was printed: use print() to see values."
    return f"Output:\n```\n{shown}\n```{hint}\n{_step_line(step, max_steps)}"


def no_code_message(step: int, max_steps: int) -> str:
    """User message when a reply had no ```repl block and no FINAL."""
    return ("Your reply had no ```repl block, so nothing ran. Write code in a ```repl block; "
            f"call FINAL(answer) in it when you know the answer.\n{_step_line(step, max_steps)}")


def next_message(code: str, output: str, success: bool, step: int, max_steps: int, *,
                 limit: int, repeated_from: int | None = None,
                 error: str | None = None) -> str:
    """The user message after a step.

    Args:
        code: the code that ran ("" if the reply had none).
        output: its full output; cut to ``limit`` characters for the model.
        success: False if it raised or timed out.
        step: the number of the step to come; max_steps: the step limit.
        repeated_from: the earlier step that ran the same code, if any.
        error: a message to put first (e.g. a failed ``FINAL_VAR``).
    """
    if code:
        text = step_output_message(output, step, max_steps, failed=not success, limit=limit)
    else:
        text = no_code_message(step, max_steps)
    if code and repeated_from is not None:
        text = (f"You already ran this exact code in step {repeated_from}. Do not repeat it: "
                "read its output; if it shows the answer, call FINAL(...), else try other "
                f"code.\n{text}")
    return f"{error}\n{text}" if error else text


def answer_now_message(max_steps: int) -> str:
    """Last message after the step limit: ask for the answer at once."""
    return (f"You have used all {max_steps} steps. Reply now with one ```repl block that "
            "calls FINAL(answer) with your best answer from what you have seen.")
