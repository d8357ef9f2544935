/**
 * One notebook's link to its kernel: opens the `forkagent` comm on every kernel (re)connect,
 * keeps the kernel's task and approval snapshots, and inserts notification cells.
 */
import { NotebookPanel } from '@jupyterlab/notebook';
import { Kernel, KernelMessage } from '@jupyterlab/services';
import { ISignal, Signal } from '@lumino/signaling';

import { ApprovalList } from './approvals';
import { insertNotificationCell } from './insert';
import {
  COMM_TARGET,
  ApprovalAnswer,
  FrontendMessage,
  IBudget,
  ITaskRow,
  approveMessage,
  helloMessage,
  parseKernelMessage,
  stopMessage
} from './protocol';

export class NotebookConnection {
  readonly approvals = new ApprovalList();
  tasks: ITaskRow[] = [];
  budget: IBudget | null = null;
  private comm: Kernel.IComm | null = null;
  private kernel: Kernel.IKernelConnection | null = null;
  private readonly changedSignal = new Signal<this, void>(this);
  private disposed = false;
  private welcomes = 0;

  constructor(readonly panel: NotebookPanel) {
    const ctx = panel.sessionContext;
    ctx.kernelChanged.connect((_, change) => this.watch(change.newValue ?? null), this);
    void ctx.ready.then(() => this.watch(ctx.session?.kernel ?? null));
    panel.disposed.connect(() => this.dispose());
  }

  /** Emitted when tasks or approvals changed. */
  get changed(): ISignal<this, void> {
    return this.changedSignal;
  }

  get connected(): boolean {
    return this.comm !== null && !this.comm.isDisposed;
  }

  dispose(): void {
    this.disposed = true;
    this.closeComm();
    Signal.clearData(this);
  }

  /** Follow a (new) kernel connection: open now, and again on restart and reconnect. */
  private watch(kernel: Kernel.IKernelConnection | null): void {
    if (this.kernel === kernel) {
      this.open();
      return;
    }
    if (this.kernel) {
      this.kernel.statusChanged.disconnect(this.onStatus, this);
      this.kernel.connectionStatusChanged.disconnect(this.onConnection, this);
    }
    this.closeComm();
    this.kernel = kernel;
    this.reset();
    if (!kernel) {
      delete this.panel.node.dataset.forkagentKernel;
      return;
    }
    kernel.statusChanged.connect(this.onStatus, this);
    kernel.connectionStatusChanged.connect(this.onConnection, this);
    this.open();
  }

  private onStatus(kernel: Kernel.IKernelConnection, status: KernelMessage.Status): void {
    if (status === 'restarting' || status === 'autorestarting' || status === 'dead') {
      this.comm = null; // the kernel side is gone with its comms
      this.reset();
      delete this.panel.node.dataset.forkagentKernel;
      delete this.panel.node.dataset.forkagentConnected;
    } else if (status === 'idle' && !this.connected && kernel.connectionStatus === 'connected') {
      this.open();
    }
  }

  private onConnection(_: Kernel.IKernelConnection, status: Kernel.ConnectionStatus): void {
    if (status === 'connected') {
      this.closeComm();
      this.open();
    } else {
      delete this.panel.node.dataset.forkagentConnected;
    }
  }

  /** Re-open after a cell ran (the kernel side may have just been loaded). */
  retry(): void {
    if (!this.connected && this.kernel && this.kernel.connectionStatus === 'connected') {
      this.open();
    }
  }

  private open(): void {
    const kernel = this.kernel;
    if (this.disposed || !kernel || this.connected || kernel.isDisposed) {
      return;
    }
    let comm: Kernel.IComm;
    try {
      comm = kernel.createComm(COMM_TARGET);
    } catch (err) {
      console.warn('forkagent: cannot open comm', err);
      return;
    }
    this.comm = comm;
    comm.onMsg = msg => this.onMessage(msg.content.data);
    comm.onClose = () => {
      if (this.comm === comm) {
        this.comm = null;
        delete this.panel.node.dataset.forkagentConnected;
      }
    };
    comm.open({ ...helloMessage() });
    this.panel.node.dataset.forkagentKernel = kernel.id;
  }

  private closeComm(): void {
    const comm = this.comm;
    this.comm = null;
    if (comm && !comm.isDisposed) {
      try {
        comm.close();
      } catch {
        // the kernel connection is already gone
      }
    }
    delete this.panel.node.dataset.forkagentConnected;
  }

  private reset(): void {
    this.tasks = [];
    this.approvals.reset([]);
    this.changedSignal.emit();
  }

  private send(data: FrontendMessage): boolean {
    if (!this.comm || this.comm.isDisposed) {
      return false;
    }
    this.comm.send({ ...data });
    return true;
  }

  approve(requestId: string, decision: ApprovalAnswer): boolean {
    // the entry goes when the kernel confirms with `approval_done`
    return this.send(approveMessage(requestId, decision));
  }

  stop(taskId: string): boolean {
    return this.send(stopMessage(taskId));
  }

  private onMessage(data: unknown): void {
    const message = parseKernelMessage(data);
    if (message === null) {
      return;
    }
    switch (message.type) {
      case 'welcome':
        this.tasks = message.tasks;
        this.budget = message.budget;
        this.approvals.reset(message.approvals);
        this.panel.node.dataset.forkagentConnected = String(message.version);
        this.welcomes += 1;
        this.panel.node.dataset.forkagentWelcomes = String(this.welcomes);
        this.changedSignal.emit();
        break;
      case 'tasks':
        this.tasks = message.tasks;
        this.budget = message.budget;
        this.changedSignal.emit();
        break;
      case 'approval':
        this.approvals.add(message);
        this.changedSignal.emit();
        break;
      case 'approval_done':
        if (this.approvals.remove(message.request_id)) {
          this.changedSignal.emit();
        }
        break;
      case 'insert_cell':
        insertNotificationCell(this.panel, message);
        break;
    }
  }
}
