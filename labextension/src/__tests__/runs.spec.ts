/**
 * runs.ts over a plain notebook model: where step cells go, what re-running and
 * continuing a run replace, what step_finished writes on the cell.
 */

import {
  ICellLike,
  INotebookLike,
  PROSE_KEY,
  answerText,
  handleRunMessage,
  isProse,
  latestRunId,
  runOfCell,
  stepCode,
  supersedeSteps
} from '../runs';
import { RunMessage, isRunMessage } from '../protocol';

let next = 0;

class FakeCell implements ICellLike {
  constructor(init: Record<string, any>) {
    this.id = init.id ?? `c${next++}`;
    this.type = init.cell_type ?? 'code';
    this.source = init.source ?? '';
    this.metadata = { ...(init.metadata ?? {}) };
    if (this.type === 'code') {
      this.outputs = { add: (o: any) => this.out.push(o) };
    }
  }
  readonly id: string;
  readonly type: string;
  source: string;
  metadata: Record<string, unknown>;
  out: any[] = [];
  trusted = false;
  executionCount: number | null = null;
  outputs?: { add(o: any): number };
  readonly sharedModel = { setSource: (source: string) => { this.source = source; } };
  getMetadata(key: string): unknown {
    return this.metadata[key];
  }
  setMetadata(key: string, value: unknown): void {
    this.metadata[key] = value;
  }
  deleteMetadata(key: string): void {
    delete this.metadata[key];
  }
}

class FakeNotebook implements INotebookLike {
  list: FakeCell[] = [];
  readonly cells = {
    get: (i: number) => this.list[i],
    get length() {
      return 0;
    }
  };
  constructor(ids: string[]) {
    this.list = ids.map(id => new FakeCell({ id, source: id }));
    Object.defineProperty(this.cells, 'length', { get: () => this.list.length });
  }
  readonly sharedModel = {
    transact: (f: () => void) => f(),
    insertCell: (i: number, cell: Record<string, unknown>) => {
      this.list.splice(i, 0, new FakeCell(cell));
    },
    deleteCell: (i: number) => {
      this.list.splice(i, 1);
    }
  };
  roles(): string[] {
    return this.list.map(c => {
      const m = c.metadata.rlm as any;
      return m ? `${m.run_id}:${m.role}${m.step ? m.step : ''}` : c.id;
    });
  }
}

const base = (run: string, task = 'task') => ({ run_id: run, cell_id: task });

function run(nb: FakeNotebook, id: string, steps: number, extra: Partial<any> = {}): void {
  const task: string = extra.cell_id ?? 'task';
  const msgs: RunMessage[] = [
    { ...base(id, task), type: 'run_started', question: 'q', model: 'm', max_iterations: 9,
      variables: [], ...extra } as RunMessage
  ];
  const first = extra.continues ? extra.continues.from_step : 1;
  for (let s = first; s < first + steps; s++) {
    msgs.push({ ...base(id, task), type: 'step_added', step: s, source: `# why\nx = ${s}`,
                metadata: { rlm: { run_id: id, step: s, role: 'step', task_cell: task } } });
    msgs.push({ ...base(id, task), type: 'step_output', step: s,
                output: { output_type: 'stream', name: 'stdout', text: `${s}\n` } });
    msgs.push({ ...base(id, task), type: 'step_finished', step: s, execution_count: 10 + s,
                seconds: 0.1, success: true,
                metadata: { rlm: { run_id: id, step: s, role: 'step', task_cell: task,
                                   exchanges: [{ step: s, role: 'root', depth: 0,
                                                 response: `reply ${s}` }],
                                   output_sha256: 'ab' } },
                diverged: s === 2 });
  }
  msgs.push({ ...base(id, task), type: 'run_finished', answer: '42', stopped_by: 'final',
              error: null, seconds: 1,
              totals: { llm_calls: 1, prompt_tokens: 1, completion_tokens: 1, cost_usd: 0 } });
  for (const m of msgs) {
    expect(isRunMessage(m)).toBe(true);
    handleRunMessage(nb, m);
  }
}

