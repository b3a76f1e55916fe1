/**
 * Run state and cell insertion over a notebook model: each step of a run becomes a
 * code cell below the previous one (below the task cell for the first), then an
 * answer cell.  Works on the shared model only (never the active cell), so it is
 * unit-tested with plain objects (src/__tests__/runs.spec.ts).
 */

import type * as nbformat from '@jupyterlab/nbformat';

import {
  IRunFinished,
  IRunStarted,
  IStepAdded,
  IStepFinished,
  IStepOutput,
  IStepWriting,
  RunMessage,
  rlmMeta
} from './protocol';

/** What runs.ts needs of a cell model (JupyterLab's ICellModel has it). */
export interface ICellLike {
  readonly id: string;
  readonly type: string;
  getMetadata(key: string): unknown;
  setMetadata(key: string, value: unknown): void;
  deleteMetadata?(key: string): void;
  trusted?: boolean;
  /** Code cells: their outputs and count. */
  outputs?: { add(output: nbformat.IOutput): number };
  executionCount?: number | null;
  /** The cell's shared model, whose source can be replaced. */
  readonly sharedModel?: { setSource(source: string): void };
}

/** What runs.ts needs of a notebook model (JupyterLab's INotebookModel has it). */
export interface INotebookLike {
  readonly cells: { readonly length: number; get(index: number): ICellLike };
  readonly sharedModel: {
    transact(f: () => void): void;
    insertCell(index: number, cell: Record<string, unknown>): unknown;
    deleteCell(index: number): void;
  };
}

/** The state of one run in one notebook model. */
export interface IRunState {
  runId: string;
  taskCellId: string;
  /** The cell the next step goes below: the last step cell, or the task cell. */
  lastCellId: string;
  /** step number -> cell id */
  steps: Map<number, string>;
  finished: boolean;
}

/** Runs per notebook model (shared by every view of that notebook). */
const runsByModel = new WeakMap<object, Map<string, IRunState>>();
/** Run ids in the order they started in this browser session, per model. */
const runOrderByModel = new WeakMap<object, string[]>();

/** The runs of a model, by run id. */
export function runsOf(model: INotebookLike): Map<string, IRunState> {
  let runs = runsByModel.get(model);
  if (!runs) {
    runs = new Map();
    runsByModel.set(model, runs);
  }
  return runs;
}

/** Run ids of a model in the order they started in this session. */
export function runOrderOf(model: INotebookLike): string[] {
  let order = runOrderByModel.get(model);
  if (!order) {
    order = [];
    runOrderByModel.set(model, order);
  }
  return order;
}

/** Index of the cell with this id in the model, or -1. */
export function indexOfCell(model: INotebookLike, id: string | null): number {
  if (!id) {
    return -1;
  }
  for (let i = 0; i < model.cells.length; i++) {
    if (model.cells.get(i).id === id) {
      return i;
    }
  }
  return -1;
}

/**
 * Apply one protocol message of a run to a notebook model.
 * Returns true when cells were added or changed (the caller re-marks them).
 */
export function handleRunMessage(model: INotebookLike, data: RunMessage): boolean {
  const runs = runsOf(model);
  if (data.type === 'run_started') {
    return startRun(model, runs, data);
  }
  const run = runs.get(data.run_id);
  if (!run) {
    return false; // not ours (another notebook on this kernel), or another view took it
  }
  switch (data.type) {
    case 'step_writing':
      writeStep(model, run, data);
      return true;
    case 'step_added':
      addStep(model, run, data);
      return true;
    case 'step_output':
      addOutput(model, run, data);
      return false;
    case 'step_finished':
      finishStep(model, run, data);
      return true;
    case 'run_finished':
      finishRun(model, run, data);
      return true;
  }
  return false;
}

/** Delete the cells for which `drop(meta)` holds, last first, in one transaction. */
function deleteCells(
  model: INotebookLike,
  drop: (meta: ReturnType<typeof rlmMeta>) => boolean
): void {
  model.sharedModel.transact(() => {
    for (let i = model.cells.length - 1; i >= 0; i--) {
      if (drop(rlmMeta(model.cells.get(i)))) {
        model.sharedModel.deleteCell(i);
      }
    }
  });
}

