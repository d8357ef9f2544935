/**
 * The Tasks panel of the left sidebar: the current notebook's kernel tasks.
 *
 * Drawn only while visible (a hidden panel is redrawn when shown), and row by row: a task's
 * row is rebuilt only when its text changed, so a table of a thousand tasks costs the rows that
 * changed on each update, not the whole list.
 */
import { listIcon } from '@jupyterlab/ui-components';
import type { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import { NotebookConnection } from './connection';
import { button, h } from './dom';
import { budgetLine, sortTasks, taskCells, totals } from './format';
import { ITaskRow } from './protocol';

interface IRow {
  node: HTMLElement;
  key: string;
}

export class TasksPanel extends Widget {
  private connection: NotebookConnection | null = null;
  private stale = true;
  private rows = new Map<string, IRow>();
  private readonly summary = h('p', 'jp-forkagent-tasks-summary');
  private readonly budget = h('p', 'jp-forkagent-budget');
  private readonly empty = h('p', 'jp-forkagent-empty');
  private readonly list = h('ul', 'jp-forkagent-tasks-list');

  constructor(private readonly reveal: (c: NotebookConnection, taskId: string) => void) {
    super();
    this.id = 'forkagent-tasks';
    this.addClass('jp-forkagent-tasks-panel');
    this.title.icon = listIcon;
    this.title.caption = 'Forkagent tasks';
    this.node.setAttribute('aria-label', 'Forkagent tasks');
    this.list.setAttribute('aria-label', 'Tasks of this kernel');
    this.node.append(h('h2', 'jp-forkagent-tasks-title', 'Tasks'), this.summary, this.budget, this.empty, this.list);
    this.render();
  }

  setConnection(connection: NotebookConnection | null): void {
    if (this.connection === connection) {
      return;
    }
    this.connection?.changed.disconnect(this.render, this);
    this.connection = connection;
    connection?.changed.connect(this.render, this);
    this.rows.clear();
    this.list.replaceChildren();
    this.stale = true;
    this.render();
  }

  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    if (this.stale) {
      this.render();
    }
  }

  protected onAfterAttach(msg: Message): void {
    super.onAfterAttach(msg);
    if (this.stale) {
      this.render();
    }
  }

  /** Redraw what changed; while the panel is hidden, only note that it is out of date. */
  render(): void {
    if (!this.isVisible && this.isAttached) {
      this.stale = true;
      return;
    }
    this.stale = false;
    const c = this.connection;
    this.summary.hidden = this.budget.hidden = this.list.hidden = true;
    this.empty.hidden = false;
    if (!c) {
      this.empty.textContent = 'No notebook.';
      this.dropRows(new Set());
      return;
    }
    const sum = totals(c.tasks);
    this.summary.hidden = false;
    this.summary.textContent = `${c.tasks.length} tasks, ${sum.running} running, ${sum.cost}`;
    if (c.budget) {
      this.budget.hidden = false;
      this.budget.className = `jp-forkagent-budget${c.budget.reached ? ' jp-forkagent-budget-reached' : ''}`;
      this.budget.textContent = budgetLine(c.budget);
    }
    if (c.tasks.length === 0) {
      this.empty.textContent = 'No tasks for this kernel.';
      this.dropRows(new Set());
      return;
    }
    this.empty.hidden = true;
    this.list.hidden = false;
    const sorted = sortTasks(c.tasks);
    this.dropRows(new Set(sorted.map(t => t.id)));
    let at: ChildNode | null = this.list.firstChild;
    for (const task of sorted) {
      const key = JSON.stringify(taskCells(task)) + task.status + (task.name ?? '');
      let row = this.rows.get(task.id);
      if (!row || row.key !== key) {
        const node = this.row(c, task);
        if (row) {
          if (at === row.node) {
            at = node;
          }
          row.node.replaceWith(node);
        }
        row = { node, key };
        this.rows.set(task.id, row);
      }
      if (row.node !== at) {
        this.list.insertBefore(row.node, at);
      } else {
        at = at.nextSibling;
      }
    }
  }

  private dropRows(keep: Set<string>): void {
    for (const [id, row] of this.rows) {
      if (!keep.has(id)) {
        row.node.remove();
        this.rows.delete(id);
      }
    }
  }

  private row(c: NotebookConnection, task: ITaskRow): HTMLElement {
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
    return row;
  }
}
