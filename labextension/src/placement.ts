/**
 * Where a notification cell goes. Pure: works on a list of cell summaries, so the rule is
 * the same after a page reload (it does not depend on what this page inserted before).
 */
import { isNotificationCell, notificationKey } from './protocol';

export interface ICellSummary {
  id: string;
  metadata: unknown;
}

/** True if a cell already carries this notification key (another tab or comm inserted it). */
export function hasKey(cells: readonly ICellSummary[], key: string): boolean {
  return cells.some(c => notificationKey(c.metadata) === key);
}

/**
 * The index a new notification cell takes: below the anchor cell and below the notification
 * cells already inserted under it (so several arrivals keep their order); at the end when the
 * anchor is null or gone.
 */
export function insertIndex(cells: readonly ICellSummary[], afterCellId: string | null): number {
  const anchor = afterCellId === null ? -1 : cells.findIndex(c => c.id === afterCellId);
  if (anchor < 0) {
    return cells.length;
  }
  let index = anchor + 1;
  while (index < cells.length && isNotificationCell(cells[index].metadata)) {
    index++;
  }
  return index;
}
