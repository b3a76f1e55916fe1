/**
 * Visual marks on the cells a run made: a class and a "step N / run abcd" label on
 * step cells (`jp-rlm-diverged` too on a replayed step whose output differs from
 * the record), a class on answer cells.
 */

import type { Cell } from '@jupyterlab/cells';
import type { Notebook } from '@jupyterlab/notebook';

import { rlmMeta } from './protocol';

export const STEP_CLASS = 'jp-rlm-step';
export const ANSWER_CLASS = 'jp-rlm-answer';
export const DIVERGED_CLASS = 'jp-rlm-diverged';

/** Tag one cell widget according to its `metadata.rlm`. */
export function markCell(cell: Cell): void {
  if (!cell.model || cell.isDisposed) {
    return;
  }
  const meta = rlmMeta(cell.model);
  const node = cell.node;
  const step = !!meta && meta.role === 'step';
  cell.toggleClass(STEP_CLASS, step);
  cell.toggleClass(ANSWER_CLASS, !!meta && meta.role === 'answer');
  cell.toggleClass(DIVERGED_CLASS, step && !!meta?.diverged);
  if (step && meta) {
    const run = String(meta.run_id ?? '').slice(0, 4);
    const diverged = meta.diverged ? ' (output differs from the record)' : '';
    node.dataset.rlmLabel = `step ${meta.step ?? '?'} / run ${run}${diverged}`;
  } else {
    delete node.dataset.rlmLabel;
  }
}

/** Tag every cell of a notebook. */
export function markAll(notebook: Notebook): void {
  if (notebook.isDisposed) {
    return;
  }
  for (const cell of notebook.widgets) {
    markCell(cell);
  }
}

const pending = new WeakSet<Notebook>();

/** Mark after the notebook widget has created the widgets of new cells. */
export function scheduleMark(notebook: Notebook): void {
  if (pending.has(notebook)) {
    return;
  }
  pending.add(notebook);
  setTimeout(() => {
    pending.delete(notebook);
    markAll(notebook);
  }, 0);
}
