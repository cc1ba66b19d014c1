/**
 * The UI message type of this page: the AI SDK's `UIMessage` with our own
 * events as typed `data-*` parts (the `data-<name>` parts `POST /chat` sends;
 * docs/web.md), their payloads taken from the generated wire types.
 */
import type { UIMessage } from 'ai';
import type { ContextUsage, EntityPatch, SessionView, StreamEvent } from './api/types.gen';

type EventOf<T extends StreamEvent['type']> = Omit<Extract<StreamEvent, { type: T }>, 'type'>;

export type OperationData = EventOf<'operation'>;
export type AgentStateData = EventOf<'agent_state'>;

export type ChatData = {
  operation: OperationData;
  'entity-patch': EntityPatch;
  session: SessionView;
  'context-usage': ContextUsage;
  'agent-state': AgentStateData;
};

/** How a stored assistant message ended, when not `complete` (from history). */
export type ChatMetadata = { status?: 'error' | 'stopped' };

export type ChatMessage = UIMessage<ChatMetadata, ChatData>;
