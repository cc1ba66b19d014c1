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

/**
 * An assistant message's metadata: what the stream's `finish` part carries
 * (the `done` event: `reason`, `usage`, …), or, for a stored answer, its
 * `reason` from the history's `status`; so a stopped answer reads the same
 * whether it came live, replayed or from history.
 */
export type ChatMetadata = Partial<ChatData['done']>;

export type ChatMessage = UIMessage<ChatMetadata, ChatData>;
