/** Formatting of task rows for the Tasks panel (pure). */
import { IApproval, IBudget, ITaskRow, ITokenUsage } from './protocol';

export function formatElapsed(seconds: number): string {
  const s = Math.max(0, seconds);
  if (s < 60) {
    return `${s.toFixed(1)} s`;
  }
  const m = Math.floor(s / 60);
  const rest = Math.floor(s - m * 60);
  if (m < 60) {
    return `${m}m ${String(rest).padStart(2, '0')}s`;
  }
  return `${Math.floor(m / 60)}h ${String(m % 60).padStart(2, '0')}m`;
}

export function formatTokens(n: number): string {
  if (n < 1000) {
    return String(Math.round(n));
  }
  if (n < 1_000_000) {
    return `${(n / 1000).toFixed(n < 10_000 ? 1 : 0)}k`;
  }
  return `${(n / 1_000_000).toFixed(1)}M`;
}

export function formatRatio(ratio: number): string {
  return `${Math.round(Math.min(1, Math.max(0, ratio)) * 100)}%`;
}

/** Share of the prompt read from the cache: cache reads over all input tokens. */
export function cacheHitRatio(u: ITokenUsage): number {
  return u.total_input_tokens > 0 ? Math.min(1, u.cache_read_input_tokens / u.total_input_tokens) : 0;
}

/** Input (the whole prompt) and output tokens, short: `14k / 120`. */
export function formatTokenPair(u: ITokenUsage): string {
  return `${formatTokens(u.total_input_tokens)} / ${formatTokens(u.output_tokens)}`;
}

/** The exact counts, for a tooltip. */
export function tokensTitle(u: ITokenUsage): string {
  const n = (v: number) => v.toLocaleString('en-US');
  return (
    `${n(u.total_input_tokens)} input tokens (${n(u.cache_read_input_tokens)} cache read, ` +
    `${n(u.cache_creation_input_tokens)} cache write, ${n(u.input_tokens)} uncached), ` +
    `${n(u.output_tokens)} output tokens`
  );
}

/** `tokens` as a share of `window` (> 0): a whole percent rounded half up (`23%`); below 1%
 * to a tenth rounded half up (`0.4%`, never `0%`). The kernel's `context_percent`
 * (kernel/render/task_line.py) follows the same rule; both are tested on test/context-percent.json. */
export function contextPercent(tokens: number, window: number): string {
  const t = Math.max(0, Math.round(tokens));
  if (t * 100 < window) {
    const tenths = Math.floor((t * 2000 + window) / (2 * window));
    return `${Math.floor(tenths / 10)}.${tenths % 10}%`;
  }
  return `${Math.floor((t * 200 + window) / (2 * window))}%`;
}

/** Context held against the window, short: `45k / 200k (23%)` (`45k` when the window is
 * unknown), and exactly, for a tooltip. */
export function formatContext(
  t: Pick<ITaskRow, 'context_tokens' | 'context_window' | 'compactions'>
): { short: string; title: string } {
  const n = (v: number) => v.toLocaleString('en-US');
  const compacted = t.compactions > 0 ? `, compacted ${t.compactions}x` : '';
  if (t.context_window <= 0) {
    return {
      short: formatTokens(t.context_tokens),
      title: `context ${n(t.context_tokens)} tokens (its last request)${compacted}`
    };
  }
  const share = contextPercent(t.context_tokens, t.context_window);
  return {
    short: `${formatTokens(t.context_tokens)} / ${formatTokens(t.context_window)} (${share})`,
    title:
      `context ${n(t.context_tokens)} of ${n(t.context_window)} tokens (${share}, its last ` +
      `request)${compacted}`
  };
}

export function formatCost(usd: number): string {
  return `$${usd.toFixed(usd < 1 ? 4 : 2)}`;
}

/** "$0.0123 of $2.00 budget", and what reaching it did. */
export function budgetLine(b: IBudget): string {
  const line = `${formatCost(b.spent_usd)} of ${formatCost(b.limit_usd)} budget`;
  return b.reached ? `${line}: reached, workers stopped and new turns refused` : line;
}

export function taskLabel(task: Pick<ITaskRow, 'id' | 'name'>): string {
  return task.name ? `${task.name} (${task.id})` : task.id;
}

export interface ITaskCells {
  label: string;
  status: string;
  elapsed: string;
  tokens: string;
  tokensTitle: string;
  cache: string;
  cost: string;
  /** Context held against the window, and its tooltip. */
  context: string;
  contextTitle: string;
  title: string;
  /** The running call, as its tool describes it ('' when none). */
  call: string;
}

/** The text of one row of the Tasks panel. */
export function taskCells(task: ITaskRow): ITaskCells {
  const status = task.pending_approvals > 0 ? `${task.status} (approval)` : task.status;
  const tool = task.current_tool ? ` · ${task.current_tool}` : '';
  const waiting = task.status === 'running' && task.waiting ? ` · ${task.waiting}` : '';
  const todos = task.todos_total > 0 ? ` · todos ${task.todos_done}/${task.todos_total}` : '';
  const context = formatContext(task);
  return {
    label: taskLabel(task),
    status: status + todos + waiting + tool,
    elapsed: formatElapsed(task.elapsed),
    tokens: formatTokenPair(task.usage),
    tokensTitle: tokensTitle(task.usage),
    cache: formatRatio(cacheHitRatio(task.usage)),
    cost: formatCost(task.cost_usd),
    context: context.short,
    contextTitle: context.title,
    title: task.description,
    call: task.status === 'running' ? task.current_input : ''
  };
}

/** The order of the states in the panel: running first, then how a task ended. */
export const STATUS_ORDER: Readonly<Record<string, number>> = { running: 0, failed: 1, killed: 2, completed: 3 };

/** Running tasks first, then by start time (oldest first). */
export function sortTasks(tasks: readonly ITaskRow[]): ITaskRow[] {
  const rank = (status: string) => STATUS_ORDER[status] ?? 1;
  return [...tasks].sort((a, b) => rank(a.status) - rank(b.status) || a.started_at - b.started_at);
}

export function totals(tasks: readonly ITaskRow[]): { running: number; cost: string } {
  return {
    running: tasks.filter(t => t.status === 'running').length,
    cost: formatCost(tasks.reduce((sum, t) => sum + t.cost_usd, 0))
  };
}

export function approvalLabel(a: IApproval): string {
  const who = a.task_id ? `task ${a.task_id}` : 'parent';
  return `${a.tool} (${who})`;
}