test('steps go below the task cell in order, then the answer', () => {
  const nb = new FakeNotebook(['setup', 'task', 'after']);
  run(nb, 'r1', 3);
  expect(nb.roles()).toEqual(['setup', 'task', 'r1:step1', 'r1:step2', 'r1:step3',
                              'r1:answer', 'after']);
  const step1 = nb.list[2];
  expect(step1.out).toEqual([{ output_type: 'stream', name: 'stdout', text: '1\n' }]);
  expect(step1.executionCount).toBe(11);
  expect(step1.trusted).toBe(true);
});

test('a reply being written fills the cell that becomes its step; a cut one stays', () => {
  const nb = new FakeNotebook(['task', 'after']);
  const send = (m: any) => {
    expect(isRunMessage({ ...base('r1'), ...m })).toBe(true);
    handleRunMessage(nb, { ...base('r1'), ...m } as RunMessage);
  };
  const writing = (step: number, source: string, state = 'writing') =>
    send({ type: 'step_writing', step, source, state, tokens: 3, tokens_per_second: 20 });
  send({ type: 'run_started', question: 'q', model: 'm', max_iterations: 9, variables: [] });
  writing(1, '# I will');
  expect(nb.roles()).toEqual(['task', 'r1:step1', 'after']);
  expect((nb.list[1].metadata.rlm as any).writing).toBe(true);
  writing(1, '# I will look\nx = ');
  expect(nb.list[1].source).toBe('# I will look\nx = ');
  send({ type: 'step_added', step: 1, source: '# I will look\nx = 1',
         metadata: { rlm: { run_id: 'r1', step: 1, role: 'step', task_cell: 'task' } } });
  expect(nb.roles()).toEqual(['task', 'r1:step1', 'after']); // the same cell, not a new one
  expect(nb.list[1].source).toBe('# I will look\nx = 1');
  expect((nb.list[1].metadata.rlm as any).writing).toBeUndefined();
  writing(2, '# no code here');
  writing(2, '# no code here', 'dropped'); // a reply without code has no cell
  expect(nb.roles()).toEqual(['task', 'r1:step1', 'after']);
  writing(2, '# then the stop');
  writing(2, '# then the stop came', 'cut');
  expect(nb.roles()).toEqual(['task', 'r1:step1', 'r1:step2', 'after']);
  const cut = nb.list[2].metadata.rlm as any;
  expect(cut.cut).toBe(true);
  expect(cut.writing).toBeUndefined();
  expect(nb.list[2].source).toBe('# then the stop came');
});

test('step_finished writes the replay record and marks a diverged step', () => {
  const nb = new FakeNotebook(['task']);
  run(nb, 'r1', 2);
  const meta1 = nb.list[1].metadata.rlm as any;
  const meta2 = nb.list[2].metadata.rlm as any;
  expect(meta1.exchanges[0].response).toBe('reply 1');
  expect(meta1.output_sha256).toBe('ab');
  expect(meta1.diverged).toBeUndefined();
  expect(meta2.diverged).toBe(true);
});

test('re-running the task replaces its previous run', () => {
  const nb = new FakeNotebook(['task', 'after']);
  run(nb, 'r1', 3);
  run(nb, 'r2', 1);
  expect(nb.roles()).toEqual(['task', 'r2:step1', 'r2:answer', 'after']);
});

test('continuing from a step replaces that step and later ones, keeps the earlier', () => {
  const nb = new FakeNotebook(['task', 'after']);
  run(nb, 'r1', 3);
  run(nb, 'r2', 2, { continues: { run_id: 'r1', from_step: 2 } });
  expect(nb.roles()).toEqual(['task', 'r1:step1', 'r2:step2', 'r2:step3', 'r2:answer',
                              'after']);
  // a later re-run of the task replaces both runs' cells
  run(nb, 'r3', 1);
  expect(nb.roles()).toEqual(['task', 'r3:step1', 'r3:answer', 'after']);
});

test('continuing from step 1 puts the new steps right below the task cell', () => {
  const nb = new FakeNotebook(['task', 'after']);
  run(nb, 'r1', 2);
  run(nb, 'r2', 3, { continues: { run_id: 'r1', from_step: 1 } });
  expect(nb.roles()).toEqual(['task', 'r2:step1', 'r2:step2', 'r2:step3', 'r2:answer',
                              'after']);
});

