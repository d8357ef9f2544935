/**
 * The digest of a large fan-out's notifications: one output, a row per task (each opens to
 * the task's notification, its result clipped by the kernel), the first `DIGEST_PAGE` rows
 * drawn and the rest on demand, so a thousand notifications keep the page small.
 */
import { el, renderNotification, usageLine } from './notification';
import { IDigest, ITaskSnapshot } from './protocol';

export const DIGEST_PAGE = 50;

/** Tasks by status, in a fixed order: "3 completed · 1 failed". */
export function statusCounts(tasks: readonly ITaskSnapshot[]): string {
  const counts = new Map<string, number>();
  for (const t of tasks) {
    counts.set(t.status, (counts.get(t.status) ?? 0) + 1);
  }
  const order = ['completed', 'failed', 'killed', 'running'];
  const keys = [...counts.keys()].sort(
    (a, b) => (order.indexOf(a) + 1 || 99) - (order.indexOf(b) + 1 || 99) || a.localeCompare(b)
  );
  return keys.map(k => `${counts.get(k)} ${k}`).join(' · ');
}

/** One row: name, status, summary and usage; opening it draws the whole notification. */
export function renderDigestRow(doc: Document, note: ITaskSnapshot): HTMLElement {
  const row = el(doc, 'details', 'jp-forkagent-digest-row');
  row.dataset.status = note.status;
  row.dataset.taskId = note.task_id;
  const head = row.appendChild(el(doc, 'summary', 'jp-forkagent-digest-head'));
  head.appendChild(el(doc, 'span', 'jp-forkagent-notification-name', note.name ?? note.task_id));
  head.appendChild(el(doc, 'span', `jp-forkagent-status jp-forkagent-status-${note.status}`, note.status));
  head.appendChild(el(doc, 'span', 'jp-forkagent-digest-what', note.summary || note.description));
  head.appendChild(el(doc, 'span', 'jp-forkagent-notification-usage', usageLine(note)));
  row.addEventListener('toggle', () => {
    if ((row as HTMLDetailsElement).open && row.childElementCount === 1) {
      row.appendChild(renderNotification(doc, note));
    }
  });
  return row;
}

/** The digest: a title with the counts, the first rows, and a button for the next ones. */
export function renderDigest(doc: Document, digest: IDigest, page = DIGEST_PAGE): HTMLElement {
  const root = el(doc, 'div', 'jp-forkagent-digest');
  root.setAttribute('role', 'note');
  root.dataset.tasks = String(digest.tasks.length);
  const title = `${digest.tasks.length} notifications: ${statusCounts(digest.tasks)}`;
  root.appendChild(el(doc, 'div', 'jp-forkagent-digest-title', title));
  const list = root.appendChild(el(doc, 'div', 'jp-forkagent-digest-rows'));
  let shown = 0;
  const more = el(doc, 'button', 'jp-forkagent-button jp-forkagent-digest-more') as HTMLButtonElement;
  more.type = 'button';
  const next = () => {
    const end = Math.min(digest.tasks.length, shown + page);
    for (; shown < end; shown++) {
      list.appendChild(renderDigestRow(doc, digest.tasks[shown]));
    }
    const left = digest.tasks.length - shown;
    more.textContent = `Show ${Math.min(page, left)} more (${left} not shown)`;
    more.hidden = left === 0;
  };
  more.addEventListener('click', event => {
    event.stopPropagation();
    next();
  });
  next();
  root.appendChild(more);
  return root;
}
