/**
 * rlm-kernel-labextension: the JupyterLab side of docs/protocol.md.
 *
 * - connection.ts: announces the extension to the kernel (`rlm_kernel.frontend`)
 *   and takes the kernel's `rlm_kernel.run` comms;
 * - runs.ts: turns each step of a run into a real code cell below the task cell,
 *   through the notebook's shared model, then adds an answer cell;
 * - marks.ts: marks step and answer cells, and shows prose task cells as plain text;
 * - export.ts: the "Export RLM run" and "Continue RLM run from this step" commands
 *   (the toolbar button and the cell context menu item are declared in
 *   schema/plugin.json).
 */

import {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
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
import { supersedeSteps } from './runs';

export { FRONTEND_TARGET, PROTOCOL_VERSION, RUN_TARGET } from './protocol';
export { answerText, latestRunId } from './runs';

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'rlm-kernel-labextension:plugin',
  description:
    'Shows each step of an RLM run as a notebook cell below its task cell.',
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ICommandPalette],
  activate: (
    app: JupyterFrontEnd,
    tracker: INotebookTracker,
    palette: ICommandPalette | null
  ) => {
    untrackSubshellStatus();
    app.commands.addCommand(COMMAND_EXPORT, {
      label: 'RLM export',
      caption:
        "Export the selected task cell's RLM run (else the notebook's latest) " +
        'as a notebook (%rlm export)',
      isEnabled: () => tracker.currentWidget !== null,
      execute: async () => {
        const panel = tracker.currentWidget;
        if (panel) {
          await exportRun(panel, app.serviceManager.contents);
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
      connections.get(notebook)?.ensureAnnounced();
      const model = notebook.model;
      if (model && cell.model.type === 'code') {
        supersedeSteps(model, cell.model.id);
      }
    });
  }
};

export default plugin;
