/**
 * Shapes of the `forkagent` comm protocol (version 2), and tolerant parsers: a field the
 * kernel does not send (older kernels) gets a neutral default instead of breaking the UI.
 *
 * Each interface mirrors a type of `forkagent_jupyter/kernel/comm/protocol.py` key for key
 * (`tests/kernel/test_protocol.py` compares them), and `test/protocol-messages.json` holds an
 * example of every message in both directions: the kernel's tests validate them against its
 * types, `test/protocol-messages.test.ts` parses them here and gets them back unchanged.
 */

export const COMM_TARGET = 'forkagent';
export const PROTOCOL_VERSION = 2;
export const NOTIFICATION_MIME = 'application/vnd.forkagent.notification+json';
/** One output for the notifications of a large fan-out: an `IDigest`. */
export const DIGEST_MIME = 'application/vnd.forkagent.digest+json';

export type JSONValue = null | boolean | number | string | JSONValue[] | { [key: string]: JSONValue };
export type JSONObject = { [key: string]: JSONValue };

export type TaskStatus = 'running' | 'completed' | 'failed' | 'killed' | string;

/**
 * Token counts in the Messages API's own words (the kernel's `usage_counts`): `input_tokens`
 * is the uncached part of the prompt only; `total_input_tokens` is the whole prompt.
 */
export interface ITokenUsage {
  input_tokens: number;
  cache_creation_input_tokens: number;
  cache_read_input_tokens: number;
  output_tokens: number;
  total_input_tokens: number;
}

export interface ITaskRow {
  id: string;
  name: string | null;
  kind: string;
  status: TaskStatus;
  description: string;
  elapsed: number;
  usage: ITokenUsage;
  cost_usd: number;
  cell_id: string | null;
  current_tool: string | null;
  /** The current call in one line, as the tool describes it. */
  current_input: string;
  started_at: number;
  pending_approvals: number;
  /** The prompt size of its last request (what it holds in context). */
  context_tokens: number;
  /** Its model's context window (0: unknown). */
  context_window: number;
  compactions: number;
  /** "waiting for rate limit (N s)" while its request waits for room ('' otherwise). */
  waiting: string;
  /** Its todo list (TodoWrite): items completed, and all items (0: no list). */
  todos_done: number;
  todos_total: number;
  /** The team it is a teammate of (the panel groups a team's rows); null: in no team. */
  team: string | null;
}

export interface IApproval {
  request_id: string;
  task_id: string | null;
  tool: string;
  preview: string;
  cell_id: string | null;
  /** The rule "Allow for session" adds (exactly this call); null: only "Allow once". */
  rule: string | null;
}

export interface ICellSpec {
  cell_type: 'code';
  source: string;
  metadata: JSONObject;
  outputs: JSONObject[];
}

/** `metadata.forkagent` of a notification cell: what tells it apart. */
export interface ICellMark {
  kind: string;
  key: string;
  task_ids: string[];
  /** A fan-out's digest (one cell whose outputs are replaced as its tasks end). */
  digest?: boolean;
}

export interface IInsertCell {
  key: string;
  after_cell_id: string | null;
  task_ids: string[];
  cell: ICellSpec;
  /** A cell with this key already there takes this cell's source and outputs (a digest
   * that grows as its fan-out's tasks end); otherwise it is left as it is. */
  replace: boolean;
}

/**
 * An ended task as a notification shows it (the payload of `NOTIFICATION_MIME`, and a row of
 * a digest): the kernel's `TaskSnapshot`, the one shape of an ended task on its way out.
 */
export interface ITaskSnapshot {
  task_id: string;
  name: string | null;
  kind: string;
  status: string;
  description: string;
  summary: string;
  /** Its result, or the error it failed with. */
  result: string;
  /** The `<task-notification>` text the parent model read ('' in a digest row). */
  notification: string;
  usage: ITokenUsage;
  cost_usd: number;
  elapsed: number;
  tool_uses: number;
  /** Of its `tool_uses`, those whose result was an error (code that raised, a denial). */
  tool_errors: number;
}

/** The payload of `DIGEST_MIME`: a row per task, each result clipped by the kernel. */
export interface IDigest {
  tasks: ITaskSnapshot[];
}

/** What a person answers to an approval (`ApprovalAnswer` in protocol.py); the kernel
 * approves only 'allow' and 'always' and turns it into its Decision (Allow or Deny). */
export type ApprovalAnswer = 'allow' | 'always' | 'deny';

/** Frontend to kernel: the data of the comm_open. */
export interface IHello {
  type: 'hello';
  client?: string;
  version?: number;
}

/** Frontend to kernel: the answer to a pending approval. */
export interface IApprove {
  type: 'approve';
  request_id: string;
  decision: ApprovalAnswer;
  reason?: string | null;
}

/** Frontend to kernel: the Tasks panel's stop button. */
export interface IStop {
  type: 'stop';
  task_id: string;
}

