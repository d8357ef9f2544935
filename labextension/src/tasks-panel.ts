/** The Tasks panel of the left sidebar: the current notebook's kernel tasks. */
import { listIcon } from '@jupyterlab/ui-components';
import { Widget } from '@lumino/widgets';

import { NotebookConnection } from './connection';
import { button, h } from './dom';
import { sortTasks, taskCells, totals } from './format';

export class TasksPanel extends Widget {
  private connection: NotebookConnection | null = null;

  constructor(private readonly reveal: (c: NotebookConnection, taskId: string) => void) {
    super();
    this.id = 'forkagent-tasks';
    this.addClass('jp-forkagent-tasks-panel');
    this.title.icon = listIcon;
    this.title.caption = 'Forkagent tasks';
    this.node.setAttribute('aria-label', 'Forkagent tasks');
    this.render();
  }

  setConnection(connection: NotebookConnection | null): void {
    if (this.connection === connection) {
      return;
    }
    this.connection?.changed.disconnect(this.render, this);
    this.connection = connection;
    connection?.changed.connect(this.render, this);
    this.render();
  }

  render(): void {
    const c = this.connection;
    const node = this.node;
    node.replaceChildren();
    node.appendChild(h('h2', 'jp-forkagent-tasks-title', 'Tasks'));
    if (!c) {
      node.appendChild(h('p', 'jp-forkagent-empty', 'No notebook.'));
      return;
    }
    const sum = totals(c.tasks);
    node.appendChild(
      h('p', 'jp-forkagent-tasks-summary', `${c.tasks.length} tasks, ${sum.running} running, ${sum.cost}`)
    );
    if (c.tasks.length === 0) {
      node.appendChild(h('p', 'jp-forkagent-empty', 'No tasks for this kernel.'));
      return;
    }
    const table = h('table', 'jp-forkagent-tasks-table');
    const head = h('tr', '');
    for (const name of ['Task', 'Status', 'Elapsed', 'Tokens in / out', 'Cache', 'Cost', '']) {
      head.appendChild(h('th', '', name));
    }
    table.appendChild(h('thead', '')).appendChild(head);
    const body = table.appendChild(h('tbody', ''));
    for (const task of sortTasks(c.tasks)) {
      const text = taskCells(task);
      const row = h('tr', `jp-forkagent-task-row jp-forkagent-status-${task.status}`);
      row.dataset.taskId = task.id;
      row.dataset.status = task.status;
      row.title = text.title;
      const name = button(text.label, `Show the card of task ${text.label}`, () => this.reveal(c, task.id), 'jp-forkagent-link');
      row.appendChild(h('td', 'jp-forkagent-task-name')).appendChild(name);
      row.appendChild(h('td', 'jp-forkagent-task-status', text.status));
      row.appendChild(h('td', 'jp-forkagent-task-elapsed', text.elapsed));
      row.appendChild(h('td', 'jp-forkagent-task-tokens', text.tokens));
      row.appendChild(h('td', 'jp-forkagent-task-cache', text.cache));
      row.appendChild(h('td', 'jp-forkagent-task-cost', text.cost));
      const actions = row.appendChild(h('td', ''));
      if (task.status === 'running') {
        actions.appendChild(button('Stop', `Stop task ${text.label}`, () => c.stop(task.id), 'jp-forkagent-stop'));
      }
      body.appendChild(row);
    }
    node.appendChild(table);
  }
}
