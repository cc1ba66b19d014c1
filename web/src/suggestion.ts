/**
 * A message suggestion (`POST <stream URL>/sessions/{id}/suggestion`,
 * docs/chat-protocol.md#message-suggestions): the next message the user could
 * send, drafted by the model and streamed as our native SSE events
 * (`text_delta`s, then `done`; `error` before `done` when it failed). Nothing
 * is stored: the page puts the text in the input, where the user edits it and
 * sends it as any message.
 */
import type { Api } from './api/client';
import type { StreamEvent, SuggestionRequest } from './api/types.gen';

/** The longest goal the server takes, in characters (`shared::suggest::GOAL_MAX_CHARS`). */
const GOAL_MAX_CHARS = 1000;

/**
 * The request for what the input holds: its words, when there are any, are
 * the goal of the draft ("a launch date" → a message asking for one).
 */
export function suggestionRequest(input: string): SuggestionRequest {
  const goal = Array.from(input.trim()).slice(0, GOAL_MAX_CHARS).join('');
  return goal ? { goal } : {};
}

/** A suggestion that ended with an `error` event. */
export class SuggestionFailed extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(`${code}: ${message}`);
  }
}

/**
 * Streams a suggestion for `sessionId`: `onText` gets the whole text so far
 * at each delta; resolves with the text at `done`. Throws the server's
 * refusal (`ApiError`: 404, 429 …), {@link SuggestionFailed} on an `error`
 * event, or the abort of `signal`.
 */
export async function suggest(
  api: Api,
  sessionId: string,
  request: SuggestionRequest,
  onText: (text: string) => void,
  signal?: AbortSignal,
): Promise<string> {
  const res = await api.suggestion(sessionId, request, signal);
  let text = '';
  let failed: SuggestionFailed | null = null;
  for await (const event of events(res)) {
    if (event.type === 'text_delta') {
      text += event.content;
      onText(text);
    } else if (event.type === 'error') {
      failed = new SuggestionFailed(event.code, event.message);
    } else if (event.type === 'done') {
      if (failed) throw failed;
      return text;
    }
  }
  throw failed ?? new SuggestionFailed('stream_interrupted', 'the suggestion ended before its end');
}

/** The events of an SSE body: each frame's `data` lines, parsed. */
async function* events(res: Response): AsyncGenerator<StreamEvent> {
  if (!res.body) return;
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value.replace(/\r\n?/g, '\n');
    let end: number;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = frame
        .split('\n')
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).replace(/^ /, ''))
        .join('\n');
      if (data) yield JSON.parse(data) as StreamEvent;
    }
  }
}
