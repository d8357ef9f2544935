/** The Tasks panel of the left sidebar: the current notebook's kernel tasks. */
import { listIcon } from '@jupyterlab/ui-components';
import { Widget } from '@lumino/widgets';

import { NotebookConnection } from './connection';
import { button, h } from './dom';
import { budgetLine, sortTasks, taskCells, totals } from './format';

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
    if (c.budget) {
      const reached = c.budget.reached ? ' jp-forkagent-budget-reached' : '';
      node.appendChild(h('p', `jp-forkagent-budget${reached}`, budgetLine(c.budget)));
    }
    if (c.tasks.length === 0) {
      node.appendChild(h('p', 'jp-forkagent-empty', 'No tasks for this kernel.'));
      return;
    }
    const list = h('ul', 'jp-forkagent-tasks-list');
    list.setAttribute('aria-label', 'Tasks of this kernel');
    for (const task of sortTasks(c.tasks)) {
      const text = taskCells(task);
      const row = h('li', `jp-forkagent-task-row jp-forkagent-status-${task.status}`);
      row.dataset.taskId = task.id;
      row.dataset.status = task.status;
      row.title = text.title;
      const head = row.appendChild(h('div', 'jp-forkagent-task-head'));
      const name = button(task.name ?? task.id, `Show the card of task ${text.label}`, () => this.reveal(c, task.id), 'jp-forkagent-link');
      head.appendChild(name);
      head.appendChild(h('span', 'jp-forkagent-task-status', text.status));
      if (task.status === 'running') {
        head.appendChild(button('Stop', `Stop task ${text.label}`, () => c.stop(task.id), 'jp-forkagent-stop'));
      }
      const stats = row.appendChild(h('div', 'jp-forkagent-task-stats'));
      stats.appendChild(h('span', 'jp-forkagent-task-elapsed', text.elapsed));
      stats.appendChild(h('span', 'jp-forkagent-task-tokens', `${text.tokens} tok`)).title = text.tokensTitle;
      stats.appendChild(h('span', 'jp-forkagent-task-cache', `cache ${text.cache}`));
      stats.appendChild(h('span', 'jp-forkagent-task-cost', text.cost));
      if (task.context_tokens > 0) {
        const context = h('span', 'jp-forkagent-task-context', `ctx ${text.context}`);
        context.title = text.contextTitle;
        stats.appendChild(context);
      }
      if (task.description) {
        row.appendChild(h('div', 'jp-forkagent-task-description', task.description));
      }
      if (text.call) {
        row.appendChild(h('div', 'jp-forkagent-task-call', text.call));
      }
      list.appendChild(row);
    }
    node.appendChild(list);
  }
}
