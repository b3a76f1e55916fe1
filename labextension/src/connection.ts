/**
 * The kernel side of a notebook panel: the announcement comm (`rlm_kernel.frontend`,
 * opened again after a kernel change or restart, and just before a cell runs if the
 * kernel closed it because the target was not registered yet) and the
 * `rlm_kernel.run` comm target whose messages become cells (runs.ts).
 */

import { PageConfig } from '@jupyterlab/coreutils';
import type { Notebook, NotebookPanel } from '@jupyterlab/notebook';
import type { Kernel, KernelMessage } from '@jupyterlab/services';

import { scheduleMark } from './marks';
import { FRONTEND_TARGET, PROTOCOL_VERSION, RUN_TARGET, isRunMessage } from './protocol';
import { handleRunMessage } from './runs';

/** The kernel side of one notebook panel: announcement comm + run target. */
export class PanelConnection {
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
        const model = panel.content.model;
        if (model && isRunMessage(data) && handleRunMessage(model, data)) {
          scheduleMark(panel.content);
        }
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

/** The connection of each notebook widget. */
export const connections = new WeakMap<Notebook, PanelConnection>();

/** Control-channel requests of ipykernel 7's subshells (JupyterLab's widget manager
 * sends them when a run's widgets appear). */
export const SUBSHELL_REQUESTS = [
  'create_subshell_request',
  'delete_subshell_request',
  'list_subshell_request'
];

/**
 * Keep the status bar "Busy" for a whole run: JupyterLab sets the kernel's status
 * from every IOPub status message except those whose parent's type is in the page
 * option `untracked_message_types` (the server's list: comm_info, kernel_info,
 * debug requests, ...).  That list predates subshells, so the `idle` status that
 * ends a `create_subshell_request` sent mid-run read as the kernel being idle for
 * the rest of the run.  Adds the subshell requests to the option.
 */
export function untrackSubshellStatus(): string[] {
  let types: unknown = [];
  try {
    types = JSON.parse(PageConfig.getOption('untracked_message_types') || '[]');
  } catch {
    types = [];
  }
  const list = Array.isArray(types) ? types.map(String) : [];
  for (const type of SUBSHELL_REQUESTS) {
    if (!list.includes(type)) {
      list.push(type);
    }
  }
  PageConfig.setOption('untracked_message_types', JSON.stringify(list));
  return list;
}