/** What the kernel accepts on the comm (anything else it drops, with a line in its log). */
export type FrontendMessage = IApprove | IStop;

export function helloMessage(): IHello {
  return { type: 'hello', client: 'jupyterlab', version: PROTOCOL_VERSION };
}

export function approveMessage(requestId: string, decision: ApprovalAnswer): IApprove {
  return { type: 'approve', request_id: requestId, decision };
}

export function stopMessage(taskId: string): IStop {
  return { type: 'stop', task_id: taskId };
}

/** What a connecting frontend is told at once. */
export interface IState {
  tasks: ITaskRow[];
  approvals: IApproval[];
  budget: IBudget | null;
}

/** Kernel to frontend, on every open of the comm. */
export interface IWelcome extends IState {
  type: 'welcome';
  version: number;
}

/** Kernel to frontend: the whole task table (at most twice a second, when it changed). */
export interface ITasksMessage {
  type: 'tasks';
  tasks: ITaskRow[];
  budget: IBudget | null;
}

/** Kernel to frontend: a call waits for approval. */
export interface IApprovalMessage extends IApproval {
  type: 'approval';
}

/** Kernel to frontend: the approval `request_id` was answered (here or elsewhere). */
export interface IApprovalDone {
  type: 'approval_done';
  request_id: string;
}

/** Kernel to frontend: a notification cell to insert (or, a digest, to replace). */
export interface IInsertCellMessage extends IInsertCell {
  type: 'insert_cell';
}

export type KernelMessage = IWelcome | ITasksMessage | IApprovalMessage | IApprovalDone | IInsertCellMessage;
export const KERNEL_MESSAGE_TYPES: readonly KernelMessage['type'][] = [
  'welcome',
  'tasks',
  'approval',
  'approval_done',
  'insert_cell'
];

export function isObject(value: unknown): value is JSONObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function str(value: unknown, fallback = ''): string {
  return typeof value === 'string' ? value : fallback;
}

function strOrNull(value: unknown): string | null {
  return typeof value === 'string' && value !== '' ? value : null;
}

function num(value: unknown): number {
  return typeof value === 'number' && Number.isFinite(value) ? value : 0;
}

function strings(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : [];
}

/** A `usage` object; the total is the sum of the three input counts when not sent. */
export function parseUsage(value: unknown): ITokenUsage {
  const u = isObject(value) ? value : {};
  const input = num(u.input_tokens);
  const created = num(u.cache_creation_input_tokens);
  const read = num(u.cache_read_input_tokens);
  return {
    input_tokens: input,
    cache_creation_input_tokens: created,
    cache_read_input_tokens: read,
    output_tokens: num(u.output_tokens),
    total_input_tokens: typeof u.total_input_tokens === 'number' ? num(u.total_input_tokens) : input + created + read
  };
}

export function parseTaskRow(value: unknown): ITaskRow | null {
  if (!isObject(value) || typeof value.id !== 'string' || value.id === '') {
    return null;
  }
  return {
    id: value.id,
    name: strOrNull(value.name),
    kind: str(value.kind, 'fork'),
    status: str(value.status, 'running'),
    description: str(value.description),
    elapsed: num(value.elapsed),
    usage: parseUsage(value.usage),
    cost_usd: num(value.cost_usd),
    cell_id: strOrNull(value.cell_id),
    current_tool: strOrNull(value.current_tool),
    current_input: str(value.current_input),
    started_at: num(value.started_at),
    pending_approvals: num(value.pending_approvals),
    context_tokens: num(value.context_tokens),
    context_window: num(value.context_window),
    compactions: num(value.compactions),
    waiting: str(value.waiting),
    todos_done: num(value.todos_done),
    todos_total: num(value.todos_total),
    team: strOrNull(value.team)
  };
}

/** The items of a list that parse; anything else in the list (or no list) is dropped. */
function parseList<T>(value: unknown, parse: (item: unknown) => T | null): T[] {
  if (!Array.isArray(value)) {
    return [];
  }
  return value.map(parse).filter((item): item is T => item !== null);
}

export function parseTasks(value: unknown): ITaskRow[] {
  return parseList(value, parseTaskRow);
}

/** The session's spend against its cost budget (`max_cost_usd`); null when it has none. */
export interface IBudget {
  spent_usd: number;
  limit_usd: number;
  reached: boolean;
}

export function parseBudget(value: unknown): IBudget | null {
  if (!isObject(value) || typeof value.limit_usd !== 'number') {
    return null;
  }
  return { spent_usd: num(value.spent_usd), limit_usd: num(value.limit_usd), reached: value.reached === true };
}

export function parseApproval(value: unknown): IApproval | null {
  if (!isObject(value)) {
    return null;
  }
  const id = value.request_id;
  const requestId = typeof id === 'number' ? String(id) : str(id);
  if (requestId === '') {
    return null;
  }
  return {
    request_id: requestId,
    task_id: strOrNull(value.task_id),
    tool: str(value.tool, 'tool'),
    preview: str(value.preview),
    cell_id: strOrNull(value.cell_id),
    rule: strOrNull(value.rule)
  };
}