test('continuing a continuation keeps the steps it inherited, in order', () => {
  const nb = new FakeNotebook(['task', 'after']);
  run(nb, 'r1', 3);
  run(nb, 'r2', 2, { continues: { run_id: 'r1', from_step: 2 } });
  // r2 from its step 2: r1's step 1 stays, the new step 2 goes below it
  run(nb, 'r3', 1, { continues: { run_id: 'r2', from_step: 2 } });
  expect(nb.roles()).toEqual(['task', 'r1:step1', 'r3:step2', 'r3:answer', 'after']);
  // the older run r1 from step 1: every later step and answer of the task goes
  run(nb, 'r4', 1, { continues: { run_id: 'r1', from_step: 1 } });
  expect(nb.roles()).toEqual(['task', 'r4:step1', 'r4:answer', 'after']);
});

test('a continuation leaves the runs of other task cells alone', () => {
  const nb = new FakeNotebook(['task', 'task2']);
  run(nb, 'r1', 2);
  run(nb, 'q1', 2, { cell_id: 'task2' });
  run(nb, 'r2', 1, { continues: { run_id: 'r1', from_step: 2 } });
  expect(nb.roles()).toEqual(['task', 'r1:step1', 'r2:step2', 'r2:answer', 'task2',
                              'q1:step1', 'q1:step2', 'q1:answer']);
});

test('messages of a run this notebook does not hold are ignored', () => {
  const nb = new FakeNotebook(['task']);
  const changed = handleRunMessage(nb, {
    ...base('zz'), type: 'step_added', step: 1, source: 'x',
    metadata: { rlm: { run_id: 'zz', step: 1, role: 'step' } }
  });
  expect(changed).toBe(false);
  expect(nb.roles()).toEqual(['task']);
  expect(isRunMessage({ type: 'other', run_id: 'x' })).toBe(false);
});

test('answer text, latest run, step code', () => {
  expect(answerText({ answer: '3', stopped_by: 'final' })).toBe('**Answer:** 3');
  expect(answerText({ answer: null, stopped_by: 'error', error: 'boom' }))
    .toBe('**No answer** (stopped by error): boom');
  const nb = new FakeNotebook(['task']);
  run(nb, 'r1', 1);
  expect(latestRunId(nb.list, ['r0', 'r1'])).toBe('r1');
  expect(latestRunId(nb.list, [])).toBe('r1');
  expect(stepCode('# why\n#\n# more\nx = 1\nprint(x)')).toBe('x = 1\nprint(x)');
});

test('scheduling a task cell empties its old step cells (Run All runs nothing old)', () => {
  const nb = new FakeNotebook(['task', 'other']);
  run(nb, 'r1', 2);
  nb.list.push(new FakeCell({ id: 'foreign', source: 'y = 1',
                              metadata: { rlm: { run_id: 'r9', step: 1, role: 'step',
                                                 task_cell: 'elsewhere' } } }));
  expect(supersedeSteps(nb, 'task')).toBe(2);
  expect(nb.list.filter(c => (c.metadata.rlm as any)?.task_cell === 'task' &&
                        (c.metadata.rlm as any)?.role === 'step').map(c => c.source))
    .toEqual(['', '']);
  expect(nb.list[nb.list.length - 1].source).toBe('y = 1');
});

