import { describe, expect, it } from 'vitest';

import { RESULT_LINES, resultHead, usageLine } from '../src/notification';
import { parseTaskSnapshot } from '../src/protocol';
import headCases from './result-head.json';

/** A text of the shared table: [text, times] runs, joined. */
const runs = (parts: (string | number)[][]): string =>
  parts.map(([text, times]) => String(text).repeat(Number(times))).join('');

describe('notification payload', () => {
  it('parses with defaults and summarises usage', () => {
    const note = parseTaskSnapshot({
      task_id: 't1',
      status: 'completed',
      usage: {
        input_tokens: 100,
        cache_creation_input_tokens: 0,
        cache_read_input_tokens: 900,
        output_tokens: 40,
        total_input_tokens: 1000
      },
      cost_usd: 0.002,
      elapsed: 4
    });
    expect(note.name).toBeNull();
    expect(note.kind).toBe('fork');
    expect(usageLine(note)).toBe('1.0k in / 40 out · cache 90% · $0.0020 · 4.0 s');
  });

  it('counts the prompt once and the hit ratio over it (14,484 tokens, 98% from cache)', () => {
    const note = parseTaskSnapshot({
      task_id: 't2',
      usage: {
        input_tokens: 84,
        cache_creation_input_tokens: 200,
        cache_read_input_tokens: 14_200,
        output_tokens: 150,
        total_input_tokens: 14_484
      },
      cost_usd: 0.0123,
      elapsed: 3.2
    });
    expect(usageLine(note)).toBe('14k in / 150 out · cache 98% · $0.0123 · 3.2 s');
  });

  it('survives garbage', () => {
    expect(parseTaskSnapshot(null)).toMatchObject({ task_id: '', status: 'completed', cost_usd: 0 });
  });
});

describe("a notification's summary", () => {
  it.each(headCases.cases.map(c => [c.what, c]))('clips the result as the kernel does: %s', (_what, c) => {
    expect(resultHead(runs(c.result))).toBe(runs(c.head));
  });

  it('shows the first lines of a long result and says how many more the XML holds', () => {
    const result = Array.from({ length: 30 }, (_, i) => `finding ${i + 1}`).join('\n');
    const head = resultHead(result).split('\n');
    expect(head).toHaveLength(RESULT_LINES + 1);
    expect(head[0]).toBe('finding 1');
    expect(head[RESULT_LINES - 1]).toBe(`finding ${RESULT_LINES}`);
    expect(head[RESULT_LINES]).toBe('[… 20 more lines in the notification below]');
  });
});
