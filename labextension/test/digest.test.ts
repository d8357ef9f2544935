import { describe, expect, it } from 'vitest';

import { statusCounts } from '../src/digest';
import { parseDigest, parseInsertCell } from '../src/protocol';

describe('digest payload', () => {
  it('parses every task and counts them by status, completed first', () => {
    const digest = parseDigest({
      tasks: [
        { task_id: 'a', status: 'failed' },
        { task_id: 'b', status: 'completed' },
        { task_id: 'c', status: 'completed' },
        { task_id: 'd', status: 'killed' }
      ]
    });
    expect(digest.tasks.map(t => t.task_id)).toEqual(['a', 'b', 'c', 'd']);
    expect(statusCounts(digest.tasks)).toBe('2 completed · 1 failed · 1 killed');
  });

  it('takes junk as no tasks', () => {
    expect(parseDigest('nonsense').tasks).toEqual([]);
    expect(parseDigest({ tasks: 3 }).tasks).toEqual([]);
  });
});

describe('insert_cell replace', () => {
  const cell = { cell_type: 'code', source: '%notifications a', metadata: {}, outputs: [] };
  it('is true only when the kernel says true', () => {
    expect(parseInsertCell({ key: 'k', task_ids: ['a'], cell, replace: true })?.replace).toBe(true);
    expect(parseInsertCell({ key: 'k', task_ids: ['a'], cell, replace: 'yes' })?.replace).toBe(false);
    expect(parseInsertCell({ key: 'k', task_ids: ['a'], cell })?.replace).toBe(false);
  });
});
