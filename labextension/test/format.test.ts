import { describe, expect, it } from 'vitest';

import { formatCost, formatElapsed, formatRatio, formatTokens, sortTasks, taskCells, totals } from '../src/format';
import { parseTaskRow } from '../src/protocol';

const row = (over: object) => parseTaskRow({ id: 'a1', ...over })!;

describe('formatting', () => {
  it('formats elapsed time, tokens, ratio and cost', () => {
    expect(formatElapsed(3.26)).toBe('3.3 s');
    expect(formatElapsed(125)).toBe('2m 05s');
    expect(formatElapsed(3 * 3600 + 7 * 60)).toBe('3h 07m');
    expect(formatTokens(999)).toBe('999');
    expect(formatTokens(1534)).toBe('1.5k');
    expect(formatTokens(25_400)).toBe('25k');
    expect(formatTokens(2_500_000)).toBe('2.5M');
    expect(formatRatio(0.876)).toBe('88%');
    expect(formatCost(0.01234)).toBe('$0.0123');
    expect(formatCost(12.5)).toBe('$12.50');
  });

  it('builds a task row with input tokens including the cache', () => {
    const cells = taskCells(
      row({
        name: 'tests',
        status: 'running',
        input_tokens: 200,
        cache_read_tokens: 9000,
        cache_write_tokens: 800,
        output_tokens: 150,
        cache_hit_ratio: 0.9,
        cost_usd: 0.0042,
        elapsed: 12.34,
        current_tool: 'Write',
        pending_approvals: 1
      })
    );
    expect(cells).toMatchObject({
      label: 'tests (a1)',
      status: 'running (approval) · Write',
      elapsed: '12.3 s',
      tokens: '10k / 150',
      cache: '90%',
      cost: '$0.0042'
    });
  });

  it('sorts running first, then by start time, and sums', () => {
    const tasks = [
      row({ id: 'c', status: 'completed', started_at: 1, cost_usd: 0.5 }),
      row({ id: 'r2', status: 'running', started_at: 5, cost_usd: 0.25 }),
      row({ id: 'r1', status: 'running', started_at: 2 })
    ];
    expect(sortTasks(tasks).map(t => t.id)).toEqual(['r1', 'r2', 'c']);
    expect(totals(tasks)).toEqual({ running: 2, cost: '$0.7500' });
  });
});
