"""The main job: ask the embedded model a question about the standard library.

The question ("which file defines the function X?") and its answer are found
with ``ast`` in the running interpreter's own ``email`` package; the model
only sees the folder as a dict ``{path: text}`` held in a REPL variable.
Exit code 0 when the model's answer is correct, 1 otherwise.
"""

from __future__ import annotations

import random
import sys

from evals.questions import defines_function_question
from rlm_kernel import RLM
from rlm_kernel.cli import StepPrinter


def main() -> int:
    question = defines_function_question("email", random.Random(sys.argv[1:2] and sys.argv[1] or 0))
    print(f"Context: {question.context_path} ({len(question.context)} files, "
          f"{sum(map(len, question.context.values())):,} characters)")
    print(f"Question: {question.text}\n")
    result = RLM(observer=StepPrinter()).run(question.text, context=question.context)
    ok = question.check(result.answer)
    print(f"\nAnswer:   {result.answer}")
    print(f"Expected: {question.expected} (found with ast)")
    print(f"{'CORRECT' if ok else 'WRONG'}: {result.steps} steps, {result.llm_calls} LLM calls, "
          f"{result.prompt_tokens:,} prompt + {result.completion_tokens:,} completion tokens, "
          f"{result.seconds:.1f} s, stopped by {result.stopped_by}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
