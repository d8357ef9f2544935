import { describe, expect, it } from 'vitest';

import { ApprovalList } from '../src/approvals';
import { parseApproval, parseInsertCell, parseTaskRow, parseTasks } from '../src/protocol';

describe('parseInsertCell', () => {
  it('keeps a version 2 cell exactly, marking the key', () => {
    const outputs = [
      { output_type: 'display_data', data: { 'text/plain': 'done' }, metadata: {} },
      { output_type: 'display_data', data: { 'text/markdown': '**answer**' }, metadata: {} }
    ];
    const msg = {
      type: 'insert_cell',
      key: 'k-1',
      after_cell_id: 'cell-7',
      task_ids: ['a1', 'b2'],
      cell: {
        cell_type: 'code',
        source: '%notifications a1 b2',
        metadata: { forkagent: { kind: 'notification', key: 'k-1', task_ids: ['a1', 'b2'] }, tags: ['x'] },
        outputs
      }
    };
    const insert = parseInsertCell(msg);
    expect(insert).not.toBeNull();
    expect(insert!.key).toBe('k-1');
    expect(insert!.after_cell_id).toBe('cell-7');
    expect(insert!.cell.source).toBe('%notifications a1 b2');
    expect(insert!.cell.outputs).toEqual(outputs);
    expect(insert!.cell.metadata).toEqual({
      forkagent: { kind: 'notification', key: 'k-1', task_ids: ['a1', 'b2'] },
      tags: ['x']
    });
  });

  it('builds the cell from a version 1 message', () => {
    const insert = parseInsertCell({
      type: 'insert_cell',
      after_cell_id: null,
      task_ids: ['a1'],
      notifications: ['<task-notification>a1</task-notification>'],
      answer: 'The answer.'
    });
    expect(insert!.key).toBe('tasks:a1');
    expect(insert!.after_cell_id).toBeNull();
    expect(insert!.cell.source).toBe('%notifications a1');
    expect(insert!.cell.metadata).toEqual({ forkagent: { kind: 'notification', key: 'tasks:a1', task_ids: ['a1'] } });
    expect(insert!.cell.outputs.map(o => Object.keys(o.data as object)[0])).toEqual(['text/plain', 'text/markdown']);
  });

  it('rejects what is not a message', () => {
    expect(parseInsertCell('x')).toBeNull();
    expect(parseInsertCell({ type: 'insert_cell' })).toBeNull();
  });
});

describe('task rows and approvals', () => {
  it('fills missing fields with neutral values', () => {
    const row = parseTaskRow({ id: 't1', status: 'completed', usage: { output_tokens: 'x' } });
    expect(row).toMatchObject({
      id: 't1',
      name: null,
      status: 'completed',
      cell_id: null,
      context_tokens: 0,
      context_window: 0,
      compactions: 0
    });
    expect(row!.usage).toEqual({
      input_tokens: 0,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 0,
      output_tokens: 0,
      total_input_tokens: 0
    });
  });

  it('drops rows without an id', () => {
    expect(parseTasks([{ id: 'a' }, { name: 'x' }, 5, null]).map(t => t.id)).toEqual(['a']);
    expect(parseTasks(undefined)).toEqual([]);
  });

  it('accepts numeric request ids and keeps approvals in arrival order', () => {
    const list = new ApprovalList();
    list.add(parseApproval({ request_id: 140, tool: 'Write' })!);
    list.add(parseApproval({ request_id: 'r2', task_id: 't2', tool: 'Bash', preview: 'ls' })!);
    expect(list.list().map(a => a.request_id)).toEqual(['140', 'r2']);
    expect(list.remove('140')).toBe(true);
    expect(list.remove('140')).toBe(false);
    expect(list.size).toBe(1);
    expect(parseApproval({ tool: 'Write' })).toBeNull();
  });

  it('keeps the rule "Allow for session" adds, or null', () => {
    expect(parseApproval({ request_id: 'r', tool: 'Bash', rule: "Bash(sh -c 'echo hi')" })!.rule).toBe(
      "Bash(sh -c 'echo hi')"
    );
    expect(parseApproval({ request_id: 'r', tool: 'Bash' })!.rule).toBeNull();
    expect(parseApproval({ request_id: 'r', tool: 'Bash', rule: 5 })!.rule).toBeNull();
  });
});
