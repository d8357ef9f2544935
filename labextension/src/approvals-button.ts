/** The notebook toolbar item: count of pending approvals; opens a list to answer them. */
import { Widget } from '@lumino/widgets';

import { NotebookConnection } from './connection';
import { button, h } from './dom';
import { approvalLabel } from './format';

export class ApprovalsIndicator extends Widget {
  private readonly toggle: HTMLButtonElement;
  private readonly list: HTMLElement;
  private expanded = false;

  constructor(
    private readonly connection: NotebookConnection,
    private readonly reveal: (taskId: string | null, cellId: string | null) => void
  ) {
    super();
    this.addClass('jp-forkagent-approvals');
    this.toggle = button('', 'Pending approvals', () => this.setExpanded(!this.expanded), 'jp-forkagent-approvals-toggle');
    this.toggle.setAttribute('aria-haspopup', 'true');
    this.list = h('div', 'jp-forkagent-approvals-list');
    this.list.setAttribute('role', 'dialog');
    this.list.setAttribute('aria-label', 'Pending approvals');
    this.list.addEventListener('keydown', event => {
      if (event.key === 'Escape') {
        this.setExpanded(false);
        this.toggle.focus();
      }
    });
    this.node.append(this.toggle, this.list);
    connection.changed.connect(this.render, this);
    this.render();
  }

  private setExpanded(value: boolean): void {
    this.expanded = value;
    this.render();
  }

  render(): void {
    const pending = this.connection.approvals.list();
    this.node.dataset.count = String(pending.length);
    this.toggle.textContent = `Approvals: ${pending.length}`;
    this.toggle.setAttribute('aria-label', `${pending.length} pending approvals`);
    this.toggle.setAttribute('aria-expanded', String(this.expanded));
    this.toggle.disabled = pending.length === 0 && !this.expanded;
    this.node.classList.toggle('jp-mod-pending', pending.length > 0);
    this.list.hidden = !this.expanded;
    this.list.replaceChildren();
    if (!this.expanded) {
      return;
    }
    if (pending.length === 0) {
      this.list.appendChild(h('p', 'jp-forkagent-empty', 'No pending approvals.'));
      return;
    }
    for (const a of pending) {
      const row = h('div', 'jp-forkagent-approval-row');
      row.dataset.requestId = a.request_id;
      const label = approvalLabel(a);
      row.appendChild(h('div', 'jp-forkagent-approval-tool', label));
      if (a.preview) {
        row.appendChild(h('pre', 'jp-forkagent-approval-preview', a.preview));
      }
      const buttons = row.appendChild(h('div', 'jp-forkagent-approval-buttons'));
      const answer = (d: 'allow' | 'always' | 'deny') => () => this.connection.approve(a.request_id, d);
      buttons.append(
        button('Allow once', `Allow once: ${label}`, answer('allow')),
        sessionButton(a.rule, label, answer('always')),
        button('Deny', `Deny: ${label}`, answer('deny')),
        button('Show', `Show the card of ${label}`, () => this.reveal(a.task_id, a.cell_id))
      );
      this.list.appendChild(row);
    }
  }
}

/** "Allow for session" names the exact rule it adds; without one it is disabled. */
export function sessionButton(rule: string | null, label: string, onClick: () => void): HTMLButtonElement {
  if (rule === null) {
    const b = button('Allow for session', `No rule can name exactly this call: allow it once (${label})`, () => undefined);
    b.disabled = true;
    return b;
  }
  return button(`Allow for session: ${rule}`, `Allow for session, adding the rule ${rule}: ${label}`, onClick);
}