export function parseApprovals(value: unknown): IApproval[] {
  return parseList(value, parseApproval);
}

export function parseTaskSnapshot(value: unknown): ITaskSnapshot {
  const v = isObject(value) ? value : {};
  return {
    task_id: str(v.task_id),
    name: strOrNull(v.name),
    kind: str(v.kind) || 'fork',
    status: str(v.status) || 'completed',
    description: str(v.description),
    summary: str(v.summary),
    result: str(v.result),
    notification: str(v.notification),
    usage: parseUsage(v.usage),
    cost_usd: num(v.cost_usd),
    elapsed: num(v.elapsed),
    tool_uses: num(v.tool_uses),
    tool_errors: num(v.tool_errors)
  };
}

export function parseDigest(value: unknown): IDigest {
  const v = isObject(value) ? value : {};
  return { tasks: Array.isArray(v.tasks) ? v.tasks.map(parseTaskSnapshot) : [] };
}

/** A message from the kernel as its type; null for anything else (dropped). */
export function parseKernelMessage(data: unknown): KernelMessage | null {
  if (!isObject(data)) {
    return null;
  }
  switch (data.type) {
    case 'welcome':
      return {
        type: 'welcome',
        version: typeof data.version === 'number' ? data.version : 1,
        tasks: parseTasks(data.tasks),
        approvals: parseApprovals(data.approvals),
        budget: parseBudget(data.budget)
      };
    case 'tasks':
      return { type: 'tasks', tasks: parseTasks(data.tasks), budget: parseBudget(data.budget) };
    case 'approval': {
      const approval = parseApproval(data);
      return approval ? { type: 'approval', ...approval } : null;
    }
    case 'approval_done': {
      const id = data.request_id;
      const requestId = typeof id === 'number' ? String(id) : str(id);
      return requestId ? { type: 'approval_done', request_id: requestId } : null;
    }
    case 'insert_cell': {
      const insert = parseInsertCell(data);
      return insert ? { type: 'insert_cell', ...insert } : null;
    }
    default:
      return null;
  }
}

/** The idempotence key of an insert: given by the kernel, else derived from the task ids. */
export function insertKey(taskIds: string[], given: unknown): string {
  const key = str(given);
  return key !== '' ? key : `tasks:${taskIds.join(',')}`;
}

/**
 * An `insert_cell` message as a cell to insert. Version 2 sends a prebuilt `cell`; version 1
 * kernels sent `notifications` (XML strings) and `answer`, turned here into the same shape.
 */
export function parseInsertCell(value: unknown): IInsertCell | null {
  if (!isObject(value)) {
    return null;
  }
  const taskIds = strings(value.task_ids);
  const key = insertKey(taskIds, value.key);
  const afterCellId = strOrNull(value.after_cell_id);
  const cell = value.cell;
  if (isObject(cell)) {
    const metadata = isObject(cell.metadata) ? { ...cell.metadata } : {};
    const mark = isObject(metadata.forkagent) ? { ...metadata.forkagent } : {};
    metadata.forkagent = { kind: 'notification', task_ids: taskIds, ...mark, key };
    const outputs = Array.isArray(cell.outputs) ? cell.outputs.filter(isObject) : [];
    return {
      key,
      after_cell_id: afterCellId,
      task_ids: taskIds,
      cell: { cell_type: 'code', source: str(cell.source), metadata, outputs },
      replace: value.replace === true
    };
  }
  const outputs: JSONObject[] = strings(value.notifications).map(note => ({
    output_type: 'display_data',
    data: { 'text/plain': note },
    metadata: {}
  }));
  const answer = str(value.answer);
  if (answer !== '') {
    outputs.push({ output_type: 'display_data', data: { 'text/markdown': answer }, metadata: {} });
  }
  if (taskIds.length === 0 && outputs.length === 0) {
    return null;
  }
  return {
    key,
    after_cell_id: afterCellId,
    task_ids: taskIds,
    cell: {
      cell_type: 'code',
      source: `%notifications ${taskIds.join(' ')}`.trim(),
      metadata: { forkagent: { kind: 'notification', key, task_ids: taskIds } },
      outputs
    },
    replace: false
  };
}

/** The `forkagent` mark of a cell's metadata, if any. */
export function cellMark(metadata: unknown): ICellMark | null {
  const mark = isObject(metadata) ? metadata.forkagent : null;
  if (!isObject(mark)) {
    return null;
  }
  const parsed: ICellMark = { kind: str(mark.kind), key: str(mark.key), task_ids: strings(mark.task_ids) };
  if (mark.digest === true) {
    parsed.digest = true;
  }
  return parsed;
}

export function isNotificationCell(metadata: unknown): boolean {
  return cellMark(metadata)?.kind === 'notification';
}

export function notificationKey(metadata: unknown): string | null {
  return cellMark(metadata)?.key || null;
}
