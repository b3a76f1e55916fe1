/**
 * rlm-kernel-labextension: the JupyterLab side of docs/protocol.md.
 *
 * - connection.ts: announces the extension to the kernel (`rlm_kernel.frontend`)
 *   and takes the kernel's `rlm_kernel.run` comms;
 * - runs.ts: turns each step of a run into a real code cell below the task cell,
 *   through the notebook's shared model, then adds an answer cell;
 * - marks.ts: marks step and answer cells, and shows prose as plain text (prose.ts:
 *   which cells hold prose);
 * - export.ts: the "Export RLM run" and "Continue RLM run from this step" commands
 *   (the toolbar button and the cell context menu item are declared in
 *   schema/plugin.json).
 */

import {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { IEditorLanguageRegistry } from '@jupyterlab/codemirror';
import { INotebookTracker, NotebookActions } from '@jupyterlab/notebook';

import { PanelConnection, connections, untrackSubshellStatus } from './connection';
import {
  COMMAND_CONTINUE,
  COMMAND_EXPORT,
  activeStep,
  continueFromStep,
  exportRun
} from './export';
import { scheduleMark } from './marks';
import { ILezerLanguage, PythonCheck, pythonCheck, readsAsProse } from './prose';
import { isProse, markProse, supersedeSteps } from './runs';

/** The kernel implementation that runs prose cells as tasks (rlm_kernel/jupyter/
 * kernel.py `RLMKernel.implementation`). */
const RLM_IMPLEMENTATION = 'rlm_kernel';
/** The errors of a cell the kernel ran as Python that does not parse: not prose to it. */
const PARSE_ERRORS = ['SyntaxError', 'IndentationError', 'TabError'];

export { FRONTEND_TARGET, PROTOCOL_VERSION, RUN_TARGET } from './protocol';
export { answerText, latestRunId } from './runs';

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'rlm-kernel-labextension:plugin',
  description:
    'Shows each step of an RLM run as a notebook cell below its task cell.',
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ICommandPalette, IEditorLanguageRegistry],
  activate: (
    app: JupyterFrontEnd,
    tracker: INotebookTracker,
    palette: ICommandPalette | null,
    languages: IEditorLanguageRegistry | null
  ) => {
    untrackSubshellStatus();
    // JupyterLab's own Python parser (the editor's), to read a cell as prose as it is
    // scheduled; without it a prose task cell waits for the kernel's word.
    let parses: PythonCheck | null = null;
    void languages
      ?.getLanguage('python')
      .then(language => {
        const support = language?.support as { language?: ILezerLanguage } | undefined;
        if (support?.language?.parser) {
          parses = pythonCheck(support.language);
        }
      })
      .catch(err => console.warn('rlm-kernel: no Python parser for prose cells', err));
    app.commands.addCommand(COMMAND_EXPORT, {
      label: 'RLM export',
      caption:
        "Export the selected task cell's RLM run (else the notebook's latest) " +
        'as a notebook (%rlm export)',
      isEnabled: () => tracker.currentWidget !== null,
      execute: async () => {
        const panel = tracker.currentWidget;
        if (panel) {
          await exportRun(panel, app.serviceManager.contents, path => {
            void app.commands.execute('docmanager:open', { path });
          });
        }
      }
    });
    app.commands.addCommand(COMMAND_CONTINUE, {
      label: 'Continue RLM run from this step',
      caption:
        'Run this step cell as it is now and let the model go on from there ' +
        '(%%rlm continue); the later steps of its run are replaced',
      isEnabled: () => activeStep(tracker.currentWidget) !== null,
      execute: async () => {
        const panel = tracker.currentWidget;
        if (panel) {
          await continueFromStep(panel);
        }
      }
    });
    if (palette) {
      palette.addItem({ command: COMMAND_EXPORT, category: 'RLM' });
      palette.addItem({ command: COMMAND_CONTINUE, category: 'RLM' });
    }

    tracker.widgetAdded.connect((_, panel) => {
      connections.set(panel.content, new PanelConnection(panel));
      const watchModel = () => {
        const model = panel.content.model;
        if (model) {
          model.cells.changed.connect(() => scheduleMark(panel.content));
          // The notebook gives every code cell the kernel language's mode when its
          // language_info changes: prose task cells get plain text back after it.
          model.metadataChanged.connect(() => scheduleMark(panel.content));
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
    // The rule for "Run All": a task cell's re-run owns its previous run's step
    // cells; they are emptied as the task is scheduled, so step cells queued after
    // it run nothing (the new run replaces them).
    NotebookActions.executionScheduled.connect((_, { notebook, cell }) => {
      const connection = connections.get(notebook);
      connection?.ensureAnnounced();
      const model = notebook.model;
      if (model && cell.model.type === 'code') {
        supersedeSteps(model, cell.model.id);
        // A prose task cell of the rlm kernel is plain text from now on (and a cell
        // once prose, now code, is code again): the kernel's `run_started` confirms
        // it (or not), which may come only after the model has started, or never (a
        // failed start).
        const check = parses;
        const kernel = connection?.panel.sessionContext.session?.kernel;
        if (check && kernel) {
          const source = cell.model.sharedModel.getSource();
          void kernel.info.then(info => {
            if (!cell.isDisposed && cell.model.sharedModel.getSource() === source) {
              markProse(
                cell.model,
                info.implementation === RLM_IMPLEMENTATION && readsAsProse(source, check)
              );
              scheduleMark(notebook);
            }
          });
        }
      }
    });
    // A cell read as prose that the kernel ran as Python (it did not parse) is code.
    NotebookActions.executed.connect((_, { notebook, cell, error }) => {
      if (
        cell.model.type === 'code' &&
        error &&
        PARSE_ERRORS.includes(error.errorName) &&
        isProse(cell.model)
      ) {
        markProse(cell.model, false);
        scheduleMark(notebook);
      }
    });
  }
};

export default plugin;
