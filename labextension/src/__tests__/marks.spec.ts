/**
 * marks.ts's pure parts: a step cell's label and when an answer cell is marked amber.
 */

import { isCaution, stepLabel } from '../marks';

test('a step label names its step, its candidate and its run', () => {
  expect(stepLabel({ run_id: 'aa9b1234', step: 1, role: 'step' })).toBe('step 1 · run aa9b');
  expect(stepLabel({ run_id: 'aa9b1234', step: 1, role: 'step', candidate: 2 }))
    .toBe('step 1 · candidate 2 · run aa9b');
  expect(stepLabel({ run_id: 'aa9b1234', step: 3, role: 'step', candidate: null,
                     diverged: true }))
    .toBe('step 3 · run aa9b (output differs from the record)');
});

test('only an answer from the user\'s data is shown without caution', () => {
  const answer = (source: string | null | undefined) =>
    isCaution({ run_id: 'r', role: 'answer', answer_source: source });
  expect(answer('data')).toBe(false);
  expect(answer(null)).toBe(false); // an older kernel: not told
  expect(answer(undefined)).toBe(false);
  for (const kind of ['output', 'ungrounded', 'vote', 'no_input', 'forced']) {
    expect(answer(kind)).toBe(true);
  }
  expect(isCaution({ run_id: 'r', role: 'step', answer_source: 'vote' })).toBe(false);
  expect(isCaution(null)).toBe(false);
});