function startRun(
  model: INotebookLike,
  runs: Map<string, IRunState>,
  data: IRunStarted
): boolean {
  if (runs.has(data.run_id)) {
    return false; // another view of this notebook already took it
  }
  let taskId = data.cell_id;
  let lastCellId = taskId;
  if (data.continues) {
    // Continuing run C from step N: the steps N.. and the answer shown under C's
    // task cell go (C's, and those of any run that continued C or that C
    // continued: they share the task cell); this run's steps follow the step N-1
    // cell left (or the task cell).
    const { run_id: old, from_step: from } = data.continues;
    for (let i = 0; i < model.cells.length; i++) {
      const meta = rlmMeta(model.cells.get(i));
      if (meta && meta.run_id === old && meta.task_cell) {
        taskId = meta.task_cell;
        break;
      }
    }
    const task = taskId;
    const chain = (meta: ReturnType<typeof rlmMeta>) =>
      !!meta && (meta.run_id === old || (!!task && meta.task_cell === task));
    deleteCells(
      model,
      meta =>
        chain(meta) &&
        (meta!.role === 'answer' || (meta!.role === 'step' && Number(meta!.step) >= from))
    );
    let before: string | null = null;
    for (let i = 0; i < model.cells.length; i++) {
      const meta = rlmMeta(model.cells.get(i));
      if (chain(meta) && meta!.role === 'step' && Number(meta!.step) < from) {
        before = model.cells.get(i).id;
      }
    }
    lastCellId = before ?? taskId;
  } else if (taskId && indexOfCell(model, taskId) >= 0) {
    // Re-running a task replaces the cells of its previous run(s).
    const task = taskId;
    deleteCells(model, meta => !!meta && meta.task_cell === task);
  }
  if (!taskId || !lastCellId || indexOfCell(model, lastCellId) < 0) {
    return false; // the task cell is not in this notebook
  }
  if (data.prose !== undefined && !data.continues) {
    markProse(model.cells.get(indexOfCell(model, taskId)), !!data.prose);
  }
  runs.set(data.run_id, {
    runId: data.run_id,
    taskCellId: taskId,
    lastCellId,
    steps: new Map(),
    finished: false
  });
  runOrderOf(model).push(data.run_id);
  return true;
}

/** The metadata key that marks a prose task cell: `{prose: true}`. */
export const PROSE_KEY = 'rlm_task';

/** Whether a cell is marked as a prose task cell (shown as plain text). */
export function isProse(cell: { getMetadata(key: string): unknown }): boolean {
  const meta = cell.getMetadata(PROSE_KEY);
  return !!meta && typeof meta === 'object' && !!(meta as { prose?: unknown }).prose;
}

/** Mark (or unmark) a task cell as prose; marks.ts then sets its editor's mode. */
export function markProse(cell: ICellLike, prose: boolean): void {
  if (prose) {
    if (!isProse(cell)) {
      cell.setMetadata(PROSE_KEY, { prose: true });
    }
  } else if (cell.getMetadata(PROSE_KEY) !== undefined) {
    if (cell.deleteMetadata) {
      cell.deleteMetadata(PROSE_KEY);
    } else {
      cell.setMetadata(PROSE_KEY, { prose: false });
    }
  }
}

/** Where the next cell of a run goes: below its last cell still present. */
export function insertIndex(model: INotebookLike, run: IRunState): number {
  let index = indexOfCell(model, run.lastCellId);
  if (index < 0) {
    // The last step cell was deleted by the user: use the lowest remaining
    // cell of the run, else the task cell, else the end.
    for (let i = 0; i < model.cells.length; i++) {
      const meta = rlmMeta(model.cells.get(i));
      if (meta && meta.run_id === run.runId) {
        index = i;
      }
    }
    if (index < 0) {
      index = indexOfCell(model, run.taskCellId);
    }
    if (index < 0) {
      return model.cells.length;
    }
  }
  return index + 1;
}

/**
 * The model writes a step's reply: its cell (inserted where the step's cell goes, marked
 * `writing`) takes the reply so far; `cut` keeps it, marked so; `dropped` removes it.
 */
function writeStep(model: INotebookLike, run: IRunState, data: IStepWriting): void {
  const step = Number(data.step);
  const id = run.steps.get(step) ?? null;
  const index = indexOfCell(model, id);
  const cell = index >= 0 ? model.cells.get(index) : null;
  const meta = cell ? rlmMeta(cell) : null;
  if (!cell || !meta?.writing) {
    if (data.state === 'writing' && !cell) {
      insertStepCell(model, run, step, data.source, {
        ...(data.answer_now ? { answer_now: true } : {}),
        writing: true
      });
    }
    return; // a step cell already added is the kernel's, not a reply being written
  }
  if (data.state === 'dropped') {
    model.sharedModel.deleteCell(index);
    run.steps.delete(step);
    if (run.lastCellId === id) {
      run.lastCellId = index > 0 ? model.cells.get(index - 1).id : run.taskCellId;
    }
    return;
  }
  cell.sharedModel?.setSource(data.source ?? '');
  if (data.state === 'cut') {
    const rest = { ...meta };
    delete rest.writing;
    cell.setMetadata('rlm', { ...rest, cut: true });
  }
}

