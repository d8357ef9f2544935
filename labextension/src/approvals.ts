/** The pending approvals of one kernel, kept in arrival order (pure). */
import { IApproval } from './protocol';

export class ApprovalList {
  private items = new Map<string, IApproval>();

  reset(approvals: readonly IApproval[]): void {
    this.items = new Map(approvals.map(a => [a.request_id, a]));
  }

  add(approval: IApproval): void {
    this.items.set(approval.request_id, approval);
  }

  remove(requestId: string): boolean {
    return this.items.delete(requestId);
  }

  get size(): number {
    return this.items.size;
  }

  list(): IApproval[] {
    return [...this.items.values()];
  }
}
