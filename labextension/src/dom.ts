/** Small DOM helpers: elements with text (never HTML) and accessible buttons. */
export function h(tag: string, cls: string, text?: string): HTMLElement {
  const node = document.createElement(tag);
  if (cls) {
    node.className = cls;
  }
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

export function button(text: string, label: string, onClick: () => void, cls = ''): HTMLButtonElement {
  const b = document.createElement('button');
  b.type = 'button';
  b.className = `jp-forkagent-button ${cls}`.trim();
  b.textContent = text;
  b.setAttribute('aria-label', label);
  b.title = label;
  b.addEventListener('click', event => {
    event.stopPropagation();
    onClick();
  });
  return b;
}

/** Scroll the notebook to a task card (class `forkagent-task-<id>`); false if none is shown. */
export function revealTask(root: HTMLElement, taskId: string): boolean {
  const card = root.querySelector<HTMLElement>(`.forkagent-task-${CSS.escape(taskId)}`);
  if (!card) {
    return false;
  }
  card.scrollIntoView({ block: 'center' });
  card.classList.add('jp-forkagent-flash');
  window.setTimeout(() => card.classList.remove('jp-forkagent-flash'), 1200);
  return true;
}

/**
 * Make `nodes` the children of `parent`, in order, moving only the nodes out of place (a node
 * from elsewhere is moved in) and removing the rest: a list whose rows mostly stay put costs
 * the rows that moved, not a rebuild.
 */
export function placeChildren(parent: HTMLElement, nodes: readonly Node[]): void {
  let at: ChildNode | null = parent.firstChild;
  for (const node of nodes) {
    if (node === at) {
      at = at.nextSibling;
    } else {
      parent.insertBefore(node, at);
    }
  }
  while (at) {
    const next: ChildNode | null = at.nextSibling;
    at.remove();
    at = next;
  }
}