function addStep(model: INotebookLike, run: IRunState, data: IStepAdded): void {
  const step = Number(data.step);
  const extra = {
    ...(data.answer_now ? { answer_now: true } : {}),
    ...(data.metadata?.rlm ?? {})
  };
  const written = stepCell(model, run, step);
  if (written && rlmMeta(written)?.writing) {
    // The cell of the reply as it was written becomes the step's cell.
    written.sharedModel?.setSource(data.source ?? '');
    written.setMetadata('rlm', {
      run_id: run.runId,
      step,
      role: 'step',
      task_cell: run.taskCellId,
      ...extra
    });
    return;
  }
  insertStepCell(
    model,
    run,
    step,
    data.source,
    extra,
    data.metadata as unknown as Record<string, unknown> | undefined
  );
}

/** Insert a run's step cell below its last cell (`metadata.rlm`: the run, step, role and
 * task cell, then `extra`). */
function insertStepCell(
  model: INotebookLike,
  run: IRunState,
  step: number,
  source: string | undefined,
  extra: Record<string, unknown>,
  cellMetadata?: Record<string, unknown>
): void {
  const metadata = {
    ...(cellMetadata ?? {}),
    rlm: {
      run_id: run.runId,
      step,
      role: 'step',
      task_cell: run.taskCellId,
      ...extra
    }
  };
  const index = insertIndex(model, run);
  model.sharedModel.insertCell(index, {
    cell_type: 'code',
    source: source ?? '',
    metadata,
    outputs: [],
    execution_count: null
  });
  const cell = model.cells.get(index);
  // Outputs come live from the kernel, as for a cell the user ran.
  cell.trusted = true;
  run.steps.set(step, cell.id);
  run.lastCellId = cell.id;
}

function stepCell(model: INotebookLike, run: IRunState, step: number): ICellLike | null {
  const index = indexOfCell(model, run.steps.get(Number(step)) ?? null);
  if (index < 0) {
    return null;
  }
  const cell = model.cells.get(index);
  return cell.type === 'code' ? cell : null;
}

function addOutput(model: INotebookLike, run: IRunState, data: IStepOutput): void {
  const cell = stepCell(model, run, data.step);
  if (cell && cell.outputs && data.output) {
    // OutputAreaModel merges consecutive stream outputs of the same name.
    cell.outputs.add(data.output);
  }
}

function finishStep(model: INotebookLike, run: IRunState, data: IStepFinished): void {
  const cell = stepCell(model, run, data.step);
  if (!cell) {
    return;
  }
  if (typeof data.execution_count === 'number') {
    cell.executionCount = data.execution_count;
  }
  const rlm = { ...(rlmMeta(cell) ?? {}), ...(data.metadata?.rlm ?? {}) };
  if (data.diverged) {
    rlm.diverged = true;
  }
  cell.setMetadata('rlm', rlm);
}

/** The answer cell's markdown: the answer (or that there is none), then the sentence
 * that says how the run ended (`ending_words`, the engine's words, shown as they are;
 * a kernel that does not send them: its `answer_note`, and why it stopped). */
export function answerText(data: {
  answer?: string | null;
  stopped_by?: string;
  error?: string | null;
  answer_note?: string | null;
  ending_words?: string | null;
}): string {
  const stopped = data.stopped_by ?? 'unknown';
  const answer = data.answer;
  const words = data.ending_words;
  if (answer !== null && answer !== undefined) {
    if (words) {
      return `**Answer:** ${answer}\n\n*${words}*`;
    }
    const head =
      stopped === 'final'
        ? `**Answer:** ${answer}`
        : `**Answer** (stopped by ${stopped}): ${answer}`;
    return data.answer_note ? `${head}\n\n*${noteSentence(data.answer_note)}*` : head;
  }
  const reason = data.error ?? '';
  if (words) {
    return reason && !words.includes(reason) ? `**${words}**\n\n${reason}` : `**${words}**`;
  }
  return `**No answer** (stopped by ${stopped})${reason ? `: ${reason}` : ''}`;
}

/** The kernel's note ("Answer: reached without ...") as a sentence below the answer:
 * "Reached without ...". */
export function noteSentence(note: string): string {
  const text = note.replace(/^Answer:\s*/, '').trim();
  const sentence = text.charAt(0).toUpperCase() + text.slice(1);
  return /[.!?]$/.test(sentence) ? sentence : `${sentence}.`;
}

