// The AI SDK's own client against our POST /chat: `AbstractChat` (what
// `useChat` wraps, here with a plain in-memory state instead of React's) over
// `DefaultChatTransport`, unconfigured but for the URL, the bearer token and
// the body extras. Run by tests/tests/ai_sdk.rs, which scripts the model and
// checks what this prints: one JSON object with the chat's id, its messages
// after the first answer and after `regenerate()`, the data parts `onData`
// saw, and any error the client raised (its reader throws on a broken stream).
// With CHAT_MODE=resume: a second client on the same chat id calls
// `resumeStream()` (what `useChat({resume: true})` does on load) while the
// first one's turn is running; it prints both clients' messages. Its first
// client's second turn posts the whole conversation, as an unconfigured
// transport does: the server must take it (it reads the last message).
//
//   CHAT_URL=http://…/lambda-url/stream/chat CHAT_TOKEN=… CHAT_BODY='{"context_type":…}' node chat-check.mjs
import { AbstractChat, DefaultChatTransport } from 'ai';

class State {
  status = 'ready';
  error = undefined;
  constructor(messages = []) {
    this.messages = messages;
  }
  pushMessage = m => { this.messages = this.messages.concat(m); };
  popMessage = () => { this.messages = this.messages.slice(0, -1); };
  replaceMessage = (i, m) => { this.messages = [...this.messages.slice(0, i), this.snapshot(m), ...this.messages.slice(i + 1)]; };
  snapshot = t => structuredClone(t);
}

class Chat extends AbstractChat {
  constructor(init) {
    super({ ...init, state: new State(init.messages) });
  }
}

const errors = [];
const data = [];
// Every request the transports made, with its status and time (for failures).
const t0 = Date.now();
const requests = [];
const fetch = async (url, init) => {
  const sent = Date.now() - t0;
  const response = await globalThis.fetch(url, init);
  // How many messages a POST carried: an unconfigured transport sends the whole conversation.
  const messages = init?.method === 'POST' ? JSON.parse(init.body).messages.length : undefined;
  requests.push({ method: init?.method, url: String(url), status: response.status, messages, sent, answered: Date.now() - t0 });
  return response;
};
const transport = () => new DefaultChatTransport({
  fetch,
  api: process.env.CHAT_URL,
  headers: { authorization: `Bearer ${process.env.CHAT_TOKEN}` },
  body: JSON.parse(process.env.CHAT_BODY || '{}'),
});
const chat = new Chat({
  transport: transport(),
  onError: e => errors.push(String(e)),
  onData: part => data.push(part.type),
});

if (process.env.CHAT_MODE === 'resume') {
  // A reload mid-turn: a second client on the same chat id, holding the
  // messages as history read back would give them, resumes the stream. The
  // chat's second turn: the session exists, so its lease (what the resume
  // route looks for) is taken before the model is called.
  await chat.sendMessage({ text: 'first' });
  const sending = chat.sendMessage({ text: process.env.CHAT_TEXT || 'hello' });
  // Mid-answer: once the first client shows some of the text.
  const shown = () => chat.messages[3]?.parts.some(p => p.type === 'text' && p.text.length > 0);
  while (!shown()) await new Promise(r => setTimeout(r, 10));
  const history = structuredClone(chat.messages.slice(0, 3));
  const reloaded = new Chat({ id: chat.id, messages: history, transport: transport(), onError: e => errors.push(String(e)) });
  const resuming = reloaded.resumeStream();
  await Promise.all([sending, resuming]);
  // The server reads only the last message but accepts the whole history:
  // the second turn's POST carried all three messages (docs/chat-protocol.md).
  const posts = requests.filter(r => r.method === 'POST').map(r => r.messages);
  if (posts.join() !== '1,3') errors.push(`expected POSTs of 1 and 3 messages (the whole history), got ${posts.join()}`);
  console.log(JSON.stringify({ chatId: chat.id, live: chat.messages, reloaded: reloaded.messages, status: reloaded.status, errors, requests }));
  process.exit(0);
}

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
  requests,
}));
