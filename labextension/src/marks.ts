/**
 * Visual marks on the cells a run made: a class and a "step 1 · candidate 2 · run abcd"
 * label on step cells (`jp-rlm-diverged` too on a replayed step whose output differs
 * from the record), a class on answer cells and one for the tone the kernel gave the
 * run's end (`jp-rlm-tone-ok`, `-caution`, `-error`: the engine's one table, docs/
 * protocol.md; no tone of its own here), and a plain text editor (no Python
 * highlighting) on prose: prose task cells and `%%rlm` cells (prose.ts).
 */

import type { Cell } from '@jupyterlab/cells';
import type { Notebook } from '@jupyterlab/notebook';

import { IRlmMetadata, TONES, rlmMeta } from './protocol';
import { isRlmTaskCell } from './prose';
import { isProse } from './runs';

export const STEP_CLASS = 'jp-rlm-step';
export const ANSWER_CLASS = 'jp-rlm-answer';
/** An answer cell's tone class: `jp-rlm-tone-` + the kernel's `tone`. */
export const TONE_CLASS = 'jp-rlm-tone-';
export const DIVERGED_CLASS = 'jp-rlm-diverged';
/** A step cell whose reply the model is writing now. */
export const WRITING_CLASS = 'jp-rlm-writing';
export const PROSE_CLASS = 'jp-rlm-prose';
/** The editor MIME type of a prose task cell: plain text, no highlighting. */
export const PROSE_MIME = 'text/plain';

/** A step cell's label: `step 1 · candidate 2 · run aa9b` (no candidate outside a
 * candidates run), with a note on a replayed step whose output differs, and on a
 * cell whose reply the model is writing (or a stop cut). */
export function stepLabel(meta: IRlmMetadata): string {
  const parts = [meta.answer_now ? 'answer now' : `step ${meta.step ?? '?'}`];
  if (meta.candidate !== undefined && meta.candidate !== null) {
    parts.push(`candidate ${meta.candidate}`);
  }
  parts.push(`run ${String(meta.run_id ?? '').slice(0, 4)}`);
  const diverged = meta.diverged ? ' (output differs from the record)' : '';
  const writing = meta.writing
    ? ' (the model is writing it)'
    : meta.cut
      ? ' (cut by a stop while the model wrote it)'
      : '';
  return parts.join(' · ') + diverged + writing;
}

/** An answer cell's tone, as the kernel sent it (`run_finished`'s `tone`), or null
 * (not an answer cell, or a kernel that did not say: then no colour is claimed). */
export function answerTone(meta: IRlmMetadata | null): string | null {
  if (!meta || meta.role !== 'answer' || typeof meta.tone !== 'string') {
    return null;
  }
  return TONES.includes(meta.tone) ? meta.tone : null;
}

/** Whether a code cell holds prose: a prose task cell (marked by the kernel, or read
 * as one when it was scheduled) or a `%%rlm` task cell. */
export function holdsProse(cell: {
  getMetadata(key: string): unknown;
  sharedModel: { getSource(): string };
}): boolean {
  return isProse(cell) || isRlmTaskCell(cell.sharedModel.getSource());
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
  const tone = answerTone(meta);
  for (const each of TONES) {
    cell.toggleClass(TONE_CLASS + each, tone === each);
  }
  cell.toggleClass(DIVERGED_CLASS, step && !!meta?.diverged);
  cell.toggleClass(WRITING_CLASS, step && !!meta?.writing);
  if (step && meta) {
    node.dataset.rlmLabel = stepLabel(meta);
  } else {
    delete node.dataset.rlmLabel;
  }
  if (cell.model.type !== 'code') {
    return;
  }
  watchSource(cell, codeMime);
  const prose = holdsProse(cell.model);
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

/** Cell models whose source changes re-mark their cell (a `%%rlm` line typed or
 * removed). */
const watched = new WeakSet<object>();

function watchSource(cell: Cell, codeMime?: string): void {
  if (watched.has(cell.model)) {
    return;
  }
  watched.add(cell.model);
  let first = cell.model.sharedModel.getSource().split('\n', 1)[0];
  cell.model.contentChanged.connect(() => {
    const now = cell.model.sharedModel.getSource().split('\n', 1)[0];
    if (now !== first && !cell.isDisposed) {
      first = now;
      markCell(cell, codeMime);
    }
  });
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