test('export takes the selected task cell\'s run, the latest only when it ran none', () => {
  const nb = new FakeNotebook(['setup', 'taskA', 'taskB', 'plain']);
  run(nb, 'a1', 2, { cell_id: 'taskA' });
  run(nb, 'b1', 1, { cell_id: 'taskB' });
  const order = ['a1', 'b1'];
  expect(latestRunId(nb.list, order)).toBe('b1');
  // the task cell, one of its step cells, its answer cell: its run, not the latest
  expect(runOfCell(nb.list, 'taskA', order)).toBe('a1');
  const a1Cells = nb.list.filter(c => (c.metadata.rlm as any)?.run_id === 'a1');
  expect(a1Cells.map(c => runOfCell(nb.list, c.id, order))).toEqual(['a1', 'a1', 'a1']);
  expect(runOfCell(nb.list, 'taskB', order)).toBe('b1');
  // cells that ran no task: none (the caller falls back to the latest run)
  expect(runOfCell(nb.list, 'setup', order)).toBeNull();
  expect(runOfCell(nb.list, 'plain', order)).toBeNull();
  expect(runOfCell(nb.list, null, order)).toBeNull();
  expect(runOfCell(nb.list, 'gone', order)).toBeNull();
  // re-run and continued: the task cell's latest run, with or without this
  // session's start order (a reopened notebook)
  run(nb, 'a2', 1, { cell_id: 'taskA' });
  run(nb, 'a3', 2, { cell_id: 'taskA', continues: { run_id: 'a2', from_step: 2 } });
  expect(runOfCell(nb.list, 'taskA', [...order, 'a2', 'a3'])).toBe('a3');
  expect(runOfCell(nb.list, 'taskA', [])).toBe('a3');
  const kept = nb.list.find(c => (c.metadata.rlm as any)?.run_id === 'a2')!;
  expect(runOfCell(nb.list, kept.id, [])).toBe('a3');
  expect(runOfCell(nb.list, 'taskB', [])).toBe('b1');
});

const totals = { llm_calls: 1, prompt_tokens: 1, completion_tokens: 1, cost_usd: 0 };

/** A candidates run: steps [candidate, step] in the order they come, then the end. */
function candidatesRun(nb: FakeNotebook, id: string, steps: [number, number][],
                       chosen: number): void {
  const msgs: RunMessage[] = [
    { ...base(id), type: 'run_started', question: 'q', model: 'm', max_iterations: 9,
      variables: [] }
  ];
  let count = 3;
  for (const [c, s] of steps) {
    const rlm = { run_id: id, step: s, role: 'step', task_cell: 'task', candidate: c };
    msgs.push({ ...base(id), type: 'step_added', step: s, source: `x = ${c}${s}`,
                metadata: { rlm } });
    msgs.push({ ...base(id), type: 'step_finished', step: s, execution_count: count++,
                seconds: 0.1, success: true, metadata: { rlm }, diverged: false });
  }
  msgs.push({ ...base(id), type: 'run_finished', answer: '42', stopped_by: 'final',
              error: null, seconds: 1, totals, answer_source: 'vote', votes: [2, 3],
              answer_note: 'Answer: chosen by a vote of candidates (2 of 3 agreed)',
              chosen,
              candidates: [1, 2, 3].map(i => ({ index: i, answer: '42', votes: 2, steps: 1,
                                               stopped_by: 'final', seconds: 1,
                                               chosen: i === chosen })) });
  for (const m of msgs) {
    expect(isRunMessage(m)).toBe(true);
    handleRunMessage(nb, m);
  }
}

test('a candidates run keeps the chosen candidate\'s cells, the others go', () => {
  const nb = new FakeNotebook(['task', 'after']);
  candidatesRun(nb, 'r1', [[1, 1], [2, 1], [2, 2], [3, 1]], 2);
  expect(nb.roles()).toEqual(['task', 'r1:step1', 'r1:step2', 'r1:answer', 'after']);
  expect(nb.list.slice(1, 3).map(c => (c.metadata.rlm as any).candidate)).toEqual([2, 2]);
  expect(nb.list.slice(1, 3).map(c => c.executionCount)).toEqual([4, 5]);
  const answer = nb.list[3];
  expect(answer.source).toBe('**Answer:** 42\n\n' +
                             '*Chosen by a vote of candidates (2 of 3 agreed).*');
  expect((answer.metadata.rlm as any).answer_source).toBe('vote');
  // the last candidate chosen: its one cell stays, right below the task cell
  const nb2 = new FakeNotebook(['task']);
  candidatesRun(nb2, 'r2', [[1, 1], [1, 2], [2, 1], [3, 1]], 3);
  expect(nb2.roles()).toEqual(['task', 'r2:step1', 'r2:answer']);
  expect(nb2.list[1].source).toBe('x = 31');
});

