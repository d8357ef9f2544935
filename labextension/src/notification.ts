/** The notification payload of the MIME type (an `ITaskSnapshot`, parsed in protocol.ts) as DOM
 * (textContent only). */
import { cacheHitRatio, formatCost, formatElapsed, formatRatio, formatTokens, tokensTitle } from './format';
import { ITaskSnapshot } from './protocol';

/** One line of usage: tokens in/out, cache hit ratio, cost, elapsed. */
export function usageLine(note: ITaskSnapshot): string {
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
export function renderNotification(doc: Document, note: ITaskSnapshot): HTMLElement {
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
