/**
 * Which code cells hold prose, not code, so that their editor shows plain text
 * (marks.ts sets the cell's editor MIME type, JupyterLab's own switch of a cell's
 * highlighting): the body of a `%%rlm` cell, in any kernel, read from the cell's first
 * line as the user types; and a prose task cell of the `rlm` kernel, whose verdict is
 * the kernel's (`run_started`'s `prose`, runs.ts `markProse`) but which this module
 * reads as the cell is scheduled (`readsAsProse`), so that it is plain text while the
 * run starts, and stays so when it never starts (a missing API key).
 */

/** A `%%rlm` sub-command whose body is not prose: `continue` (the step's new code) and
 * `recorded` (a JSON list of exchanges); rlm_kernel/jupyter/magic.py `COMMANDS`. */
export const CODE_BODY_COMMANDS = ['continue', 'recorded'];

/**
 * Whether a cell's source is a `%%rlm` task: its first line is `%%rlm` with options
 * and maybe the task's first words, and its body is the task, in prose.  The
 * sub-commands of `CODE_BODY_COMMANDS` (a word of the line before `--`) are not.
 *
 * @param source - the cell's source.
 */
export function isRlmTaskCell(source: string): boolean {
  const first = source.replace(/^\s+/, '').split('\n', 1)[0];
  const match = /^%%rlm(?:\s+(.*))?$/.exec(first.replace(/\s+$/, ''));
  if (!match) {
    return false;
  }
  for (const word of (match[1] ?? '').split(/\s+/)) {
    if (word === '--') {
      break;
    }
    if (CODE_BODY_COMMANDS.includes(word)) {
      return false;
    }
  }
  return true;
}

/** A parser of Python source: true when the text parses without an error. */
export type PythonCheck = (text: string) => boolean;

/** Words a prose task does not start with: Python's keywords (soft ones too) and its
 * lower-case builtins (Python 3.11 `keyword.kwlist`, `keyword.softkwlist`, `dir(builtins)`;
 * tests/jupyter/test_labextension_units.py checks this list against the interpreter). */
export const PYTHON_WORDS = new Set([
  'False', 'None', 'True', 'abs', 'aiter', 'all', 'and', 'anext', 'any', 'as', 'ascii',
  'assert', 'async', 'await', 'bin', 'bool', 'break', 'breakpoint', 'bytearray',
  'bytes', 'callable', 'case', 'chr', 'class', 'classmethod', 'compile', 'complex',
  'continue', 'copyright', 'credits', 'def', 'del', 'delattr', 'dict', 'dir', 'divmod',
  'elif', 'else', 'enumerate', 'eval', 'except', 'exec', 'exit', 'filter', 'finally',
  'float', 'for', 'format', 'from', 'frozenset', 'getattr', 'global', 'globals',
  'hasattr', 'hash', 'help', 'hex', 'id', 'if', 'import', 'in', 'input', 'int', 'is',
  'isinstance', 'issubclass', 'iter', 'lambda', 'len', 'license', 'list', 'locals',
  'map', 'match', 'max', 'memoryview', 'min', 'next', 'nonlocal', 'not', 'object',
  'oct', 'open', 'or', 'ord', 'pass', 'pow', 'print', 'property', 'quit', 'raise',
  'range', 'repr', 'return', 'reversed', 'round', 'set', 'setattr', 'slice', 'sorted',
  'staticmethod', 'str', 'sum', 'super', 'try', 'tuple', 'type', 'vars', 'while',
  'with', 'yield', 'zip'
]);

/** The first line starts with two words (rlm_kernel/jupyter/prose.py `_WORDS`). */
const WORDS = /^[\p{L}][\p{L}\p{N}_'’-]*[,;:]?\s+\p{L}/u;
/** A line that assigns or defines (rlm_kernel/jupyter/prose.py `_ASSIGN`). */
const ASSIGN = /^\s*[\w.[\]'"]+\s*(?:[-+*/%&|^@]|\/\/|\*\*|>>|<<)?=(?!=)/;
const DEFINES = /^\s*(?:def|class|import|from)\s/;

/**
 * Whether a cell reads as a prose task in a kernel that runs prose cells as tasks: the
 * outline of the kernel's rule (rlm_kernel/jupyter/prose.py `is_prose`), used only
 * until the kernel says (`run_started`) or runs the cell as Python (a `SyntaxError`).
 * Not IPython syntax (`%`, `!`, `?`), does not parse as Python (`parses`: JupyterLab's
 * own Python parser), its first line starts with two words of which the first is not a
 * Python keyword or builtin, and no line assigns or defines.
 *
 * @param source - the cell's source.
 * @param parses - the Python check (`pythonCheck` over JupyterLab's language registry).
 */
export function readsAsProse(source: string, parses: PythonCheck): boolean {
  const text = source.trim();
  if (!text || '%!?'.includes(text[0])) {
    return false;
  }
  const lines = text.split('\n');
  const first = lines[0].trim();
  if (!WORDS.test(first) || PYTHON_WORDS.has(first.split(/[\s,;:]/, 1)[0])) {
    return false;
  }
  if (lines.some(line => ASSIGN.test(line) || DEFINES.test(line))) {
    return false;
  }
  return !parses(text);
}

/** What `pythonCheck` needs of a CodeMirror language: its Lezer parser. */
export interface ILezerLanguage {
  parser: {
    parse(text: string): {
      iterate(spec: { enter(node: { type: { isError: boolean } }): boolean | void }): void;
    };
  };
}

/**
 * A `PythonCheck` from a Lezer Python parser (the one JupyterLab's editor highlights
 * Python with, `@codemirror/lang-python`): the text parses when its tree holds no
 * error node.
 *
 * @param language - the language whose parser reads Python.
 */
export function pythonCheck(language: ILezerLanguage): PythonCheck {
  return (text: string) => {
    let error = false;
    language.parser.parse(text).iterate({
      enter: node => {
        if (node.type.isError) {
          error = true;
        }
        return !error;
      }
    });
    return !error;
  };
}
