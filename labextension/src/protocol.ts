/**
 * The kernel <-> frontend protocol of docs/protocol.md, as types.
 * (The Python side: rlm_kernel/jupyter/protocol.py.)
 */

import type * as nbformat from '@jupyterlab/nbformat';

/** Comm target the extension opens to announce itself. */
export const FRONTEND_TARGET = 'rlm_kernel.frontend';
/** Comm target the kernel opens for each run. */
export const RUN_TARGET = 'rlm_kernel.run';
/** Protocol version sent in the announcement. */
export const PROTOCOL_VERSION = 1;
/** MIME type of the `display_data` holding an exported run's notebook
 * (`%rlm export PATH --to-frontend`): the extension saves it. */
export const NOTEBOOK_MIME = 'application/x-ipynb+json';

/** The announcement's `comm_open` data. */
export interface IAnnouncement {
  version: number;
}

/** One recorded model exchange (rlm_kernel/engine/replay/recording.py). */
export interface IExchange {
  step: number;
  role: 'root' | 'final' | 'sub' | string;
  depth: number;
  response: string;
  prompt?: string;
}

/** The tones a run's end is shown in (`run_finished`'s `tone`; their colours: style/
 * base.css, checked against rlm_kernel/engine/answer/sources.py `TONES` by the browser
 * test): `ok` (green), `caution` (amber), `error` (red). */
export const TONES = ['ok', 'caution', 'error'];

/** A cell's `metadata.rlm`. */
export interface IRlmMetadata {
  run_id?: string;
  step?: number | null;
  role?: 'task' | 'setup' | 'recorded' | 'step' | 'answer' | string;
  task_cell?: string | null;
  exchanges?: IExchange[];
  output_sha256?: string;
  /** Set by the extension on a replayed step whose output differs from the record. */
  diverged?: boolean;
  /** A candidates run: the candidate that made this step cell (from 1). */
  candidate?: number | null;
  /** An answer cell: how the answer was reached (`ANSWER_SOURCES`' key). */
  answer_source?: string | null;
  /** An answer cell: the sentence saying so, when not from the user's data. */
  answer_note?: string | null;
  /** An answer cell: how the run ended, as `run_finished` said (`TONES`). */
  tone?: string | null;
  ending?: string | null;
  ending_words?: string | null;
  /** A step cell holding the "answer now" call after the run stopped early. */
  answer_now?: boolean;
  /** A step cell whose reply the model is writing now (`step_writing`). */
  writing?: boolean;
  /** A step cell whose reply a stop cut while the model wrote it. */
  cut?: boolean;
}

/** A step cell's metadata: `{rlm: {...}}`. */
export interface ICellMetadata {
  rlm: IRlmMetadata;
}

/** What every message of a run carries. */
interface IMessageBase {
  run_id: string;
  cell_id: string | null;
}

export interface IVariableInfo {
  name: string;
  type: string;
  length: number;
  unit: string;
}

export interface IRunStarted extends IMessageBase {
  type: 'run_started';
  question: string;
  model: string;
  max_iterations: number;
  variables: IVariableInfo[];
  /** A run continuing an earlier one from a step (`%rlm continue`). */
  continues?: { run_id: string; from_step: number };
  /** The task cell is prose (a task written as plain text), not code. */
  prose?: boolean;
}

export interface IStepAdded extends IMessageBase {
  type: 'step_added';
  step: number;
  source: string;
  metadata: ICellMetadata;
  /** The "answer now" call after the run stopped early, not a further step. */
  answer_now?: boolean;
}

/** The root model writes a step's reply (docs/protocol.md, `step_writing`). */
export interface IStepWriting extends IMessageBase {
  type: 'step_writing';
  step: number;
  /** The reply so far, in a step cell's form. */
  source: string;
  /** writing: insert or update the cell; cut: keep it, marked; dropped: remove it. */
  state: 'writing' | 'cut' | 'dropped';
  tokens: number;
  tokens_per_second: number;
  answer_now?: boolean;
}

export interface IStepOutput extends IMessageBase {
  type: 'step_output';
  step: number;
  output: nbformat.IOutput;
}

export interface IStepFinished extends IMessageBase {
  type: 'step_finished';
  step: number;
  execution_count: number | null;
  seconds: number;
  success: boolean;
  /** The cell's whole metadata now (with the replay record). */
  metadata?: ICellMetadata;
  /** A replay's step whose output differs from the record. */
  diverged?: boolean;
}

export interface ITotals {
  llm_calls: number;
  prompt_tokens: number;
  completion_tokens: number;
  cost_usd: number;
}

/** One candidate of a candidates run (`RLMResult.candidates`). */
export interface ICandidateSummary {
  index: number;
  answer: string | null;
  votes: number;
  steps: number;
  stopped_by: string;
  seconds: number;
  chosen: boolean;
  [key: string]: unknown;
}

export interface IRunFinished extends IMessageBase {
  type: 'run_finished';
  answer: string | null;
  stopped_by: string;
  error: string | null;
  totals: ITotals;
  seconds: number;
  /** How the answer was reached (data, output, ungrounded, vote, no_input, forced). */
  answer_source?: string | null;
  /** After a vote: [k, n], k of n candidates agreed. */
  votes?: number[] | null;
  /** The sentence to show when the answer is not from the user's data. */
  answer_note?: string | null;
  /** How the run ended, from the engine's one table (docs/protocol.md, `run_ending`):
   * its tone (`TONES`), its kind (`answer_source` or `no_answer`) and one sentence. */
  tone?: string;
  ending?: string;
  ending_words?: string;
  /** A candidates run: the candidate whose steps are the run's (the others' cells go). */
  chosen?: number | null;
  candidates?: ICandidateSummary[];
}

/** Any message of a run, told apart by `type`. */
export type RunMessage =
  | IRunStarted
  | IStepWriting
  | IStepAdded
  | IStepOutput
  | IStepFinished
  | IRunFinished;

/** Something with cell metadata (a cell model). */
export interface IHasMetadata {
  getMetadata(key: string): unknown;
}

/** A cell's `metadata.rlm`, or null. */
export function rlmMeta(cell: IHasMetadata): IRlmMetadata | null {
  const meta = cell.getMetadata('rlm');
  return meta && typeof meta === 'object' ? (meta as IRlmMetadata) : null;
}

/** True for data that looks like a run message (has a known `type` and a run id). */
export function isRunMessage(data: unknown): data is RunMessage {
  if (!data || typeof data !== 'object') {
    return false;
  }
  const d = data as { type?: unknown; run_id?: unknown };
  return (
    typeof d.run_id === 'string' &&
    [
      'run_started',
      'step_writing',
      'step_added',
      'step_output',
      'step_finished',
      'run_finished'
    ].includes(String(d.type))
  );
}
