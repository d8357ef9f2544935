/** forkagent-jupyter JupyterLab extension: comm per notebook, notification cells, tasks, approvals. */
import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { INotebookTracker, NotebookActions, NotebookPanel } from '@jupyterlab/notebook';

import { ApprovalsIndicator } from './approvals-button';
import { NotebookConnection } from './connection';
import { revealTask } from './dom';
import { TasksPanel } from './tasks-panel';

const connections = new WeakMap<NotebookPanel, NotebookConnection>();

function reveal(panel: NotebookPanel, taskId: string | null, cellId: string | null): void {
  const connection = connections.get(panel);
  const task = taskId ? connection?.tasks.find(t => t.id === taskId) : undefined;
  const launch = cellId ?? task?.cell_id ?? null;
  if (taskId) {
    panel.node.dataset.forkagentRevealed = taskId;
  }
  if (taskId && revealTask(panel.content.node, taskId)) {
    return;
  }
  if (launch) {
    const index = panel.content.widgets.findIndex(c => c.model.id === launch);
    if (index >= 0) {
      panel.content.activeCellIndex = index;
      void panel.content.scrollToItem(index, 'center');
    }
  }
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'forkagent-jupyter:plugin',
  description: 'Notification cells, tasks panel and pending approvals for forkagent-jupyter.',
  autoStart: true,
  requires: [INotebookTracker],
  activate: (app: JupyterFrontEnd, tracker: INotebookTracker) => {
    const tasks = new TasksPanel((c, taskId) => reveal(c.panel, taskId, null));
    app.shell.add(tasks, 'left', { rank: 650 });

    const follow = () => {
      const panel = tracker.currentWidget;
      tasks.setConnection(panel ? (connections.get(panel) ?? null) : null);
    };
    tracker.widgetAdded.connect((_, panel) => {
      const connection = new NotebookConnection(panel);
      connections.set(panel, connection);
      const indicator = new ApprovalsIndicator(connection, (t, c) => reveal(panel, t, c));
      panel.toolbar.insertItem(10, 'forkagent-approvals', indicator);
      follow(); // the tracker may have made it current before this signal
    });
    NotebookActions.executed.connect((_, { notebook }) => {
      const panel = tracker.find(p => p.content === notebook);
      if (panel) {
        connections.get(panel)?.retry();
      }
    });
    tracker.currentChanged.connect(follow);
    follow();
  }
};

export default plugin;
