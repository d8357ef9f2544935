/** The Tasks panel's grouping: a team's rows together under its header, in the order the teams
 * first come; rows of no team first, as the flat list sorts them. */
import { describe, expect, it } from 'vitest';

import { parseTaskRow } from '../src/protocol';
import { groupTasks, teamHeader, teamStates } from '../src/task-groups';

const row = (id: string, over: object = {}) => parseTaskRow({ id, name: id, ...over })!;

describe('grouping the rows by team', () => {
  // as the kernel sends them: in the order the tasks started
  const tasks = [
    row('solo', { status: 'completed', started_at: 1 }),
    row('ana', { team: 'analysts', status: 'completed', started_at: 2 }),
    row('rev', { team: 'reviewers', status: 'running', started_at: 3 }),
    row('bob', { team: 'analysts', status: 'running', started_at: 4 }),
    row('fork', { status: 'running', started_at: 5 }),
    row('cyd', { team: 'analysts', status: 'running', started_at: 6, pending_approvals: 2 })
  ];

  it('puts the rows of no team first, then each team in the order it first comes', () => {
    const { loose, teams } = groupTasks(tasks);
    expect(loose.map(t => t.id)).toEqual(['fork', 'solo']); // running first, as sortTasks
    expect(teams.map(g => g.team)).toEqual(['analysts', 'reviewers']);
    expect(teams[0].tasks.map(t => t.id)).toEqual(['bob', 'cyd', 'ana']);
    expect(teams[1].tasks.map(t => t.id)).toEqual(['rev']);
  });

  it('keeps a team in its place when its members change state', () => {
    const later = tasks.map(t => (t.team === 'analysts' ? { ...t, status: 'killed' } : t));
    expect(groupTasks(later).teams.map(g => g.team)).toEqual(['analysts', 'reviewers']);
  });

  it('heads a team with its name, member count and states', () => {
    const [analysts, reviewers] = groupTasks(tasks).teams;
    expect(teamHeader(analysts)).toBe('team analysts · 3 members · 2 running, 1 completed · 2 pending approvals');
    expect(teamHeader(reviewers)).toBe('team reviewers · 1 member · 1 running');
    expect(teamStates([row('a', { status: 'completed' }), row('b', { status: 'failed' }), row('c', { status: 'odd' })])).toBe(
      '1 failed, 1 completed, 1 odd'
    );
  });

  it('reads the team of a row, none when the kernel sends none', () => {
    expect(row('a', { team: 'analysts' }).team).toBe('analysts');
    expect(row('a').team).toBeNull();
    expect(row('a', { team: '' }).team).toBeNull();
    expect(groupTasks([row('a'), row('b', { team: 5 })]).teams).toEqual([]);
  });
});
