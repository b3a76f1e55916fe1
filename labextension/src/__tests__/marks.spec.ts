/**
 * marks.ts's pure parts: a step cell's label, an answer cell's tone, which cells hold
 * prose.
 */

import { answerTone, holdsProse, stepLabel } from '../marks';

test('a step label names its step, its candidate and its run', () => {
  expect(stepLabel({ run_id: 'aa9b1234', step: 1, role: 'step' })).toBe('step 1 · run aa9b');
  expect(stepLabel({ run_id: 'aa9b1234', step: 1, role: 'step', candidate: 2 }))
    .toBe('step 1 · candidate 2 · run aa9b');
  expect(stepLabel({ run_id: 'aa9b1234', step: 3, role: 'step', candidate: null,
                     diverged: true }))
    .toBe('step 3 · run aa9b (output differs from the record)');
});

test('an answer cell takes the tone the kernel sent, and none it did not', () => {
  const answer = (tone: string | null | undefined, source = 'data') =>
    answerTone({ run_id: 'r', role: 'answer', answer_source: source, tone });
  expect(answer('ok')).toBe('ok');
  expect(answer('caution')).toBe('caution');
  expect(answer('error', 'vote')).toBe('error');
  // no mapping of its own: an answer from the data the kernel gave no tone is not green
  expect(answer(undefined)).toBeNull();
  expect(answer(null)).toBeNull();
  expect(answer('purple')).toBeNull(); // not a tone of docs/protocol.md
  // an interrupted run's "No answer": the kernel's tone, never one made up here
  expect(answerTone({ run_id: 'r', role: 'answer', answer_source: null, tone: 'caution' }))
    .toBe('caution');
  expect(answerTone({ run_id: 'r', role: 'step', tone: 'ok' })).toBeNull();
  expect(answerTone(null)).toBeNull();
});

test('a cell the model is writing, or whose reply a stop cut, says so', () => {
  expect(stepLabel({ run_id: 'aa9b1234', step: 2, role: 'step', writing: true }))
    .toBe('step 2 · run aa9b (the model is writing it)');
  expect(stepLabel({ run_id: 'aa9b1234', step: 2, role: 'step', cut: true }))
    .toBe('step 2 · run aa9b (cut by a stop while the model wrote it)');
});

test('the "answer now" call is labelled as that, not as a further step', () => {
  expect(stepLabel({ run_id: 'aa9b1234', step: 6, role: 'step', answer_now: true }))
    .toBe('answer now · run aa9b');
});

test('a %%rlm cell and a prose task cell hold prose; code does not', () => {
  const cell = (source: string, meta: Record<string, unknown> = {}) => ({
    getMetadata: (key: string) => meta[key],
    sharedModel: { getSource: () => source }
  });
  expect(holdsProse(cell('%%rlm\nHow many words?'))).toBe(true);
  expect(holdsProse(cell("What's the greeting?", { rlm_task: { prose: true } }))).toBe(true);
  expect(holdsProse(cell('x = 1'))).toBe(false);
  expect(holdsProse(cell('%%rlm continue --from 2\nx = 1'))).toBe(false);
});
