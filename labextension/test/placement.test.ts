import { describe, expect, it } from 'vitest';

import { hasKey, insertIndex } from '../src/placement';

const note = (key: string) => ({ forkagent: { kind: 'notification', key } });
const cells = [
  { id: 'a', metadata: {} },
  { id: 'b', metadata: {} },
  { id: 'c', metadata: {} }
];

describe('insertIndex', () => {
  it('goes right below the anchor', () => {
    expect(insertIndex(cells, 'a')).toBe(1);
    expect(insertIndex(cells, 'c')).toBe(3);
  });

  it('goes at the end when the anchor is null or gone', () => {
    expect(insertIndex(cells, null)).toBe(3);
    expect(insertIndex(cells, 'deleted')).toBe(3);
  });

  it('keeps arrival order below the same anchor', () => {
    const list = [...cells];
    for (const key of ['k1', 'k2', 'k3']) {
      list.splice(insertIndex(list, 'a'), 0, { id: key, metadata: note(key) });
    }
    expect(list.map(c => c.id)).toEqual(['a', 'k1', 'k2', 'k3', 'b', 'c']);
  });

  it('does not skip ordinary cells below the anchor', () => {
    const list = [cells[0], { id: 'n', metadata: note('x') }, { id: 'user', metadata: {} }];
    expect(insertIndex(list, 'a')).toBe(2);
    expect(insertIndex(list, 'user')).toBe(3);
  });
});

describe('hasKey', () => {
  it('finds a cell with the same notification key only', () => {
    const list = [...cells, { id: 'n', metadata: note('k1') }];
    expect(hasKey(list, 'k1')).toBe(true);
    expect(hasKey(list, 'k2')).toBe(false);
    expect(hasKey(cells, 'k1')).toBe(false);
  });
});