/**
 * A candidates run has ended: remove the step cells of the candidates not chosen
 * (the kernel shows them folded into one summary output of the task cell), so the
 * chosen candidate's steps are the run's cells.  Returns how many cells went.
 */
export function dropOtherCandidates(
  model: INotebookLike,
  run: IRunState,
  chosen: number
): number {
  let dropped = 0;
  deleteCells(model, meta => {
    const other =
      !!meta &&
      meta.run_id === run.runId &&
      meta.role === 'step' &&
      meta.candidate !== undefined &&
      meta.candidate !== null &&
      Number(meta.candidate) !== chosen;
    if (other) {
      dropped++;
    }
    return other;
  });
  for (const [step, id] of Array.from(run.steps.entries())) {
    if (indexOfCell(model, id) < 0) {
      run.steps.delete(step);
    }
  }
  return dropped;
}

function finishRun(model: INotebookLike, run: IRunState, data: IRunFinished): void {
  if (run.finished) {
    return;
  }
  run.finished = true;
  if (typeof data.chosen === 'number') {
    dropOtherCandidates(model, run, data.chosen);
  }
  const index = insertIndex(model, run);
  model.sharedModel.insertCell(index, {
    cell_type: 'markdown',
    source: answerText(data),
    metadata: {
      rlm: {
        run_id: run.runId,
        role: 'answer',
        task_cell: run.taskCellId,
        answer_source: data.answer_source ?? null,
        answer_note: data.answer_note ?? null,
        tone: data.tone ?? null,
        ending: data.ending ?? null,
        ending_words: data.ending_words ?? null
      }
    }
  });
  run.lastCellId = model.cells.get(index).id;
}

/** The run to export: the latest one started in this session, else the last in the notebook. */
export function latestRunId(
  cells: Iterable<{ getMetadata(key: string): unknown }>,
  startedOrder: string[] = []
): string | null {
  const present = new Set<string>();
  let last: string | null = null;
  for (const cell of cells) {
    const meta = rlmMeta(cell);
    if (meta && meta.run_id) {
      present.add(meta.run_id);
      last = meta.run_id;
    }
  }
  for (let i = startedOrder.length - 1; i >= 0; i--) {
    if (present.has(startedOrder[i])) {
      return startedOrder[i];
    }
  }
  return last;
}

/**
 * The run to export for the selected cell `cellId`: the latest run of its task cell.
 * A step or answer cell stands for its task cell (`metadata.rlm.task_cell`).  Of the
 * runs whose cells name that task cell, the latest started in this session wins,
 * else the last one in the notebook (a continuation's cells follow the steps it
 * kept).  Null when that cell ran none (then the caller falls back to
 * `latestRunId`).
 */
export function runOfCell(
  cells: Iterable<{ readonly id: string; getMetadata(key: string): unknown }>,
  cellId: string | null,
  startedOrder: string[] = []
): string | null {
  if (!cellId) {
    return null;
  }
  const list = Array.from(cells);
  const selected = list.find(cell => cell.id === cellId);
  if (!selected) {
    return null;
  }
  const own = rlmMeta(selected);
  const task = own?.task_cell ?? cellId;
  const runs: string[] = [];
  for (const cell of list) {
    const meta = rlmMeta(cell);
    if (meta && meta.run_id && (meta.task_cell ?? null) === task) {
      runs.push(meta.run_id);
    }
  }
  if (runs.length === 0) {
    // a cell of a run that does not name its task cell: that run
    return own?.run_id ?? null;
  }
  for (let i = startedOrder.length - 1; i >= 0; i--) {
    if (runs.includes(startedOrder[i])) {
      return startedOrder[i];
    }
  }
  return runs[runs.length - 1];
}

/** The code of a step cell without its leading `#` reasoning lines. */
export function stepCode(source: string): string {
  const lines = source.split('\n');
  let i = 0;
  while (i < lines.length && lines[i].startsWith('#')) {
    i++;
  }
  return lines.slice(i).join('\n');
}

/**
 * A task cell is about to run again: empty the code of its previous run's step
 * cells now, so that a "Run All" that already queued them does not execute old
 * steps as plain code (the run replaces those cells when it starts).  Returns how
 * many cells were emptied.
 */
export function supersedeSteps(model: INotebookLike, taskCellId: string): number {
  let emptied = 0;
  model.sharedModel.transact(() => {
    for (let i = 0; i < model.cells.length; i++) {
      const cell = model.cells.get(i);
      const meta = rlmMeta(cell);
      if (meta && meta.role === 'step' && meta.task_cell === taskCellId && cell.sharedModel) {
        cell.sharedModel.setSource('');
        emptied++;
      }
    }
  });
  return emptied;
}
