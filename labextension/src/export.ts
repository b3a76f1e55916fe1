/**
 * Commands that run `%rlm` in the kernel for a notebook: export the run of the
 * selected task cell (`rlm:export-run`; the latest run when that cell ran none) and
 * continue a run from a step cell, with its edited code (`rlm:continue-from-step`).
 */

import { Notification } from '@jupyterlab/apputils';
import type { ICodeCellModel } from '@jupyterlab/cells';
import type { NotebookPanel } from '@jupyterlab/notebook';
import { Contents, KernelMessage } from '@jupyterlab/services';
import type * as nbformat from '@jupyterlab/nbformat';

import { NOTEBOOK_MIME, rlmMeta } from './protocol';
import { latestRunId, runOfCell, runOrderOf, stepCode } from './runs';

export const COMMAND_EXPORT = 'rlm:export-run';
export const COMMAND_CONTINUE = 'rlm:continue-from-step';
/** How long the "Exported RLM run" toast stays (milliseconds). */
export const EXPORTED_TOAST_MS = 15000;

/** Quote a word for the magic's shlex parser. */
function shellQuote(word: string): string {
  return /^[\w@%+=:,./-]+$/.test(word)
    ? word
    : `'${word.replace(/'/g, `'"'"'`)}'`;
}

/**
 * `%rlm export <notebook>-rlm-<run>.ipynb --run <run> --to-frontend`, silently, in
 * the kernel: the run of the selected cell's task cell (`runOfCell`), else the
 * notebook's latest run.  The request names the task cell (`metadata.cellId`), as a
 * run of that cell would: without `--run`, the kernel exports that cell's last run.
 * The kernel sends the notebook back (a `display_data` of `NOTEBOOK_MIME`) and it is
 * saved through the server's contents API next to the open notebook: the kernel may
 * run on another machine, behind a gateway, in a folder of its own.  Success shows as
 * a toast with an "Open" button (`open`, given the saved path) when `open` is given.
 */
export async function exportRun(
  panel: NotebookPanel,
  contents: Contents.IManager,
  open?: (path: string) => void
): Promise<void> {
  const model = panel.content.model;
  const kernel = panel.sessionContext.session?.kernel;
  if (!model) {
    return;
  }
  const active = panel.content.activeCell?.model ?? null;
  const selected = active?.id ?? null;
  const order = runOrderOf(model);
  const runId =
    runOfCell(model.cells, selected, order) ?? latestRunId(model.cells, order);
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
  const code = `%rlm export ${shellQuote(file)} --run ${runId} --to-frontend`;
  const taskCell = (active ? rlmMeta(active)?.task_cell : null) ?? selected;
  let errorText = '';
  // what the kernel sent (a holder: TypeScript does not track the callback's writes)
  const sent: { notebook: nbformat.INotebookContent | null } = { notebook: null };
  const future = kernel.requestExecute(
    {
      code,
      silent: true,
      store_history: false
    },
    true,
    { cellId: taskCell ?? '' }
  );
  future.onIOPub = msg => {
    if (KernelMessage.isErrorMsg(msg)) {
      errorText = `${msg.content.ename}: ${msg.content.evalue}`;
    } else if (KernelMessage.isDisplayDataMsg(msg)) {
      const data = msg.content.data[NOTEBOOK_MIME];
      if (data && typeof data === 'object' && !Array.isArray(data)) {
        sent.notebook = data as unknown as nbformat.INotebookContent;
      }
    }
  };
  try {
    const reply = await future.done;
    const content = reply.content as {
      status: string;
      ename?: string;
      evalue?: string;
    };
    if (content.status === 'ok' && !errorText && !sent.notebook) {
      errorText =
        'the kernel sent no notebook (is its rlm-kernel older than this extension?)';
    }
    if (content.status === 'ok' && !errorText && sent.notebook) {
      await contents.save(shown, {
        type: 'notebook',
        format: 'json',
        content: sent.notebook
      });
      // A toast that stays long enough to be read (and opens the export), not only
      // an entry in the notification centre.
      Notification.success(`Exported RLM run ${runId} to ${shown}`, {
        autoClose: EXPORTED_TOAST_MS,
        actions: open
          ? [{ label: 'Open', caption: `Open ${shown}`, callback: () => open(shown) }]
          : []
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

/** The active cell's run and step, when it is a step cell of a run. */
export function activeStep(
  panel: NotebookPanel | null
): { runId: string; step: number; taskCell: string | null; code: string } | null {
  const cell = panel?.content.activeCell;
  const meta = cell ? rlmMeta(cell.model) : null;
  if (!cell || !meta || meta.role !== 'step' || !meta.run_id || !meta.step) {
    return null;
  }
  return {
    runId: meta.run_id,
    step: Number(meta.step),
    taskCell: meta.task_cell ?? null,
    code: stepCode(cell.model.sharedModel.getSource())
  };
}

/** The code cell model with this id in the panel's notebook, or null. */
function taskCellModel(
  panel: NotebookPanel,
  id: string | null
): ICodeCellModel | null {
  const cells = panel.content.model?.cells;
  if (!id || !cells) {
    return null;
  }
  for (let i = 0; i < cells.length; i++) {
    const cell = cells.get(i);
    if (cell.id === id) {
      return cell.type === 'code' ? (cell as ICodeCellModel) : null;
    }
  }
  return null;
}

/**
 * `%%rlm continue --from STEP --run RUN` with the step cell's current code as the
 * body, sent as if from the task cell (its id in `metadata.cellId`), so the run's
 * messages replace the steps from STEP on (docs/protocol.md, `continues`).
 */
export async function continueFromStep(panel: NotebookPanel): Promise<void> {
  const target = activeStep(panel);
  const kernel = panel.sessionContext.session?.kernel;
  if (!target || !kernel) {
    Notification.warning('Select a step cell of an RLM run to continue from.', {
      autoClose: 5000
    });
    return;
  }
  const code = `%%rlm continue --from ${target.step} --run ${target.runId}\n${target.code}`;
  const future = kernel.requestExecute(
    { code, silent: false, store_history: false },
    true,
    { cellId: target.taskCell ?? '' }
  );
  // The task cell shows as running ([*]) while the continuation goes, as it
  // would if it ran itself; its count and outputs are left as they were.
  const task = taskCellModel(panel, target.taskCell);
  if (task) {
    task.executionState = 'running';
  }
  let errorText = '';
  future.onIOPub = msg => {
    if (KernelMessage.isErrorMsg(msg)) {
      errorText = `${msg.content.ename}: ${msg.content.evalue}`;
    }
  };
  await future.done.catch(err => {
    errorText = String(err);
  });
  if (task && !task.isDisposed) {
    task.executionState = 'idle';
  }
  if (errorText) {
    Notification.error(`Continue RLM run ${target.runId}: ${errorText}`, {
      autoClose: false
    });
  }
}
