/** The notification payload of the MIME type, parsed and turned into DOM (textContent only). */
import { cacheHitRatio, formatCost, formatElapsed, formatRatio, formatTokens, tokensTitle } from './format';
import { ITokenUsage, isObject, parseUsage } from './protocol';

export interface INotification {
  task_id: string;
  name: string | null;
  kind: string;
  status: string;
  description: string;
  summary: string;
  result: string;
  /** The `<task-notification>` text the parent model read. */
  notification: string;
  usage: ITokenUsage;
  cost_usd: number;
  elapsed: number;
}

function n(value: unknown): number {
  return typeof value === 'number' && Number.isFinite(value) ? value : 0;
}

function s(value: unknown): string {
  return typeof value === 'string' ? value : '';
}

export function parseNotification(value: unknown): INotification {
  const v = isObject(value) ? value : {};
  return {
    task_id: s(v.task_id),
    name: s(v.name) || null,
    kind: s(v.kind) || 'fork',
    status: s(v.status) || 'completed',
    description: s(v.description),
    summary: s(v.summary),
    result: s(v.result),
    notification: s(v.notification),
    usage: parseUsage(v.usage),
    cost_usd: n(v.cost_usd),
    elapsed: n(v.elapsed)
  };
}

/** One line of usage: tokens in/out, cache hit ratio, cost, elapsed. */
export function usageLine(note: INotification): string {
  const u = note.usage;
  return [
    `${formatTokens(u.total_input_tokens)} in / ${formatTokens(u.output_tokens)} out`,
    `cache ${formatRatio(cacheHitRatio(u))}`,
    formatCost(note.cost_usd),
    formatElapsed(note.elapsed)
  ].join(' · ');
}

/** An element of class `cls`, its text (if any) set as textContent. */
export function el(doc: Document, tag: string, cls: string, text?: string): HTMLElement {
  const node = doc.createElement(tag);
  node.className = cls;
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

/** The DOM of a notification: header (name, kind, status), summary, result, usage. */
export function renderNotification(doc: Document, note: INotification): HTMLElement {
  const root = el(doc, 'div', 'jp-forkagent-notification');
  root.dataset.status = note.status;
  root.dataset.taskId = note.task_id;
  root.setAttribute('role', 'note');
  const head = el(doc, 'div', 'jp-forkagent-notification-head');
  head.appendChild(el(doc, 'span', 'jp-forkagent-notification-name', note.name ?? note.task_id));
  head.appendChild(el(doc, 'span', 'jp-forkagent-notification-kind', note.kind));
  head.appendChild(
    el(doc, 'span', `jp-forkagent-status jp-forkagent-status-${note.status}`, note.status)
  );
  root.appendChild(head);
  if (note.summary) {
    root.appendChild(el(doc, 'div', 'jp-forkagent-notification-summary', note.summary));
  }
  if (note.result) {
    root.appendChild(el(doc, 'pre', 'jp-forkagent-notification-result', note.result));
  }
  const usage = root.appendChild(el(doc, 'div', 'jp-forkagent-notification-usage', usageLine(note)));
  usage.title = tokensTitle(note.usage);
  return root;
}
