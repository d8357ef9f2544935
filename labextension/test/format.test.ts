import { describe, expect, it } from 'vitest';

import {
  budgetLine,
  cacheHitRatio,
  contextPercent,
  formatContext,
  formatCost,
  formatElapsed,
  formatRatio,
  formatTokenPair,
  formatTokens,
  sortTasks,
  taskCells,
  totals
} from '../src/format';
import { parseBudget, parseTaskRow } from '../src/protocol';
import contextCases from './context-percent.json';

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

  // a fork that read most of its prompt from the parent's cache: 14,484 prompt tokens
  const usage = {
    input_tokens: 84,
    cache_creation_input_tokens: 200,
    cache_read_input_tokens: 14_200,
    output_tokens: 150,
    total_input_tokens: 14_484
  };

  it('builds a task row: the whole prompt counted once, the hit ratio over it', () => {
    const cells = taskCells(
      row({
        name: 'tests',
        status: 'running',
        usage,
        cost_usd: 0.0042,
        elapsed: 12.34,
        current_tool: 'Write',
        current_input: 'Write notes.txt (3 lines)',
        pending_approvals: 1
      })
    );
    expect(cells).toMatchObject({
      label: 'tests (a1)',
      status: 'running (approval) · Write',
      call: 'Write notes.txt (3 lines)',
      elapsed: '12.3 s',
      tokens: '14k / 150',
      cache: '98%',
      cost: '$0.0042'
    });
    expect(cells.tokensTitle).toBe(
      '14,484 input tokens (14,200 cache read, 200 cache write, 84 uncached), 150 output tokens'
    );
  });

  it('says when a running task waits for rate-limit room', () => {
    const waiting = { status: 'running', waiting: 'waiting for rate limit (12 s)' };
    expect(taskCells(row(waiting)).status).toBe('running · waiting for rate limit (12 s)');
    expect(taskCells(row({ ...waiting, status: 'completed' })).status).toBe('completed');
    expect(taskCells(row({ status: 'running' })).status).toBe('running');
  });

  it("shows how far a task's todo list is done", () => {
    expect(taskCells(row({ status: 'running', todos_done: 1, todos_total: 3 })).status).toBe(
      'running · todos 1/3'
    );
    expect(taskCells(row({ status: 'completed', todos_total: 0 })).status).toBe('completed');
  });

  it('shows the context held against the window, exactly in the tooltip', () => {
    const cells = taskCells(row({ context_tokens: 45_210, context_window: 200_000, compactions: 2 }));
    expect(cells.context).toBe('45k / 200k (23%)');
    expect(cells.contextTitle).toBe(
      'context 45,210 of 200,000 tokens (23%, its last request), compacted 2x'
    );
    // a small context is not 0% of the window
    expect(taskCells(row({ context_tokens: 3_690, context_window: 1_000_000 })).context).toBe(
      '3.7k / 1.0M (0.4%)'
    );
    expect(formatContext({ context_tokens: 900, context_window: 0, compactions: 0 })).toEqual({
      short: '900',
      title: 'context 900 tokens (its last request)'
    });
  });

  it('computes the cache hit ratio as cache reads over all input tokens', () => {
    expect(cacheHitRatio(usage)).toBeCloseTo(14_200 / 14_484, 10);
    expect(formatTokenPair(usage)).toBe('14k / 150');
    const empty = { ...usage, input_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, total_input_tokens: 0 };
    expect(cacheHitRatio(empty)).toBe(0);
  });

  it('takes the total from the parts when a row does not send it', () => {
    const parts: Partial<typeof usage> = { ...usage };
    delete parts.total_input_tokens;
    const parsed = row({ usage: parts }).usage;
    expect(parsed.total_input_tokens).toBe(14_484);
    expect(taskCells(row({ usage: parts })).cache).toBe('98%');
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

describe('budget', () => {
  it('parses the kernel budget and says when it is reached', () => {
    expect(parseBudget(null)).toBeNull();
    expect(parseBudget({ spent_usd: 1 })).toBeNull();
    const b = parseBudget({ spent_usd: 0.0123, limit_usd: 2, reached: false })!;
    expect(budgetLine(b)).toBe('$0.0123 of $2.00 budget');
    const r = parseBudget({ spent_usd: 2.5, limit_usd: 2, reached: true })!;
    expect(budgetLine(r)).toBe('$2.50 of $2.00 budget: reached, workers stopped and new turns refused');
  });
});

describe('context percent (the same table as the kernel, tests/kernel/test_task_line.py)', () => {
  it.each(contextCases.cases)('$tokens of $window is $percent', ({ tokens, window, percent }) => {
    expect(contextPercent(tokens, window)).toBe(percent);
    expect(formatContext({ context_tokens: tokens, context_window: window, compactions: 0 }).title).toContain(
      `(${percent}, its last request)`
    );
  });
});
