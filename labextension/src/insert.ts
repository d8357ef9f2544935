/** Inserting a notification cell into a notebook model (the placement rule is in placement.ts). */
import { ICodeCellModel } from '@jupyterlab/cells';
import { NotebookPanel } from '@jupyterlab/notebook';
import type { IOutput } from '@jupyterlab/nbformat';

import { ICellSummary, hasKey, insertIndex } from './placement';
import { IInsertCell, notificationKey } from './protocol';

/**
 * Give the notification cell at `index` the source and outputs of `insert` (a digest), touching
 * only what changed: an output of the same type is updated in place (its renderer draws it
 * again), so a digest that grows costs one redraw of its table, not new cells or widgets.
 */
function replaceCell(panel: NotebookPanel, index: number, insert: IInsertCell): void {
  const cell = panel.content.model?.cells.get(index);
  if (!cell || cell.type !== 'code') {
    return;
  }
  const code = cell as ICodeCellModel;
  if (code.sharedModel.getSource() !== insert.cell.source) {
    code.sharedModel.setSource(insert.cell.source);
  }
  const mark = insert.cell.metadata.forkagent;
  if (JSON.stringify(code.getMetadata('forkagent')) !== JSON.stringify(mark)) {
    code.setMetadata('forkagent', mark);
  }
  const given = insert.cell.outputs as unknown as IOutput[];
  const outputs = code.outputs;
  for (let i = 0; i < given.length; i++) {
    if (i >= outputs.length) {
      outputs.add(given[i]);
    } else if (JSON.stringify(outputs.get(i).toJSON()) !== JSON.stringify(given[i])) {
      outputs.set(i, given[i]);
    }
  }
  while (outputs.length > given.length) {
    outputs.remove(outputs.length - 1);
  }
  code.trusted = true;
}

export function cellSummaries(panel: NotebookPanel): ICellSummary[] {
  const model = panel.content.model;
  if (!model) {
    return [];
  }
  const out: ICellSummary[] = [];
  for (let i = 0; i < model.cells.length; i++) {
    const cell = model.cells.get(i);
    out.push({ id: cell.id, metadata: cell.getMetadata('forkagent') === undefined ? {} : { forkagent: cell.getMetadata('forkagent') } });
  }
  return out;
}

/** Insert the cell unless one with the same key exists; returns the new cell's id. */
export function insertNotificationCell(panel: NotebookPanel, insert: IInsertCell): string | null {
  const model = panel.content.model;
  if (!model) {
    return null;
  }
  const cells = cellSummaries(panel);
  if (hasKey(cells, insert.key)) {
    if (insert.replace) {
      replaceCell(panel, cells.findIndex(c => notificationKey(c.metadata) === insert.key), insert);
    }
    return null;
  }
  const at = insertIndex(cells, insert.after_cell_id);
  const shared = model.sharedModel.insertCell(at, {
    cell_type: 'code',
    source: insert.cell.source,
    metadata: insert.cell.metadata,
    outputs: insert.cell.outputs as unknown as IOutput[]
  });
  const cell = model.cells.get(at);
  if (cell && cell.type === 'code') {
    const code = cell as ICodeCellModel;
    if (code.outputs.length === 0 && insert.cell.outputs.length > 0) {
      for (const output of insert.cell.outputs) {
        code.outputs.add(output as unknown as IOutput);
      }
    }
    // The kernel made these outputs, as it makes a cell's own; they are safe as trusted (the
    // notification renderer shows text, the answer is HTML the kernel rendered with raw HTML
    // escaped). An untrusted cell would leave the saved notebook unsigned, and after a reload
    // JupyterLab would show every widget of the notebook as plain text.
    code.trusted = true;
  }
  model.dirty = true;
  return shared.id;
}
