/**
 * The UI message type of this page: the AI SDK's `UIMessage` with our own
 * events as typed `data-*` parts. `POST /chat` sends each native event as
 * `data-<its type, with dashes>` carrying the event's JSON without `type`
 * (docs/web.md), so the part types follow from the generated `StreamEvent`.
 */
import type { UIMessage } from 'ai';
import type { StreamEvent } from './api/types.gen';

type Dashed<S extends string> = S extends `${infer A}_${infer B}` ? `${A}-${Dashed<B>}` : S;
type Payload<E> = E extends unknown ? Omit<E, 'type'> : never;

/** `data-operation` → the `operation` event's fields, and so on for every event. */
export type ChatData = { [E in StreamEvent as Dashed<E['type']>]: Payload<E> };

export type OperationData = ChatData['operation'];

/** How a stored assistant message ended, when not `complete` (from history). */
export type ChatMetadata = { status?: 'error' | 'stopped' };

export type ChatMessage = UIMessage<ChatMetadata, ChatData>;
