/**
 * A session's stored messages (`GET /sessions/{id}/messages`) as the AI SDK's
 * UI messages, `useChat`'s initial messages: one user message each, and one
 * assistant message per turn (its text and its tool calls, in order), with
 * the turn's id: the shape, and the id, a live `POST /chat` turn builds.
 */
import type { MessageView } from './api/types.gen';
import type { ChatMessage } from './chat-types';

export function toUIMessages(views: MessageView[]): ChatMessage[] {
  const out: ChatMessage[] = [];
  for (const v of views) {
    if (v.role === 'user') {
      out.push({ id: v.id, role: 'user', parts: [{ type: 'text', text: v.content ?? '' }] });
      continue;
    }
    if (v.role !== 'assistant') continue; // tool results ride on their calls' previews
    let turn = out[out.length - 1];
    if (!turn || turn.role !== 'assistant') {
      // The turn's id, as POST /chat's messageId: a resumed replay of this
      // turn then replaces this message instead of adding a second copy.
      turn = { id: v.turn_id, role: 'assistant', parts: [] };
      out.push(turn);
    }
    if (v.content) turn.parts.push({ type: 'text', text: v.content, state: 'done' });
    for (const call of v.tool_calls ?? []) {
      const base = { type: 'dynamic-tool', toolName: call.name, toolCallId: call.id, input: parseArgs(call.arguments) } as const;
      turn.parts.push(
        call.result_preview == null
          ? { ...base, state: 'input-available' }
          : { ...base, state: 'output-available', output: call.result_preview },
      );
    }
    turn.metadata = { reason: v.status };
  }
  return out;
}

/** Tool arguments are JSON text as the model wrote it, possibly invalid: kept as text then. */
function parseArgs(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
