/**
 * An operation (`data-operation`) as a person reads it: "Created document
 * “Plan”", or the sentence the server sent with it (`summary`).
 */
import type { OperationAction } from './api/types.gen';
import type { OperationData } from './chat-types';

const VERBS: { [A in OperationAction]: [running: string, done: string, failed: string] } = {
  list: ['Listing', 'Listed', 'list'],
  search: ['Searching', 'Searched', 'search'],
  read: ['Reading', 'Read', 'read'],
  create: ['Creating', 'Created', 'create'],
  update: ['Updating', 'Updated', 'update'],
  delete: ['Deleting', 'Deleted', 'delete'],
};

export function describeOperation(op: OperationData): string {
  // The server's own sentence, where names alone do not say the step
  // ("Moved Design review to Tue 1 Dec 10:00"); a failure has none.
  if (op.summary && op.status === 'success') return op.summary;
  if (op.summary && op.status === 'start') return `${op.summary}…`;
  const [running, done, failed] = VERBS[op.action];
  const what = `${op.entity_type.replace(/_/g, ' ')} “${op.entity_name}”`;
  switch (op.status) {
    case 'start':
      return `${running} ${what}…`;
    case 'success':
      return `${done} ${what}`;
    case 'error':
      return `Could not ${failed} ${what}`;
  }
}

const key = (op: OperationData) => `${op.action}\u0000${op.entity_type}\u0000${op.entity_name}`;

/**
 * Each operation once: a `start` whose `success` or `error` came later (same
 * action and entity) gives way to it, so the feed reads as steps, not events.
 */
export function settled(ops: OperationData[]): OperationData[] {
  return ops.filter(
    (op, i) => op.status !== 'start' || !ops.slice(i + 1).some((o) => o.status !== 'start' && key(o) === key(op)),
  );
}
