/**
 * The Tasks panel's grouping (pure): the rows of a team together under the team's header, as
 * `%tasks` and the team's box of cards show a team in the notebook; a row of no team stays a
 * row of the list.
 */
import { STATUS_ORDER, sortTasks } from './format';
import { ITaskRow } from './protocol';

/** One team's rows, sorted as the flat list is (running first, then by start). */
export interface ITeamGroup {
  team: string;
  tasks: ITaskRow[];
}

export interface ITaskGroups {
  /** The rows of no team, sorted as the flat list is; the panel shows them above the teams. */
  loose: ITaskRow[];
  /** Each team, in the order its first row comes in `tasks`. */
  teams: ITeamGroup[];
}

/**
 * `tasks` grouped by team. Teams keep the order in which their first row comes (the kernel
 * sends rows in the order the tasks started, so a team keeps its place while its members'
 * states change); inside a group and among the loose rows, `sortTasks` orders as before.
 */
export function groupTasks(tasks: readonly ITaskRow[]): ITaskGroups {
  const teams = new Map<string, ITaskRow[]>();
  const loose: ITaskRow[] = [];
  for (const task of tasks) {
    if (task.team === null) {
      loose.push(task);
      continue;
    }
    const members = teams.get(task.team);
    if (members) {
      members.push(task);
    } else {
      teams.set(task.team, [task]);
    }
  }
  return {
    loose: sortTasks(loose),
    teams: [...teams].map(([team, members]) => ({ team, tasks: sortTasks(members) }))
  };
}

/** "2 running, 1 completed": how many members are in each state, running first. */
export function teamStates(tasks: readonly ITaskRow[]): string {
  const counts = new Map<string, number>();
  for (const task of tasks) {
    counts.set(task.status, (counts.get(task.status) ?? 0) + 1);
  }
  const rank = (status: string) => STATUS_ORDER[status] ?? Object.keys(STATUS_ORDER).length;
  return [...counts]
    .sort(([a], [b]) => rank(a) - rank(b))
    .map(([status, n]) => `${n} ${status}`)
    .join(', ');
}

/** What a team's header says after its name: "3 members · 2 running, 1 completed", and how
 * many of its calls wait for approval (a collapsed group still says so). */
export function teamSummary(group: ITeamGroup): string {
  const n = group.tasks.length;
  const waiting = group.tasks.reduce((sum, t) => sum + t.pending_approvals, 0);
  const approvals = waiting > 0 ? ` · ${waiting} pending approval${waiting === 1 ? '' : 's'}` : '';
  return `${n} member${n === 1 ? '' : 's'} · ${teamStates(group.tasks)}${approvals}`;
}

/** A team's header: "team analysts · 3 members · 2 running, 1 completed". */
export function teamHeader(group: ITeamGroup): string {
  return `team ${group.team} · ${teamSummary(group)}`;
}
