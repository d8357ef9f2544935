import { describe, expect, it } from 'vitest';

import { parseNotification, usageLine } from '../src/notification';

describe('notification payload', () => {
  it('parses with defaults and summarises usage', () => {
    const note = parseNotification({
      task_id: 't1',
      status: 'completed',
      usage: { input_tokens: 100, output_tokens: 40, cache_read_tokens: 900, cache_write_tokens: 0 },
      cost_usd: 0.002,
      elapsed: 4
    });
    expect(note.name).toBeNull();
    expect(note.kind).toBe('fork');
    expect(usageLine(note)).toBe('1.0k in / 40 out · cache 90% · $0.0020 · 4.0 s');
  });

  it('survives garbage', () => {
    expect(parseNotification(null)).toMatchObject({ task_id: '', status: 'completed', cost_usd: 0 });
  });
});
