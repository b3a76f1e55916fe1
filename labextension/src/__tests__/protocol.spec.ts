/**
 * protocol.ts: telling run messages apart from other comm data, reading a cell's
 * `metadata.rlm`.
 */

import {
  FRONTEND_TARGET,
  IRunStarted,
  IStepFinished,
  RUN_TARGET,
  RunMessage,
  isRunMessage,
  rlmMeta
} from '../protocol';

const cell = (meta: Record<string, unknown>) => ({
  getMetadata: (key: string) => meta[key]
});

test('comm targets match docs/protocol.md', () => {
  expect(FRONTEND_TARGET).toBe('rlm_kernel.frontend');
  expect(RUN_TARGET).toBe('rlm_kernel.run');
});

test('isRunMessage accepts the five message types with a run id', () => {
  for (const type of [
    'run_started',
    'step_added',
    'step_output',
    'step_finished',
    'run_finished'
  ]) {
    expect(isRunMessage({ type, run_id: '3f2a9c1e', cell_id: null })).toBe(true);
  }
});

test('isRunMessage rejects other data', () => {
  expect(isRunMessage(null)).toBe(false);
  expect(isRunMessage('run_started')).toBe(false);
  expect(isRunMessage({ version: 1 })).toBe(false);
  expect(isRunMessage({ type: 'step_added' })).toBe(false);
  expect(isRunMessage({ type: 'step_added', run_id: 3 })).toBe(false);
  expect(isRunMessage({ type: 'run_paused', run_id: '3f2a9c1e' })).toBe(false);
});

test('the union narrows on type', () => {
  const data: unknown = {
    type: 'step_finished',
    run_id: 'aa',
    cell_id: 'task',
    step: 2,
    execution_count: 7,
    seconds: 0.1,
    success: true,
    diverged: true,
    metadata: { rlm: { run_id: 'aa', step: 2, role: 'step', output_sha256: 'ab' } }
  };
  expect(isRunMessage(data)).toBe(true);
  const msg = data as RunMessage;
  let seen: IStepFinished | IRunStarted | null = null;
  switch (msg.type) {
    case 'step_finished':
      seen = msg;
      expect(msg.metadata?.rlm.output_sha256).toBe('ab');
      expect(msg.diverged).toBe(true);
      break;
    case 'run_started':
      seen = msg;
      break;
  }
  expect(seen?.type).toBe('step_finished');
});

test('rlmMeta reads metadata.rlm, or null', () => {
  expect(rlmMeta(cell({ rlm: { run_id: 'aa', role: 'step', step: 1 } }))).toEqual({
    run_id: 'aa',
    role: 'step',
    step: 1
  });
  expect(rlmMeta(cell({}))).toBeNull();
  expect(rlmMeta(cell({ rlm: 'x' }))).toBeNull();
  expect(rlmMeta(cell({ rlm: null }))).toBeNull();
});
