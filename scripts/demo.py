"""The main job: ask the embedded model a question about the standard library.

The question ("which file defines the function X?") and its answer are found
with ``ast`` in the running interpreter's own ``email`` package; the model
only sees the folder as a dict ``{path: text}`` held in a REPL variable.
Exit code 0 when the model's answer is correct, 1 otherwise.

Run: ``.venv/bin/python scripts/demo.py [SEED] [--model M]`` (``make demo``).
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # evals/ beside the package

from evals.questions import defines_function_question  # noqa: E402
from rlm_kernel import RLM  # noqa: E402
from rlm_kernel.cli.run import StepPrinter  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("seed", nargs="?", type=int, default=0,
                        help="picks the function asked about (default 0)")
    parser.add_argument("--model", default=None,
                        help="litellm model string (default: the embedded local model)")
    args = parser.parse_args(argv)
    question = defines_function_question("email", random.Random(args.seed))
    print(f"Context: {question.context_path} ({len(question.context)} files, "
          f"{sum(map(len, question.context.values())):,} characters)")
    print(f"Question: {question.text}\n")
    result = RLM(args.model, observer=StepPrinter()).run(question.text, context=question.context)
    ok = question.check(result.answer)
    print(f"\nAnswer:   {result.answer}")
    print(f"Expected: {question.expected} (found with ast)")
    print(f"{'CORRECT' if ok else 'WRONG'}: {result.steps} steps, {result.llm_calls} LLM calls, "
          f"{result.prompt_tokens:,} prompt + {result.completion_tokens:,} completion tokens, "
          f"{result.seconds:.1f} s, stopped by {result.stopped_by}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