test('a run without candidates removes no cell at its end', () => {
  const nb = new FakeNotebook(['task']);
  run(nb, 'r1', 2, {});
  expect(nb.roles()).toEqual(['task', 'r1:step1', 'r1:step2', 'r1:answer']);
});

test('an answer not from the data says how it was reached, one from the data does not', () => {
  expect(answerText({ answer: '3', stopped_by: 'final', answer_note: null }))
    .toBe('**Answer:** 3');
  expect(answerText({ answer: 'x', stopped_by: 'final',
                      answer_note: 'Answer: reached without reading any data the user gave' }))
    .toBe('**Answer:** x\n\n*Reached without reading any data the user gave.*');
  expect(answerText({ answer: '5', stopped_by: 'stuck',
                      answer_note: 'Answer: the best answer so far' }))
    .toBe('**Answer** (stopped by stuck): 5\n\n*The best answer so far.*');
  expect(answerText({ answer: null, stopped_by: 'stuck', error: 'step 3 repeats step 2' }))
    .toBe('**No answer** (stopped by stuck): step 3 repeats step 2');
  expect(answerText({ answer: null, stopped_by: 'max_iterations', error: null }))
    .toBe('**No answer** (stopped by max_iterations)');
});

test('run_started marks a prose task cell, and a later code run unmarks it', () => {
  const nb = new FakeNotebook(['task']);
  run(nb, 'r1', 1, { prose: true });
  const task = nb.list[0];
  expect(isProse(task)).toBe(true);
  expect(task.metadata[PROSE_KEY]).toEqual({ prose: true });
  run(nb, 'r2', 1, { prose: false });
  expect(isProse(task)).toBe(false);
  expect(PROSE_KEY in task.metadata).toBe(false);
  // a kernel that does not say (the python3 kernel, an older one): left as it is
  run(nb, 'r3', 1, { prose: true });
  run(nb, 'r4', 1);
  expect(isProse(task)).toBe(true);
});

test('the answer cell shows the ending words and keeps the tone the kernel sent', () => {
  const nb = new FakeNotebook(['task']);
  const base = { run_id: 'r9', cell_id: 'task' };
  const totals = { llm_calls: 1, prompt_tokens: 1, completion_tokens: 1, cost_usd: 0 };
  handleRunMessage(nb, { ...base, type: 'run_started', question: 'q', model: 'm',
                         max_iterations: 6, variables: [] });
  handleRunMessage(nb, { ...base, type: 'step_added', step: 1, source: 'x = 1',
                         metadata: { rlm: { run_id: 'r9', step: 1, role: 'step' } } });
  handleRunMessage(nb, { ...base, type: 'step_added', step: 2, source: "FINAL('x')",
                         answer_now: true,
                         metadata: { rlm: { run_id: 'r9', step: 2, role: 'step' } } });
  handleRunMessage(nb, { ...base, type: 'run_finished', answer: null, stopped_by: 'interrupt',
                         error: 'KeyboardInterrupt at step 2', seconds: 1, totals, answer_source: null,
                         answer_note: null, tone: 'caution', ending: 'no_answer',
                         ending_words: 'No answer: you interrupted the run.' });
  expect(nb.roles()).toEqual(['task', 'r9:step1', 'r9:step2', 'r9:answer']);
  expect((nb.list[2].metadata.rlm as any).answer_now).toBe(true);
  expect((nb.list[1].metadata.rlm as any).answer_now).toBeUndefined();
  const answer = nb.list[3];
  expect(answer.source).toBe('**No answer: you interrupted the run.**\n\nKeyboardInterrupt at step 2');
  expect(answer.metadata.rlm).toMatchObject({ tone: 'caution', ending: 'no_answer',
                                              ending_words: 'No answer: you interrupted the run.' });
  expect(answerText({ answer: '4', stopped_by: 'final',
                      ending_words: "The answer was computed by the model's code from your data.",
                      answer_note: null }))
    .toBe("**Answer:** 4\n\n*The answer was computed by the model's code from your data.*");
  expect(answerText({ answer: null, stopped_by: 'stuck', error: 'No answer: the run stopped',
                      ending_words: 'No answer: the run stopped because the model repeated itself.' }))
    .toBe('**No answer: the run stopped because the model repeated itself.**');
});
