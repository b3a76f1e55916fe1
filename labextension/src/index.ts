/**
 * rlm-kernel-labextension: the JupyterLab side of docs/protocol.md.
 *
 * - Announces itself to the kernel by opening a comm to `rlm_kernel.frontend`
 *   (again after a kernel change or restart, and just before a cell runs if
 *   the kernel closed it because the target was not registered yet).
 * - Accepts the kernel's `rlm_kernel.run` comms and turns each step of a run
 *   into a real code cell below the task cell, through the notebook's shared
 *   model (never the active cell), then adds an answer cell.
 * - Marks step cells (class + "step N / run abcd" label).
 * - `rlm:export-run` runs `%rlm export ... --run <id>` silently in the kernel.
 */

import {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { Notification, ToolbarButton } from '@jupyterlab/apputils';
import { Cell, ICodeCellModel } from '@jupyterlab/cells';
import * as nbformat from '@jupyterlab/nbformat';
import {
  INotebookModel,
  INotebookTracker,
  Notebook,
  NotebookActions,
  NotebookPanel
} from '@jupyterlab/notebook';
import { Kernel, KernelMessage } from '@jupyterlab/services';

/** Comm target the extension opens to announce itself. */
export const FRONTEND_TARGET = 'rlm_kernel.frontend';
/** Comm target the kernel opens for each run. */
export const RUN_TARGET = 'rlm_kernel.run';
/** Protocol version sent in the announcement. */
export const PROTOCOL_VERSION = 1;

const COMMAND_EXPORT = 'rlm:export-run';
const STEP_CLASS = 'jp-rlm-step';
const ANSWER_CLASS = 'jp-rlm-answer';

/** `metadata.rlm` of a cell made by a run. */
interface IRlmMetadata {
  run_id?: string;
  step?: number;
  role?: string;
  task_cell?: string | null;
}

/** What every message of a run carries in its `data`. */
interface IRunMessage {
  type: string;
  run_id: string;
  cell_id: string | null;
  step?: number;
  source?: string;
  metadata?: { [key: string]: any };
  output?: nbformat.IOutput;
  execution_count?: number | null;
  answer?: string | null;
  stopped_by?: string;
  error?: string | null;
  [key: string]: any;
}

/** The state of one run in one notebook model. */
interface IRunState {
  runId: string;
  taskCellId: string;
  /** The cell the next step goes below: the last step cell, or the task cell. */
  lastCellId: string;
  /** step number -> cell id */
  steps: Map<number, string>;
  finished: boolean;
}

/** Runs per notebook model (shared by every view of that notebook). */
const runsByModel = new WeakMap<INotebookModel, Map<string, IRunState>>();
/** Run ids in the order they started in this browser session, per model. */
const runOrderByModel = new WeakMap<INotebookModel, string[]>();

function runsOf(model: INotebookModel): Map<string, IRunState> {
  let runs = runsByModel.get(model);
  if (!runs) {
    runs = new Map();
    runsByModel.set(model, runs);
  }
  return runs;
}

function rlmMeta(cell: { getMetadata(key: string): any }): IRlmMetadata | null {
  const meta = cell.getMetadata('rlm');
  return meta && typeof meta === 'object' ? (meta as IRlmMetadata) : null;
}

/** Index of the cell with this id in the model, or -1. */
function indexOfCell(model: INotebookModel, id: string | null): number {
  if (!id) {
    return -1;
  }
  const cells = model.cells;
  for (let i = 0; i < cells.length; i++) {
    if (cells.get(i).id === id) {
      return i;
    }
  }
  return -1;
}

// ---------------------------------------------------------------------------
// Visual mark of step cells
// ---------------------------------------------------------------------------

/** Tag one cell widget according to its `metadata.rlm`. */
function markCell(cell: Cell): void {
  if (!cell.model || cell.isDisposed) {
    return;
  }
  const meta = rlmMeta(cell.model);
  const node = cell.node;
  if (meta && meta.role === 'step') {
    cell.addClass(STEP_CLASS);
    const run = String(meta.run_id ?? '').slice(0, 4);
    node.dataset.rlmLabel = `step ${meta.step ?? '?'} / run ${run}`;
  } else {
    cell.removeClass(STEP_CLASS);
    delete node.dataset.rlmLabel;
  }
  if (meta && meta.role === 'answer') {
    cell.addClass(ANSWER_CLASS);
  } else {
    cell.removeClass(ANSWER_CLASS);
  }
}

function markAll(notebook: Notebook): void {
  if (notebook.isDisposed) {
    return;
  }
  for (const cell of notebook.widgets) {
    markCell(cell);
  }
}

/** Mark after the notebook widget has created the widgets of new cells. */
function scheduleMark(notebook: Notebook): void {
  const pending = (notebook as any).__rlmMarkPending as boolean | undefined;
  if (pending) {
    return;
  }
  (notebook as any).__rlmMarkPending = true;
  setTimeout(() => {
    (notebook as any).__rlmMarkPending = false;
    markAll(notebook);
  }, 0);
}

// ---------------------------------------------------------------------------
// Runs: the `rlm_kernel.run` comm
// ---------------------------------------------------------------------------

/** Apply one protocol message of a run to the notebook of `panel`. */
function handleRunMessage(panel: NotebookPanel, data: IRunMessage): void {
  const model = panel.content.model;
  if (!model || !data || !data.run_id) {
    return;
  }
  const runs = runsOf(model);
  if (data.type === 'run_started') {
    startRun(panel, model, runs, data);
    return;
  }
  const run = runs.get(data.run_id);
  if (!run) {
    return; // not ours (another notebook on this kernel), or handled by another view
  }
  switch (data.type) {
    case 'step_added':
      addStep(panel, model, run, data);
      break;
    case 'step_output':
      addOutput(model, run, data);
      break;
    case 'step_finished':
      finishStep(model, run, data);
      break;
    case 'run_finished':
      finishRun(panel, model, run, data);
      break;
    default:
      break;
  }
}

function startRun(
  panel: NotebookPanel,
  model: INotebookModel,
  runs: Map<string, IRunState>,
  data: IRunMessage
): void {
  if (runs.has(data.run_id)) {
    return; // another view of this notebook already took it
  }
  const taskId = data.cell_id;
  if (!taskId || indexOfCell(model, taskId) < 0) {
    return; // the task cell is not in this notebook
  }
  // Re-running a task replaces the cells of its previous run(s).
  model.sharedModel.transact(() => {
    for (let i = model.cells.length - 1; i >= 0; i--) {
      const meta = rlmMeta(model.cells.get(i));
      if (meta && meta.task_cell === taskId) {
        model.sharedModel.deleteCell(i);
      }
    }
  });
  runs.set(data.run_id, {
    runId: data.run_id,
    taskCellId: taskId,
    lastCellId: taskId,
    steps: new Map(),
    finished: false
  });
  let order = runOrderByModel.get(model);
  if (!order) {
    order = [];
    runOrderByModel.set(model, order);
  }
  order.push(data.run_id);
  scheduleMark(panel.content);
}

/** Where the next cell of a run goes: below its last cell still present. */
function insertIndex(model: INotebookModel, run: IRunState): number {
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

function addStep(
  panel: NotebookPanel,
  model: INotebookModel,
  run: IRunState,
  data: IRunMessage
): void {
  const step = Number(data.step);
  const metadata = {
    ...(data.metadata ?? {}),
    rlm: {
      run_id: run.runId,
      step,
      role: 'step',
      task_cell: run.taskCellId,
      ...((data.metadata ?? {}).rlm ?? {})
    }
  };
  const index = insertIndex(model, run);
  model.sharedModel.insertCell(index, {
    cell_type: 'code',
    source: data.source ?? '',
    metadata,
    outputs: [],
    execution_count: null
  } as any);
  const cellModel = model.cells.get(index);
  // Outputs come live from the kernel, as for a cell the user ran.
  cellModel.trusted = true;
  run.steps.set(step, cellModel.id);
  run.lastCellId = cellModel.id;
  scheduleMark(panel.content);
}

function stepCell(
  model: INotebookModel,
  run: IRunState,
  step: number | undefined
): ICodeCellModel | null {
  const id = run.steps.get(Number(step));
  const index = indexOfCell(model, id ?? null);
  if (index < 0) {
    return null;
  }
  const cell = model.cells.get(index);
  return cell.type === 'code' ? (cell as ICodeCellModel) : null;
}

function addOutput(
  model: INotebookModel,
  run: IRunState,
  data: IRunMessage
): void {
  const cell = stepCell(model, run, data.step);
  if (cell && data.output) {
    // OutputAreaModel merges consecutive stream outputs of the same name.
    cell.outputs.add(data.output);
  }
}

function finishStep(
  model: INotebookModel,
  run: IRunState,
  data: IRunMessage
): void {
  const cell = stepCell(model, run, data.step);
  if (cell && typeof data.execution_count === 'number') {
    cell.executionCount = data.execution_count;
  }
}

/** The answer cell's markdown. */
export function answerText(data: {
  answer?: string | null;
  stopped_by?: string;
  error?: string | null;
}): string {
  const stopped = data.stopped_by ?? 'unknown';
  const answer = data.answer;
  if (answer !== null && answer !== undefined) {
    if (stopped === 'final') {
      return `**Answer:** ${answer}`;
    }
    return `**Answer** (stopped by ${stopped}): ${answer}`;
  }
  const error = data.error ? `: ${data.error}` : '';
  return `**No answer** (stopped by ${stopped})${error}`;
}

function finishRun(
  panel: NotebookPanel,
  model: INotebookModel,
  run: IRunState,
  data: IRunMessage
): void {
  if (run.finished) {
    return;
  }
  run.finished = true;
  const index = insertIndex(model, run);
  model.sharedModel.insertCell(index, {
    cell_type: 'markdown',
    source: answerText(data),
    metadata: {
      rlm: { run_id: run.runId, role: 'answer', task_cell: run.taskCellId }
    }
  } as any);
  run.lastCellId = model.cells.get(index).id;
  scheduleMark(panel.content);
}

// ---------------------------------------------------------------------------
// Per-panel connection to the kernel
// ---------------------------------------------------------------------------

/** The kernel side of one notebook panel: announcement comm + run target. */
class PanelConnection {
  constructor(panel: NotebookPanel) {
    this.panel = panel;
    const session = panel.sessionContext;
    session.kernelChanged.connect(this._onKernelChanged, this);
    session.statusChanged.connect(this._onStatusChanged, this);
    void session.ready.then(() => this._attach(session.session?.kernel ?? null));
    panel.disposed.connect(() => {
      this._detach();
      session.kernelChanged.disconnect(this._onKernelChanged, this);
      session.statusChanged.disconnect(this._onStatusChanged, this);
    });
  }

  readonly panel: NotebookPanel;

  /** Re-open the announcement comm if the kernel closed it (or never had it). */
  ensureAnnounced(): void {
    const kernel = this.panel.sessionContext.session?.kernel ?? null;
    if (!kernel) {
      return;
    }
    if (kernel !== this._kernel) {
      this._attach(kernel);
      return;
    }
    if (!this._comm || this._commClosed || this._comm.isDisposed) {
      this._announce();
    } else if (!this._confirmed) {
      // The kernel has not processed our comm_open yet (e.g. "run all" in a
      // python3 kernel: `%load_ext rlm_kernel` is queued but has not run).
      // Announce again, behind the cells already queued; drop the old one.
      const old = this._comm;
      this._announce();
      try {
        old.close();
      } catch {
        // already gone
      }
    }
  }

  private _onKernelChanged(): void {
    this._attach(this.panel.sessionContext.session?.kernel ?? null);
  }

  private _onStatusChanged(_: unknown, status: Kernel.Status): void {
    if (status === 'restarting' || status === 'autorestarting') {
      this._restarting = true;
    } else if (this._restarting && status === 'idle') {
      // A restarted kernel has forgotten our comm.
      this._restarting = false;
      this._commClosed = true;
      this.ensureAnnounced();
    }
  }

  private _attach(kernel: Kernel.IKernelConnection | null): void {
    if (kernel === this._kernel) {
      return;
    }
    this._detach();
    this._kernel = kernel;
    if (!kernel) {
      return;
    }
    kernel.registerCommTarget(RUN_TARGET, this._onRunComm);
    this._announce();
  }

  private _detach(): void {
    const kernel = this._kernel;
    if (kernel && !kernel.isDisposed) {
      kernel.removeCommTarget(RUN_TARGET, this._onRunComm);
      if (this._comm && !this._comm.isDisposed && !this._commClosed) {
        try {
          this._comm.close();
        } catch {
          // the kernel is gone
        }
      }
    }
    this._kernel = null;
    this._comm = null;
    this._commClosed = true;
  }

  private _announce(): void {
    const kernel = this._kernel;
    if (!kernel || kernel.isDisposed) {
      return;
    }
    let comm: Kernel.IComm;
    try {
      comm = kernel.createComm(FRONTEND_TARGET);
    } catch (err) {
      console.warn('rlm-kernel: cannot open the announcement comm', err);
      return;
    }
    this._comm = comm;
    this._commClosed = false;
    this._confirmed = false;
    let closed = false;
    comm.onClose = () => {
      closed = true;
      if (this._comm === comm) {
        this._commClosed = true;
      }
    };
    try {
      // The kernel closes a comm to an unknown target while it handles the
      // comm_open, so before its idle status: once `done`, the comm was
      // accepted unless it is closed by then.
      const future = comm.open({ version: PROTOCOL_VERSION });
      void future.done.then(
        () => {
          if (this._comm === comm && !closed && !comm.isDisposed) {
            this._confirmed = true;
          }
        },
        () => undefined
      );
    } catch (err) {
      this._commClosed = true;
      console.warn('rlm-kernel: cannot open the announcement comm', err);
    }
  }

  private _onRunComm = (
    comm: Kernel.IComm,
    msg: KernelMessage.ICommOpenMsg
  ): void => {
    const panel = this.panel;
    const safe = (data: unknown) => {
      try {
        handleRunMessage(panel, data as IRunMessage);
      } catch (err) {
        console.error('rlm-kernel: cannot apply a run message', err);
      }
    };
    comm.onMsg = (m: KernelMessage.ICommMsgMsg) => safe(m.content.data);
    safe(msg.content.data);
  };

  private _kernel: Kernel.IKernelConnection | null = null;
  private _comm: Kernel.IComm | null = null;
  private _commClosed = true;
  private _confirmed = false;
  private _restarting = false;
}

const connections = new WeakMap<Notebook, PanelConnection>();

// ---------------------------------------------------------------------------
// Export
// ---------------------------------------------------------------------------

/** The run to export: the latest one started in this session, else the last in the notebook. */
export function latestRunId(
  cells: Iterable<{ getMetadata(key: string): any }>,
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

/** Quote a word for the magic's shlex parser. */
function shellQuote(word: string): string {
  return /^[\w@%+=:,./-]+$/.test(word)
    ? word
    : `'${word.replace(/'/g, `'"'"'`)}'`;
}

async function exportRun(panel: NotebookPanel): Promise<void> {
  const model = panel.content.model;
  const kernel = panel.sessionContext.session?.kernel;
  if (!model) {
    return;
  }
  const runId = latestRunId(model.cells, runOrderByModel.get(model) ?? []);
  if (!runId) {
    Notification.warning('No RLM run in this notebook to export.', {
      autoClose: 5000
    });
    return;
  }
  if (!kernel) {
    Notification.error('Export RLM run: the notebook has no kernel.', {
      autoClose: 5000
    });
    return;
  }
  const path = panel.context.path;
  const slash = path.lastIndexOf('/');
  const folder = slash >= 0 ? path.slice(0, slash) : '';
  const name = slash >= 0 ? path.slice(slash + 1) : path;
  const stem = name.replace(/\.ipynb$/i, '');
  const file = `${stem}-rlm-${runId}.ipynb`;
  const shown = folder ? `${folder}/${file}` : file;
  // The kernel's cwd is the notebook's folder.
  const code = `%rlm export ${shellQuote(file)} --run ${runId}`;
  let errorText = '';
  const future = kernel.requestExecute({
    code,
    silent: true,
    store_history: false
  });
  future.onIOPub = msg => {
    if (KernelMessage.isErrorMsg(msg)) {
      errorText = `${msg.content.ename}: ${msg.content.evalue}`;
    }
  };
  try {
    const reply = await future.done;
    const content = reply.content as {
      status: string;
      ename?: string;
      evalue?: string;
    };
    if (content.status === 'ok' && !errorText) {
      Notification.success(`Exported RLM run ${runId} to ${shown}`, {
        autoClose: 5000
      });
    } else {
      const reason =
        errorText ||
        (content.status === 'error'
          ? `${content.ename}: ${content.evalue}`
          : content.status);
      Notification.error(`Export of RLM run ${runId} failed: ${reason}`, {
        autoClose: false
      });
    }
  } catch (err) {
    Notification.error(`Export of RLM run ${runId} failed: ${err}`, {
      autoClose: false
    });
  }
}

// ---------------------------------------------------------------------------
// Plugin
// ---------------------------------------------------------------------------

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'rlm-kernel-labextension:plugin',
  description:
    'Shows each step of an RLM run as a notebook cell below its task cell.',
  autoStart: true,
  requires: [INotebookTracker],
  activate: (app: JupyterFrontEnd, tracker: INotebookTracker) => {
    app.commands.addCommand(COMMAND_EXPORT, {
      label: 'Export RLM run',
      caption:
        "Export this notebook's latest RLM run as a notebook (%rlm export)",
      isEnabled: () => tracker.currentWidget !== null,
      execute: async () => {
        const panel = tracker.currentWidget;
        if (panel) {
          await exportRun(panel);
        }
      }
    });

    tracker.widgetAdded.connect((_, panel) => {
      connections.set(panel.content, new PanelConnection(panel));

      const button = new ToolbarButton({
        label: 'RLM export',
        tooltip: 'Export RLM run',
        onClick: () => {
          void app.commands.execute(COMMAND_EXPORT);
        }
      });
      if (!panel.toolbar.insertAfter('cellType', 'rlm-export', button)) {
        panel.toolbar.addItem('rlm-export', button);
      }

      const watchModel = () => {
        const model = panel.content.model;
        if (model) {
          model.cells.changed.connect(() => scheduleMark(panel.content));
        }
        scheduleMark(panel.content);
      };
      panel.content.modelChanged.connect(watchModel);
      watchModel();
      void panel.context.ready.then(() => scheduleMark(panel.content));
    });

    // If the kernel closed the announcement (target not registered yet, e.g. a
    // python3 kernel before `%load_ext rlm_kernel`), re-open it now: this
    // comm_open reaches the kernel on the shell channel before the cell's
    // execute_request.
    NotebookActions.executionScheduled.connect((_, { notebook }) => {
      connections.get(notebook)?.ensureAnnounced();
    });
  }
};

export default plugin;
