/** The notification payload of the MIME type (an `ITaskSnapshot`, parsed in protocol.ts) as DOM
 * (textContent only): its summary first, the `<task-notification>` XML the parent read folded
 * under it, one click away. The kernel's HTML for other frontends has the same layout and clips
 * the result by the same rule (kernel/frontend/note_view.py, both checked against
 * test/result-head.json). */
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

/** The lines of a result the summary shows, at most `RESULT_CHARS` characters of them. */
export const RESULT_LINES = 10;
export const RESULT_CHARS = 1000;
/** What the folded XML is called. */
export const XML_LABEL = 'notification XML (what the parent read)';

const BLANK = /^[ \t\r\n]+|[ \t\r\n]+$/g;

/** The first `RESULT_LINES` lines of `result` (at most `RESULT_CHARS` characters, counted in
 * code points as Python does), and a last line saying how many more the notification holds; a
 * result that fits is kept whole. */
export function resultHead(result: string): string {
  const text = result.replace(BLANK, '');
  const lines = text.split('\n');
  let head = lines.slice(0, RESULT_LINES).join('\n');
  const chars = Array.from(head);
  if (chars.length > RESULT_CHARS) {
    head = chars.slice(0, RESULT_CHARS).join('').replace(BLANK, '') + '…';
  }
  if (head === text) {
    return text;
  }
  const left = lines.length - head.split('\n').length;
  const more = left > 0 ? `${left} more line${left === 1 ? '' : 's'}` : 'more';
  return `${head}\n[… ${more} in the notification below]`;
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

/** The DOM of a notification: header (name, kind, status), summary, the result's first lines,
 * usage, then the XML in a closed `<details>`. A snapshot without XML (a digest's row, clipped by
 * the kernel) shows its result as it is: there is nothing below to hold the rest. */
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
  const xml = note.notification.replace(BLANK, '');
  const result = xml ? resultHead(note.result) : note.result;
  if (result) {
    root.appendChild(el(doc, 'pre', 'jp-forkagent-notification-result', result));
  }
  const usage = root.appendChild(el(doc, 'div', 'jp-forkagent-notification-usage', usageLine(note)));
  usage.title = tokensTitle(note.usage);
  if (xml) {
    const folded = root.appendChild(el(doc, 'details', 'jp-forkagent-notification-xml'));
    folded.appendChild(el(doc, 'summary', 'jp-forkagent-notification-xml-label', XML_LABEL));
    folded.appendChild(el(doc, 'pre', 'jp-forkagent-notification-xml-text', xml));
  }
  return root;
}
