// The AI SDK's own client against our POST /chat: `AbstractChat` (what
// `useChat` wraps, here with a plain in-memory state instead of React's) over
// `DefaultChatTransport`, unconfigured but for the URL, the bearer token and
// the body extras. Run by tests/tests/ai_sdk.rs, which scripts the model and
// checks what this prints: one JSON object with the chat's id, its messages
// after the first answer and after `regenerate()`, the data parts `onData`
// saw, and any error the client raised (its reader throws on a broken stream).
//
//   CHAT_URL=http://…/lambda-url/stream/chat CHAT_TOKEN=… CHAT_BODY='{"context_type":…}' node chat-check.mjs
import { AbstractChat, DefaultChatTransport } from 'ai';

class State {
  status = 'ready';
  error = undefined;
  messages = [];
  pushMessage = m => { this.messages = this.messages.concat(m); };
  popMessage = () => { this.messages = this.messages.slice(0, -1); };
  replaceMessage = (i, m) => { this.messages = [...this.messages.slice(0, i), this.snapshot(m), ...this.messages.slice(i + 1)]; };
  snapshot = t => structuredClone(t);
}

class Chat extends AbstractChat {
  constructor(init) {
    super({ ...init, state: new State() });
  }
}

const errors = [];
const data = [];
const chat = new Chat({
  transport: new DefaultChatTransport({
    api: process.env.CHAT_URL,
    headers: { authorization: `Bearer ${process.env.CHAT_TOKEN}` },
    body: JSON.parse(process.env.CHAT_BODY || '{}'),
  }),
  onError: e => errors.push(String(e)),
  onData: part => data.push(part.type),
});

await chat.sendMessage({ text: process.env.CHAT_TEXT || 'hello' });
const afterFirst = structuredClone(chat.messages);
const statusAfterFirst = chat.status;
await chat.regenerate();
console.log(JSON.stringify({
  chatId: chat.id,
  afterFirst,
  statusAfterFirst,
  afterRegenerate: chat.messages,
  status: chat.status,
  data,
  errors,
}));
