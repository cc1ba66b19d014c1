/** An operation (`data-operation`) as a person reads it: "Created document “Plan”". */
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
