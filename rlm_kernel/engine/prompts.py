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

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..context import describe_structure, detect_views, sample_fields
from ..executors import guarded_repr
from ..repl_types import REPLVariable
from ..text import middle_cut
from .repetition import Repetition

if TYPE_CHECKING:
    from .config import RLMConfig
    from .session.task import TaskSpec

__all__ = [
    "SYSTEM_PROMPT",
    "build_messages",
    "Transcript",
    "STOP_SEQUENCES",
    "first_prompt",
    "describe_tool",
    "task_message",
    "NO_DATA_NOTE",
    "step_output_message",
    "no_code_message",
    "answer_now_message",
    "repetition_message",
    "repeated_step",
    "stuck_message",
    "check_answer_message",
    "grounding_message",
    "next_message",
    "step_message",
    "SUB_CALL_SYSTEM_PROMPT",
    "final_var_failed",
    "answer_type_line",
    "answer_type_refusal",
    "answer_type_notice",
    "ungrounded_answer",
    "question_with_type",
    "restored_note",
    "sub_call_error",
    "sub_call_prompt",
    "prompt_text",
    "sub_run_failed",
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
3. Print only small things: counts, short lists, a few hits. Never print a whole large variable.
4. When the output shows the answer, reply with a ```repl block that calls FINAL(value). The \
value is what the question asks for, in the form it asks for: a file or document name when \
it asks which file, a number when it asks how many, yes or no when it asks a yes/no question. \
Your thought line says what the question asks for.

Functions in the REPL:
- search(pattern) -> list of hits {"doc": name of the document, "line": line number in that \
document, "text": the line} for each line of `context` that contains pattern. \
search(pattern, data) searches another variable; options regex=True, ignore_case=True, \
doc="name" (one document only). For a bare name, the lines that define it (def name, class \
name) come first.
- split_documents() -> dict {document name: text} of `context`: a dict's items, a list's \
items by index, or the files or records that a long string is made of. When the question \
says how documents are headed, pass that line as a regular expression whose group is the \
name: split_documents(header=r"=== FILE: (.+)"); search() and code_outline() take header= too.
- parse_records() -> list of dicts {field: value}, one per record, when `context` holds \
records of "Key: value" lines.
- code_outline() -> list of the classes, functions and methods of the Python code in \
`context`: dicts {"doc", "kind": "class"/"function"/"method", "name", "line", "end_line", \
"text", "parent": enclosing class or function (None at top level), "args", "defaults", \
"bases"}; code_outline(doc="name") for one document.
- llm_query(prompt) -> str asks a helper model about a piece of text (under 4000 \
characters); llm_query_batched(prompts) -> list of str.
- FINAL(value) ends the run with value; FINAL_VAR("name") ends it with the variable name.
- Import re, ast, collections or any other module you need.
Search for the most specific text the question gives ("def name(", "class Name(", a whole \
quoted line), so that you get few hits; when there are several, pick the one that answers the \
question, not simply the first.

Example 1.
Task: In which file is the function parse_header defined? Variables: context (dict, 40 items).
Reply:
I will search for the line that defines it.
```repl
hits = search("def parse_header(")
print(hits)
```
Output: 1 hit:
{'doc': 'pkg/parse.py', 'line': 40, 'text': 'def parse_header(line, strict=True):'}
Reply:
The question asks for a file: the "doc" of the hit.
```repl
FINAL(hits[0]["doc"])
```

Example 2.
Task: How many of the log files mention a timeout? Variables: context (str, 2,000,000 \
characters).
Reply:
I will find the documents of the lines that mention a timeout.
```repl
found = {h["doc"] for h in search("timeout", ignore_case=True)}
print(len(found), sorted(found)[:5])
```
Output: 3 ['logs/a.log', 'logs/b.log', 'logs/f.log']
Reply:
The question asks how many: a number.
```repl
FINAL(len(found))
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
        keep[-1] = {"role": last["role"], "content": middle_cut(last["content"], room)}
    dropped = (len(turns) - len(keep)) // 2
    if dropped:
        head += [{"role": "assistant", "content": f"(I ran {dropped} earlier steps; their "
                  "variables still exist in the REPL.)"}, {"role": "user", "content": "Continue."}]
    return head + keep


@dataclass
class Transcript:
    """A run's conversation with the root model: the task message
    (:func:`first_prompt`), the steps' turns after it, and the messages of the next call
    (:func:`build_messages`).

    Attributes:
        first: the task message.
        window: most recent steps sent (0 = all; ``RLMConfig.history_window``).
        max_chars: prompt size limit in characters (None = none).
        turns: assistant/user message pairs of the steps so far.
    """

    first: str
    window: int
    max_chars: int | None = None
    turns: list[dict[str, str]] = field(default_factory=list)

    def messages(self) -> list[dict[str, str]]:
        """The chat messages of the next root-model call (:func:`build_messages`)."""
        return build_messages(self.first, self.turns, self.window, self.max_chars)

    def add(self, reply: str, message: str) -> None:
        """One step's turns: the model's ``reply`` (as kept), then our ``message``."""
        self.turns.append({"role": "assistant", "content": reply})
        self.turns.append({"role": "user", "content": message})


def _step_line(step: int, max_steps: int, question: str | None = None) -> str:
    asked = f"The question: {question}\n" if question else ""
    left = max_steps - step + 1
    if left <= 1:
        return (f"{asked}Step {step} of {max_steps}: this is your LAST step. "
                "Reply with a ```repl block that calls FINAL(...).")
    return (f"{asked}Step {step} of {max_steps}. "
            "Reply with one thought line and one ```repl block.")


def _structure_tip(var: REPLVariable, value: Any) -> str | None:
    """One line on what ``search`` and ``split_documents`` see in a variable; None when
    there is none, or when reading the value failed (a value nested deeper than the
    readers' recursion reaches: the variable's listing says what it is)."""
    if var.type_name not in ("str", "dict", "list", "tuple"):
        return None
    try:
        return _read_structure(var, value)
    except (RecursionError, MemoryError):
        return None


def _read_structure(var: REPLVariable, value: Any) -> str | None:
    """:func:`_structure_tip`'s line, read from the value."""
    described = describe_structure(value) if value is not None else None
    if described:
        tip = f"`{var.name}` is {described}. Each search() hit names its document."
    elif var.type_name == "str":
        tip = (f"`{var.name}` is one string: search() hits give line numbers in it, "
               "counting from 1.")
    else:
        tip = ""
    views = detect_views(value) if value is not None else []
    data = "" if var.name == "context" else var.name  # the helpers read `context` by default
    lead = f"{data}, " if data else ""
    if "records" in views:
        fields = sample_fields(value)
        first = fields[0] if fields else "Name"
        tip += (f" It holds records with fields like {', '.join(map(repr, fields))}: "
                f"parse_records({data}) gives them as dicts, and "
                f"parse_records({lead}{first.replace('-', '_')}='x') the ones whose field "
                f"{first} is x.")
    if "python" in views:
        tip += (f" It holds Python code: code_outline({data}) lists its classes, "
                f"functions and methods; code_outline({lead}kind='class', parent=None) "
                "keeps the top-level classes.")
    return tip.strip() or None



NO_DATA_NOTE = (
    "(none) The user gave no data for this task: no variable, no `context`, no file. Do "
    "not invent data: never create `context`, sample text or example values to work on. "
    "Answer from your own knowledge, or compute the answer with code, then call "
    "FINAL(value) with it.")
"""What a task with no data is told in place of the variables' listing (the answer is
then reached without the user's data: ``answer_source`` ``no_input``)."""


def task_message(question: str, variables: Sequence[REPLVariable], max_steps: int,
                 values: Mapping[str, Any] | None = None, *, earlier: str | None = None,
                 tools: Sequence[str] = (), answer_type: str | None = None,
                 folder: str | None = None, no_data: bool = False,
                 mcp_tools: Sequence[str] = ()) -> str:
    """First user message: the question, the earlier tasks of the conversation
    (``earlier``, from
    :meth:`~rlm_kernel.engine.session.conversation.Conversation.prompt_section`: it opens
    with the previous task's question and answer, so what "that file" or "those" refers
    to is told right under the new question; the question is then restated in the step
    line, so it is read first and last), the variables'
    metadata, how each variable splits into documents (when ``values`` is given; see
    :func:`rlm_kernel.context.documents.describe_structure`), the user's
    tools (one line each, :func:`~rlm_kernel.engine.session.task.describe_tool`), the answer's
    type (:meth:`~rlm_kernel.engine.answer.types.AnswerType.prompt_line`), the working
    folder and its helpers (``folder``, from
    :meth:`~rlm_kernel.executors.workfolder.WorkFolder.prompt_section`), and the step
    line.  ``no_data``: the user gave no variable, tool or folder; the listing is
    :data:`NO_DATA_NOTE` (there is no data; invent none).  ``mcp_tools``: the MCP
    servers' tools, one line each
    (:func:`~rlm_kernel.engine.session.mcp_tools.describe_tools`), under
    :data:`MCP_TOOLS_HEADER`."""
    values = values or {}
    if variables:
        listing = "\n\n".join(var.format() for var in variables)
        tips = [t for v in variables if (t := _structure_tip(v, values.get(v.name)))]
        if tips:
            listing += "\n\n" + "\n".join(tips)
    else:
        listing = NO_DATA_NOTE if no_data else "(no data variables; answer with code and FINAL)"
    # a follow-up: the question first, right under it the previous task's question and
    # answer (what "that" refers to) and what the earlier tasks found, the question again
    # at the end (a small model otherwise answers the earlier task again)
    parts = [f"Task: {question}", *([earlier] if earlier else []),
             f"Variables in the REPL:\n{listing}"]
    if tools:
        parts.append("Your own functions in the REPL (call them like any function):\n"
                     + "\n".join(tools))
    if mcp_tools:
        parts.append(MCP_TOOLS_HEADER + "\n" + "\n".join(mcp_tools))
    if folder:
        parts.append(folder)
    if answer_type:
        parts.append(answer_type)
    parts.append(_step_line(1, max_steps, question if earlier else None))
    return "\n\n".join(parts)


MCP_TOOLS_HEADER = (
    "Tools of MCP servers in the REPL, grouped by server (call server.tool(name=value) "
    "with the arguments its line names; it returns what its line says after ->, a str is "
    "one text; a failed call raises MCPToolError):")
"""The heading of the task message's list of MCP tools."""

DOC_CHARS = 300
"""Characters of a tool's docstring (its first paragraph) told to the model."""


def describe_tool(name: str, tool: Callable[..., Any]) -> str:
    """One line for the model: ``name(signature) -> return: first paragraph of the
    docstring`` (the signature as :func:`inspect.signature` gives it, ``(...)`` when
    it has none)."""
    try:
        signature = str(inspect.signature(tool, eval_str=True))
    except Exception:  # noqa: BLE001 - an annotation that does not evaluate: as written
        try:
            signature = str(inspect.signature(tool))
        except (TypeError, ValueError):
            signature = "(...)"
    doc = inspect.getdoc(tool) or ""
    first = " ".join(doc.strip().split("\n\n", 1)[0].split())
    if len(first) > DOC_CHARS:
        first = first[: DOC_CHARS - 3] + "..."
    return f"- {name}{signature}" + (f": {first}" if first else "")


def first_prompt(question: str, variables: Sequence[REPLVariable],
                 values: Mapping[str, Any], task: TaskSpec, config: RLMConfig, *,
                 no_data: bool, mcp_tools: Sequence[str] = ()) -> str:
    """A run's first user message (:func:`task_message`) for ``task``'s terms: the
    earlier tasks (``config.history_code``: with their code), the user's tools, the
    working folder and the answer's type.

    Args:
        question: the task, in natural language.
        variables: the variables' metadata, in the order given.
        values: the variables' values by name (how each splits into documents).
        task: the task's terms (:class:`~rlm_kernel.engine.session.task.TaskSpec`).
        config: the run's settings (``max_iterations``, ``history_code``).
        no_data: the task gave no variable, tool or folder.
        mcp_tools: the MCP servers' tools, one line each.
    """
    history, folder, asked = task.history, task.folder, task.output_type
    return task_message(
        question, variables, config.max_iterations, values,
        earlier=history.prompt_section(code=config.history_code) if history else None,
        tools=[describe_tool(n, f) for n, f in task.tools.items()],
        folder=folder.prompt_section() if folder is not None else None,
        answer_type=asked.prompt_line() if asked else None, no_data=no_data,
        mcp_tools=mcp_tools)


def step_output_message(output: str, step: int, max_steps: int, *, failed: bool,
                        limit: int, question: str | None = None) -> str:
    """User message after a step: its output (cut to ``limit`` characters by
    :func:`rlm_kernel.text.middle_cut`: head, the one marker, tail) and the next step line."""
    shown = middle_cut(output.rstrip("\n"), limit) if output.strip() else "(no output)"
    hint = ""
    if failed:
        hint = "\nThe code failed. Read the error, fix the code, and try again."
    elif not output.strip():
        hint = "\nNothing was printed: use print() to see values."
    return f"Output:\n```\n{shown}\n```{hint}\n{_step_line(step, max_steps, question)}"


def no_code_message(step: int, max_steps: int, question: str | None = None) -> str:
    """User message when a reply had no ```repl block and no FINAL."""
    return ("Your reply had no ```repl block, so nothing ran. Write code in a ```repl block; "
            f"call FINAL(answer) in it when you know the answer.\n"
            f"{_step_line(step, max_steps, question)}")


def next_message(code: str, output: str, success: bool, step: int, max_steps: int, *,
                 limit: int, repetition: Repetition | None = None,
                 error: str | None = None, question: str | None = None) -> str:
    """The user message after a step.

    Args:
        code: the code that ran ("" if the reply had none).
        output: its full output; cut to ``limit`` characters for the model.
        success: False if it raised or timed out.
        step: the number of the step to come; max_steps: the step limit.
        repetition: the step repeats an earlier one: :func:`repetition_message` is
            put last, where the model reads it before it writes.
        error: a message to put first (e.g. a failed ``FINAL_VAR``).
        question: the task, restated before the step line so the answer's form
            stays in view however long the history grows.
    """
    if code:
        text = step_output_message(output, step, max_steps, failed=not success, limit=limit,
                                   question=question)
    else:
        text = no_code_message(step, max_steps, question)
    if repetition is not None:
        text = f"{text}\n{repetition_message(repetition)}"
    return f"{error}\n{text}" if error else text


def step_message(question: str, task: TaskSpec, config: RLMConfig, code: str, output: str,
                 success: bool, step: int, *, repetition: Repetition | None = None,
                 error: str | None = None) -> str:
    """The user message after ``step`` of a run (:func:`next_message`) under its
    settings: the output cut to ``config.max_output_chars``, the next step's line, and
    the question restated with the answer's type (``config.restate_question``)."""
    asked = task.output_type
    restated = question_with_type(question, asked.name if asked else None)
    return next_message(code, output, success, step + 1, config.max_iterations,
                        limit=config.max_output_chars, repetition=repetition, error=error,
                        question=restated if config.restate_question else None)


def repeated_step(rep: Repetition, error_chars: int = 200) -> str:
    """The step a :class:`~rlm_kernel.engine.repetition.Repetition` repeats and what is
    the same, as the model, the notebook's notices and a stuck run's error read it.

    Args:
        rep: the repetition found.
        error_chars: the repeated error line is cut to this many characters.

    Returns:
        ``step 2 (same code, same error: NameError: ...)``, or for a near repeat
        ``step 2 (same code and output but for their numbers)``.
    """
    error = rep.error if rep.error is None or len(rep.error) <= error_chars \
        else rep.error[: error_chars - 3] + "..."
    same = [f"same {kind}" for kind in rep.what if kind in ("code", "output")]
    if "near" in rep.what:
        same.append(f"same code and {'error' if error else 'output'} but for their numbers"
                    + (f": {error}" if error else ""))
    elif error:
        same.append(f"same error: {error}")
    return f"step {rep.step} ({', '.join(same)})"


def repetition_message(rep: Repetition) -> str:
    """What the model is told the first time a step repeats an earlier one
    (:class:`~rlm_kernel.engine.repetition.Repetition`): which step, what is the same,
    what to do instead, and that a second repetition ends the run."""
    if rep.error:
        advice = ("Do something different: change the part that fails (read the error), or "
                  "try another way.")
    else:
        advice = ("It finds nothing new. Do something different: if an output you saw shows "
                  "the answer, call FINAL(...) with it now; else try another way (another "
                  "search text, another helper, another variable).")
    if "near" in rep.what:
        advice += (" Changing a number does not make it a new step; to go through parts one "
                   "by one, use a loop in one step.")
    return (f"Your step repeats {repeated_step(rep)}. {advice} If you repeat a step again, the "
            "run stops.")


def stuck_message(rep: Repetition) -> str:
    """The last message of a run stopped for repeating itself after being told: ask
    for the best answer so far at once."""
    return (f"Your step repeats {repeated_step(rep)} again, so the run stops here. Reply now "
            "with one ```repl block that calls FINAL(answer) with your best answer from "
            "what you have seen.")


def answer_now_message(max_steps: int) -> str:
    """Last message after the step limit: ask for the answer at once."""
    return (f"You have used all {max_steps} steps. Reply now with one ```repl block that "
            "calls FINAL(answer) with your best answer from what you have seen.")


def _describe_value(value: Any, limit: int = 200) -> str:
    """``value`` as the model should see it in the check: its type and a short repr
    (:func:`~rlm_kernel.executors.guarded_repr`: the value's own code is guarded)."""
    text = guarded_repr(value, max_chars=limit + 3)
    if isinstance(value, bool) or value is None:
        kind = "the value"
    elif isinstance(value, (int, float)):
        kind = "the number"
    elif type(value) in (str, list, tuple, set, dict):  # exact types: len() is safe
        unit = "characters" if type(value) is str else "items"
        kind = f"a {'text' if type(value) is str else type(value).__name__} of " \
               f"{len(value):,} {unit}:"
    else:
        kind = f"a {type(value).__name__}:"
    return f"{kind} {text}"


def check_answer_message(question: str, value: Any, output: str, step: int,
                         max_steps: int) -> str:
    """User message that asks the model to check its FINAL value before it is accepted.

    The model sees the question again beside the value it chose (its type and
    repr), and either repeats the FINAL call or corrects it with code.  After
    "self-refine" (Madaan et al., 2023): one feedback turn by the same model.
    """
    shown = f"\nThe last output you saw:\n```\n{middle_cut(output.rstrip(), 800)}\n```" \
        if output.strip() else ""
    return (f"You called FINAL with {_describe_value(value)}{shown}\n"
            f"The question: {question}\n"
            "Check it before it is accepted: is that value exactly what the question asks "
            "for (a name, a file, a number, yes or no...), in the form it asks for? If it is, "
            "reply with the same FINAL call. If not, reply with a ```repl block that computes "
            "the right value and calls FINAL with it.\n"
            f"Step {step} of {max_steps}.")


def grounding_message(question: str, finding: str, step: int, max_steps: int) -> str:
    """User message that sends a ``FINAL`` whose value no code produced back once.

    Args:
        question: the task.
        finding: what the grounding check found
            (:func:`~rlm_kernel.engine.answer.grounding.finding`: the answer, and that no
            output or variable holds it).
        step: the number of the step to come; max_steps: the step limit.
    """
    return (f"Your FINAL answer was not accepted yet. {finding} Find it with code (print "
            "where it comes from), then call FINAL again; call FINAL with the same value "
            "only if the outputs support it.\n"
            f"The question: {question}\n"
            f"Step {step} of {max_steps}.")


# -- what the host says about a step's FINAL ----------------------------------------------
def final_var_failed(reason: str) -> str:
    """Put before the next step line when ``FINAL_VAR`` named no variable.

    Args:
        reason: the termination spec's message (the name, and the names that exist).
    """
    return f"FINAL_VAR failed: {reason}"


def answer_type_line(type_name: str, schema: str | None = None) -> str:
    """The task message's line about the answer's type
    (:meth:`~rlm_kernel.engine.answer.types.AnswerType.prompt_line`).

    Args:
        type_name: the type as written (``list[str]``, a model's name).
        schema: the type's JSON Schema as compact JSON, when the type has fields.
    """
    line = f"The answer must be of type {type_name}: call FINAL with a Python value of that type"
    if schema:
        line += f" (JSON Schema: {schema})"
    return line + "."


def answer_type_refusal(problem: str, type_name: str, holders: Sequence[str] = ()) -> str:
    """Put before the next step line when a ``FINAL`` value is not of the answer's type.

    Args:
        problem: why the value failed (the type check's message, redacted).
        type_name: the answer's type as written.
        holders: names of the model's variables that hold a value of that type.
    """
    text = (f"Your FINAL was not accepted: {problem}. Call FINAL with a value of type "
            f"{type_name}.")
    if holders:
        text += (f" Your variables of that type: {', '.join(holders)} (e.g. "
                 f"FINAL_VAR({holders[0]!r}) answers with the first).")
    return text


def answer_type_notice(problem: str) -> str:
    """The note added to a step's output (and its cell) when its ``FINAL`` value is
    refused for its type; ``problem`` as in :func:`answer_type_refusal`."""
    return f"FINAL not accepted: {problem}"


def ungrounded_answer(answer: str, part: str | None = None) -> str:
    """What the grounding check found
    (:func:`~rlm_kernel.engine.answer.grounding.finding`), one sentence that
    :func:`grounding_message` puts in front of the model.

    Args:
        answer: the answer's value as shown (a guarded repr).
        part: the part of the answer no evidence holds, as shown; None when it is
            the whole answer.
    """
    where = "does not appear in any output of your code or in any variable."
    if part is None:
        return f"The answer {answer} {where}"
    return f"The answer {answer} has {part}, which {where}"


def question_with_type(question: str, type_name: str | None) -> str:
    """The question as restated in the step line, with the answer's type when one is
    asked for (``... (answer type: list[str])``)."""
    return question + (f" (answer type: {type_name})" if type_name else "")


# -- what the host says after a step rebound a protected name -------------------------------
def restored_note(reserved: Sequence[str], inputs: Sequence[str],
                  tools: Sequence[str]) -> str | None:
    """The warnings added to a step's output (and its cell) when its code rebound or
    changed names the host puts back; None when there are none.

    Args:
        reserved: reserved names (``llm_query``, ``FINAL`` ...) that were restored.
        inputs: the task's input variables that were restored.
        tools: the user's tools that were restored.
    """
    notes = []
    if reserved:
        notes.append(f"Warning: {', '.join(reserved)} "
                     f"{'is' if len(reserved) == 1 else 'are'} reserved; the original "
                     "was restored.")
    if inputs:
        notes.append(f"Warning: {', '.join(inputs)} "
                     f"{'is' if len(inputs) == 1 else 'are'} the task's input and "
                     "read-only; the original was restored. Store results under a "
                     "new name.")
    if tools:
        notes.append(f"Warning: {', '.join(tools)} "
                     f"{'is a tool' if len(tools) == 1 else 'are tools'} of the "
                     "user's and read-only (its code, defaults and the globals it "
                     "reads); the original was restored.")
    return "\n".join(notes) if notes else None


# -- what model code gets back from a sub-call ----------------------------------------------
STEP_INTERRUPTED = "KeyboardInterrupt: the user stopped this step"
"""The end of the output of a step the user stopped (the stop button, Ctrl-C): the
step is kept in the trajectory, which a follow-up task's model reads."""


def sub_call_error(reason: str) -> str:
    """The text a failed sub-call returns to model code in place of a reply
    (``llm_query_batched``'s slot, ``rlm_query``): ``Error: <reason>``."""
    return f"Error: {reason}"


def sub_run_failed(stopped_by: str, error: str | None) -> str:
    """What ``rlm_query`` returns when its child run ended without an answer."""
    return sub_call_error(f"the sub-run ended without an answer ({stopped_by}: {error})")


def sub_call_prompt(prompt: str, context: Any = None) -> str:
    """The prompt of ``rlm_query`` answered by ``llm_query`` (beyond the depth limit):
    the prompt, then ``context`` as text when one is given."""
    return prompt_text(prompt) if context is None \
        else f"{prompt_text(prompt)}\n\n{prompt_text(context)}"


def prompt_text(value: Any) -> str:
    """``str(value)``, the text a sub-call sends for a prompt or context that is not a
    ``str``.

    Raises:
        TypeError: the value is nested too deep to be made text (``str`` raised
            ``RecursionError``); the message says so and to pass a ``str``.
    """
    if type(value) is str:
        return value
    try:
        return str(value)
    except RecursionError:
        raise TypeError(f"a {type(value).__name__} nested too deep to be made text was "
                        "given as a prompt; pass a str") from None
