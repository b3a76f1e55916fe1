/**
 * prose.ts: which cells hold prose, read with the Lezer Python parser JupyterLab's
 * editor highlights Python with (@lezer/python, under @codemirror/lang-python).
 */

import { parser } from '@lezer/python';

import { isRlmTaskCell, pythonCheck, readsAsProse } from '../prose';

const parses = pythonCheck({ parser });

test('a %%rlm cell holds a task in prose, its sub-commands with code bodies do not', () => {
  expect(isRlmTaskCell('%%rlm\nHow many words are there?')).toBe(true);
  expect(isRlmTaskCell('%%rlm --candidates 3\nHow long is the context?')).toBe(true);
  expect(isRlmTaskCell('%%rlm --model openai/gpt-4o-mini How long\nis it?')).toBe(true);
  expect(isRlmTaskCell('\n%%rlm')).toBe(true);
  expect(isRlmTaskCell('%%rlm continue --from 3 --run ab12\nx = 1')).toBe(false);
  expect(isRlmTaskCell('%%rlm recorded\n[{"step": 1}]')).toBe(false);
  expect(isRlmTaskCell('%%rlm -- continue the story\nplease')).toBe(true);
  expect(isRlmTaskCell('%rlm How many?')).toBe(false); // a line magic: code around it
  expect(isRlmTaskCell('%%rlmx\nx')).toBe(false);
  expect(isRlmTaskCell('x = 1\n%%rlm')).toBe(false);
});

test('the Python check is the parser\'s: prose has error nodes, code has none', () => {
  expect(parses('x = 1\nprint(x)')).toBe(true);
  expect(parses("What's the greeting? Say hello.")).toBe(false);
  expect(parses('How many files define foo')).toBe(false);
});

test('a cell reads as a prose task as the kernel\'s rule outlines it', () => {
  expect(readsAsProse("What's the greeting? Say hello.", parses)).toBe(true);
  expect(readsAsProse('Which file defines JSONDecoder?', parses)).toBe(true);
  expect(readsAsProse('How many words are there?\nCount them all.', parses)).toBe(true);
  // code, IPython syntax, code with a typo, a builtin first
  expect(readsAsProse('x = 1', parses)).toBe(false);
  expect(readsAsProse('print(x)', parses)).toBe(false);
  expect(readsAsProse('%%rlm\nHow many?', parses)).toBe(false);
  expect(readsAsProse('!ls -la', parses)).toBe(false);
  expect(readsAsProse('print the title of the book', parses)).toBe(false);
  expect(readsAsProse('import os sys', parses)).toBe(false);
  expect(readsAsProse('Compute the total\ntotal = 3 +', parses)).toBe(false);
  expect(readsAsProse('hello', parses)).toBe(false); // one word: a NameError to the kernel
  expect(readsAsProse('', parses)).toBe(false);
});
