/** Inserting a notification cell into a notebook model (the placement rule is in placement.ts). */
import { ICodeCellModel } from '@jupyterlab/cells';
import { NotebookPanel } from '@jupyterlab/notebook';
import type { IOutput } from '@jupyterlab/nbformat';

import { ICellSummary, hasKey, insertIndex } from './placement';
import { IInsertCell } from './protocol';

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
