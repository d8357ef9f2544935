/**
 * The Tasks panel of the left sidebar: the current notebook's kernel tasks.
 *
 * Drawn only while visible (a hidden panel is redrawn when shown), and row by row: a task's
 * row is rebuilt only when its text changed, so a table of a thousand tasks costs the rows that
 * changed on each update, not the whole list. The rows of a team sit together under the team's
 * header (its name, member count and states), which collapses and expands the group; rows of
 * no team come first, as in `%tasks`.
 */
import { listIcon } from '@jupyterlab/ui-components';
import type { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import { NotebookConnection } from './connection';
import { button, h, placeChildren } from './dom';
import { budgetLine, taskCells, totals } from './format';
import { ITaskRow } from './protocol';
import { ITeamGroup, groupTasks, teamHeader, teamSummary } from './task-groups';

interface IRow {
  node: HTMLElement;
  key: string;
}

/** A team's item of the list: its header (a toggle: the team's name, then `summary`) and the
 * list of its rows. */
interface IGroup {
  node: HTMLElement;
  toggle: HTMLButtonElement;
  summary: HTMLElement;
  rows: HTMLElement;
}

let groupIds = 0;

export class TasksPanel extends Widget {
  private connection: NotebookConnection | null = null;
  private stale = true;
  private rows = new Map<string, IRow>();
  private groups = new Map<string, IGroup>();
  /** The teams whose group is collapsed, per notebook (kept while the panel shows another). */
  private readonly collapsed = new WeakMap<NotebookConnection, Set<string>>();
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
    this.groups.clear();
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
      this.dropGroups(new Set());
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
      this.dropGroups(new Set());
      return;
    }
    this.empty.hidden = true;
    this.list.hidden = false;
    const { loose, teams } = groupTasks(c.tasks);
    this.dropRows(new Set(c.tasks.map(t => t.id)));
    this.dropGroups(new Set(teams.map(g => g.team)));
    const items = loose.map(task => this.rowNode(c, task));
    for (const team of teams) {
      items.push(this.groupNode(c, team));
    }
    placeChildren(this.list, items);
  }

  /** The row of `task`: the one drawn before if its text is the same, else a new one put in
   * its place. */
  private rowNode(c: NotebookConnection, task: ITaskRow): HTMLElement {
    const key = JSON.stringify(taskCells(task)) + task.status + (task.name ?? '');
    const row = this.rows.get(task.id);
    if (row && row.key === key) {
      return row.node;
    }
    const node = this.row(c, task);
    row?.node.replaceWith(node);
    this.rows.set(task.id, { node, key });
    return node;
  }

  /** The item of a team: its header brought up to date, its rows in order. */
  private groupNode(c: NotebookConnection, team: ITeamGroup): HTMLElement {
    let group = this.groups.get(team.team);
    if (!group) {
      group = this.group(c, team.team);
      this.groups.set(team.team, group);
    }
    const summary = ` · ${teamSummary(team)}`;
    if (group.summary.textContent !== summary) {
      group.summary.textContent = summary;
      group.toggle.title = teamHeader(team);
    }
    placeChildren(group.rows, team.tasks.map(task => this.rowNode(c, task)));
    return group.node;
  }

  private group(c: NotebookConnection, team: string): IGroup {
    const node = h('li', 'jp-forkagent-team');
    node.dataset.team = team;
    const rows = h('ul', 'jp-forkagent-team-rows');
    rows.id = `forkagent-team-rows-${++groupIds}`;
    rows.setAttribute('aria-label', `Tasks of team ${team}`);
    const toggle = document.createElement('button');
    toggle.type = 'button';
    toggle.className = 'jp-forkagent-button jp-forkagent-team-toggle';
    toggle.setAttribute('aria-controls', rows.id);
    toggle.appendChild(h('span', 'jp-forkagent-team-caret')).setAttribute('aria-hidden', 'true');
    const label = toggle.appendChild(h('span', 'jp-forkagent-team-label'));
    label.appendChild(h('span', 'jp-forkagent-team-name', `team ${team}`));
    const summary = label.appendChild(h('span', 'jp-forkagent-team-summary'));
    const collapsed = this.collapsedOf(c);
    const show = (open: boolean) => {
      toggle.setAttribute('aria-expanded', String(open));
      node.dataset.expanded = String(open);
      rows.hidden = !open;
    };
    show(!collapsed.has(team));
    toggle.addEventListener('click', event => {
      event.stopPropagation();
      const open = collapsed.has(team);
      if (open) {
        collapsed.delete(team);
      } else {
        collapsed.add(team);
      }
      show(open);
    });
    node.append(toggle, rows);
    return { node, toggle, summary, rows };
  }

  private collapsedOf(c: NotebookConnection): Set<string> {
    let found = this.collapsed.get(c);
    if (!found) {
      found = new Set();
      this.collapsed.set(c, found);
    }
    return found;
  }

  private dropGroups(keep: Set<string>): void {
    for (const [team, group] of this.groups) {
      if (!keep.has(team)) {
        group.node.remove();
        this.groups.delete(team);
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
