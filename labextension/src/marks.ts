/**
 * Visual marks on the cells a run made: a class and a "step 1 · candidate 2 · run abcd"
 * label on step cells (`jp-rlm-diverged` too on a replayed step whose output differs
 * from the record), a class on answer cells (`jp-rlm-answer-caution` too when the
 * answer is not from the user's data: its note says how it was reached), and a plain
 * text editor (no Python highlighting) on prose task cells.
 */

import type { Cell } from '@jupyterlab/cells';
import type { Notebook } from '@jupyterlab/notebook';

import { IRlmMetadata, rlmMeta } from './protocol';
import { isProse } from './runs';

export const STEP_CLASS = 'jp-rlm-step';
export const ANSWER_CLASS = 'jp-rlm-answer';
export const CAUTION_CLASS = 'jp-rlm-answer-caution';
export const DIVERGED_CLASS = 'jp-rlm-diverged';
export const PROSE_CLASS = 'jp-rlm-prose';
/** The editor MIME type of a prose task cell: plain text, no highlighting. */
export const PROSE_MIME = 'text/plain';

/** A step cell's label: `step 1 · candidate 2 · run aa9b` (no candidate outside a
 * candidates run), with a note on a replayed step whose output differs. */
export function stepLabel(meta: IRlmMetadata): string {
  const parts = [`step ${meta.step ?? '?'}`];
  if (meta.candidate !== undefined && meta.candidate !== null) {
    parts.push(`candidate ${meta.candidate}`);
  }
  parts.push(`run ${String(meta.run_id ?? '').slice(0, 4)}`);
  const diverged = meta.diverged ? ' (output differs from the record)' : '';
  return parts.join(' · ') + diverged;
}

/** Whether an answer cell's answer is shown with caution (not from the user's data). */
export function isCaution(meta: IRlmMetadata | null): boolean {
  return (
    !!meta &&
    meta.role === 'answer' &&
    !!meta.answer_source &&
    meta.answer_source !== 'data'
  );
}

/** Cells whose editor this extension made plain text (to give their mode back). */
const madePlain = new WeakSet<object>();

/** Tag one cell widget according to its `metadata.rlm`; `codeMime`: the notebook's
 * code MIME type (given back to a cell that is no longer prose). */
export function markCell(cell: Cell, codeMime?: string): void {
  if (!cell.model || cell.isDisposed) {
    return;
  }
  const meta = rlmMeta(cell.model);
  const node = cell.node;
  const step = !!meta && meta.role === 'step';
  cell.toggleClass(STEP_CLASS, step);
  cell.toggleClass(ANSWER_CLASS, !!meta && meta.role === 'answer');
  cell.toggleClass(CAUTION_CLASS, isCaution(meta));
  cell.toggleClass(DIVERGED_CLASS, step && !!meta?.diverged);
  if (step && meta) {
    node.dataset.rlmLabel = stepLabel(meta);
  } else {
    delete node.dataset.rlmLabel;
  }
  if (cell.model.type !== 'code') {
    return;
  }
  const prose = isProse(cell.model);
  cell.toggleClass(PROSE_CLASS, prose);
  if (prose) {
    if (cell.model.mimeType !== PROSE_MIME) {
      cell.model.mimeType = PROSE_MIME;
    }
    madePlain.add(cell.model);
  } else if (madePlain.has(cell.model)) {
    madePlain.delete(cell.model);
    if (codeMime && cell.model.mimeType === PROSE_MIME) {
      cell.model.mimeType = codeMime;
    }
  }
}

/** Tag every cell of a notebook. */
export function markAll(notebook: Notebook): void {
  if (notebook.isDisposed) {
    return;
  }
  for (const cell of notebook.widgets) {
    markCell(cell, notebook.codeMimetype);
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
