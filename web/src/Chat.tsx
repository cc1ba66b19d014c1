/**
 * One session's conversation: `useChat` over the AI SDK's own
 * `DefaultChatTransport` against `POST <stream URL>/chat`, resuming a running
 * turn on mount (`GET <stream URL>/chat/{id}/stream`). Our events arrive as
 * `data-*` parts: operations stay in the message, entity patches go to the
 * ontology panel, calendar patches to the agenda, a context shift (the turn
 * made a project and moved into it) to the page, the agent state
 * (transient) to the status line. A turn's start (or its resume) that gets
 * no answer in time, or a network error, shows the error with a Retry
 * button: never by itself, as resending a message could post it twice.
 * Suggest streams a draft of the user's next message into the input
 * (`POST <stream URL>/sessions/{id}/suggestion`, nothing stored; words
 * already in the input are its goal), where the user edits it — typing
 * takes over from the stream — and sends it as usual.
 */
import { useChat } from '@ai-sdk/react';
import { DefaultChatTransport, lastAssistantMessageIsCompleteWithApprovalResponses, type PrepareSendMessagesRequest } from 'ai';
import { useEffect, useLayoutEffect, useMemo, useRef, useState } from 'react';
import { createPortal } from 'react-dom';
import { fetchAnswered, type Api } from './api/client';
import type { CalendarPatch, ContextType, EntityPatch } from './api/types.gen';
import type { ChatData, ChatMessage } from './chat-types';
import { join, type AppConfig } from './config';
import { Message } from './Message';
import { OperationsFeed } from './OntologyPanel';
import { settled } from './operations';
import { suggest, suggestionRequest } from './suggestion';

/**
 * What a turn names as its scope (`context_type`): a project turn (with the
 * project in `projectFocus`), or a calendar one (the calendar's tools and
 * the next seven days in its context), or a daily brief.
 */
export type ChatScope = Extract<ContextType, 'project' | 'calendar' | 'daily_brief_update'>;

interface Props {
  api: Api;
  config: AppConfig;
  sessionId: string;
  initial: ChatMessage[];
  /** The project the turn works in (its tools), when there is one. */
  projectId?: string;
  /** The scope each turn names (`project` when it has a project). */
  scope: ChatScope;
  /** The IANA zone each turn names: the user's chosen one, else the browser's. */
  zone: string;
  /** The input's prompt, in the chat's scope's words. */
  placeholder: string;
  onPatch: (p: EntityPatch) => void;
  /** The turn moved the conversation (into the project it created). */
  onContextShift: (s: ChatData['context-shift']) => void;
  /** A turn's calendar patch (`data-calendar-patch`): the agenda lists its days again. */
  onCalendarPatch: (p: CalendarPatch) => void;
  /** The panel's operations list: the feed is drawn into it. */
  feed: HTMLElement | null;
  onTurnEnd: () => void;
}

/**
 * The body of `POST /chat`: `useChat`'s own fields and the scope, but of the
 * conversation only its last message, the one the server reads (it keeps the
 * history itself; docs/chat-protocol.md). Sending the whole conversation on
 * every turn would grow each request with it, past what a function URL
 * accepts (6 MB) in a long chat.
 */
export const lastMessageOnly: PrepareSendMessagesRequest<ChatMessage> = ({ id, messages, body, trigger, messageId }) => ({
  body: { ...body, id, messages: messages.slice(-1), trigger, messageId },
});

/** The text of a user message (what a retry sends again). */
function textOf(m: ChatMessage): string {
  return m.parts.map((p) => (p.type === 'text' ? p.text : '')).join('');
}

export function Chat(props: Props) {
  const { api, config, sessionId, initial, projectId, scope, zone, placeholder, onPatch, onCalendarPatch, feed, onTurnEnd } = props;
  const [agentState, setAgentState] = useState<string | null>(null);
  const [input, setInput] = useState('');
  // useChat keeps the transport it was first given, so the scope is read
  // when each request is made, not when the transport is.
  const project = useRef(projectId);
  project.current = projectId;
  const turnScope = useRef(scope);
  turnScope.current = scope;
  const turnZone = useRef(zone);
  turnZone.current = zone;
  const shifted = useRef(props.onContextShift);
  shifted.current = props.onContextShift;
  const transport = useMemo(
    () =>
      new DefaultChatTransport<ChatMessage>({
        api: join(config.streamUrl, 'chat'),
        headers: api.authHeaders,
        // Besides useChat's own body ({id, messages, trigger, messageId}): the
        // turn's scope, as in a native turn request (TurnRequest): a project
        // turn names its project in `projectFocus`; and the user's zone
        // (IANA), in which the calendar tools read and write local times.
        body: () => {
          const timezone = turnZone.current;
          if (turnScope.current !== 'project') return { context_type: turnScope.current, timezone };
          return project.current
            ? { context_type: 'project', projectFocus: { projectId: project.current }, timezone }
            : { timezone };
        },
        prepareSendMessagesRequest: lastMessageOnly,
        // A start (or resume) unanswered in time is an error the user sees
        // and can retry, not an endless wait; a streaming body is not timed.
        fetch: (input, init) => fetchAnswered(input, init, api.timeoutMs),
      }),
    [api, config.streamUrl],
  );
  const { messages, setMessages, sendMessage, resumeStream, status, stop, error, addToolApprovalResponse } = useChat<ChatMessage>({
    id: sessionId,
    messages: initial,
    transport,
    resume: true,
    // An answered approval is sent at once: the server runs the approved
    // calls (with the arguments it stored) and the answer goes on.
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
    onData: (part) => {
      if (part.type === 'data-entity-patch') onPatch(part.data.patch);
      if (part.type === 'data-calendar-patch') onCalendarPatch(part.data.patch);
      if (part.type === 'data-agent-state') setAgentState(part.data.state);
      if (part.type === 'data-context-shift') shifted.current(part.data);
    },
    onFinish: () => {
      setAgentState(null);
      onTurnEnd();
    },
  });

  // The conversation's operations (stored turns' rebuilt from their tool
  // calls, live ones as they arrive), drawn into the panel in this render.
  const operations = useMemo(
    () => settled(messages.flatMap((m) => m.parts.flatMap((p) => (p.type === 'data-operation' ? [p.data] : [])))),
    [messages],
  );

  // The pane follows the conversation to its end (a streaming answer too)
  // while it is scrolled to the bottom; scrolled up, it stays where the user
  // put it until they scroll back down or send.
  const pane = useRef<HTMLDivElement>(null);
  const follow = useRef(true);
  const onScroll = () => {
    const el = pane.current;
    if (el) follow.current = el.scrollHeight - el.scrollTop - el.clientHeight < 24;
  };
  useLayoutEffect(() => {
    const el = pane.current;
    if (el && follow.current) el.scrollTop = el.scrollHeight;
  }, [messages, status]);

  // A spent budget (HTTP 429, or `quota_exceeded` mid-turn): say when the
  // user can go on, from GET /me/usage (docs/budgets.md).
  const [blockedUntil, setBlockedUntil] = useState<number | null>(null);
  useEffect(() => {
    if (!error || !/quota_exceeded|budget/.test(error.message)) return setBlockedUntil(null);
    let live = true;
    api
      .usage()
      .then((u) => live && setBlockedUntil(u.blocked_until_ms ?? null))
      .catch(() => undefined);
    return () => {
      live = false;
    };
  }, [api, error]);

  const busy = status === 'submitted' || status === 'streaming';

  // A suggestion streaming into the input; typing, sending or leaving the
  // chat ends it (the text so far stays in the input).
  const suggestion = useRef<AbortController | null>(null);
  const [suggesting, setSuggesting] = useState(false);
  const [suggestError, setSuggestError] = useState<string | null>(null);
  const endSuggestion = () => {
    suggestion.current?.abort();
    suggestion.current = null;
    setSuggesting(false);
  };
  useEffect(() => () => suggestion.current?.abort(), []);
  const onSuggest = async () => {
    endSuggestion();
    const abort = new AbortController();
    suggestion.current = abort;
    setSuggesting(true);
    setSuggestError(null);
    const request = suggestionRequest(input);
    setInput('');
    try {
      await suggest(api, sessionId, request, (text) => abort.signal.aborted || setInput(text), abort.signal);
    } catch (e) {
      if (!abort.signal.aborted) setSuggestError(e instanceof Error ? e.message : String(e));
    } finally {
      if (suggestion.current === abort) {
        suggestion.current = null;
        setSuggesting(false);
      }
    }
  };
  // Retry after a failed start: the unanswered message is sent again (taken
  // out first, so it shows once); after a failed resume or a broken stream,
  // the turn (which the server goes on with) is read again.
  const retry = () => {
    const last = messages[messages.length - 1];
    if (last?.role === 'user') {
      setMessages(messages.slice(0, -1));
      follow.current = true;
      void sendMessage({ text: textOf(last) });
    } else {
      void resumeStream();
    }
  };
  // The agent state says what precedes the answer; once its text streams, that is what happens.
  const last = messages[messages.length - 1];
  const writing = status === 'streaming' && last?.role === 'assistant' && last.parts.some((p) => p.type === 'text');
  const activity = writing && agentState !== 'executing' ? 'writing' : (agentState ?? 'working');
  const onStop = async () => {
    // The stop route ends the turn on the server (which keeps its partial
    // answer); stop() ends this page's read of the stream.
    await api.stop(sessionId).catch(() => undefined);
    stop();
  };

  return (
    <section className="chat">
      <div
        className="messages"
        data-testid="messages"
        ref={pane}
        onScroll={onScroll}
        // Scrolling up lets go at once, before the scroll itself lands.
        onWheel={(e) => e.deltaY < 0 && (follow.current = false)}
      >
        {messages.map((m) => (
          <Message
            key={m.id}
            message={m}
            onApproval={(id, approved) =>
              addToolApprovalResponse({ id, approved, reason: approved ? undefined : 'the user said no' })
            }
          />
        ))}
      </div>
      <p className="status" data-testid="status" data-status={status}>
        {busy ? activity.replace(/_/g, ' ') + '…' : ''}
        {error && (
          <span className="error" data-testid="turn-error">
            {error.message}{' '}
            <button type="button" data-testid="retry-turn" onClick={retry}>
              Retry
            </button>
          </span>
        )}
        {suggestError && (
          <span className="error" data-testid="suggest-error">
            Could not suggest a message: {suggestError}
          </span>
        )}
        {error && blockedUntil && (
          <span className="error" data-testid="blocked-until">
            {' '}
            You can go on at {new Date(blockedUntil).toLocaleTimeString()}.
          </span>
        )}
      </p>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          if (!input.trim() || busy) return;
          endSuggestion();
          follow.current = true;
          sendMessage({ text: input });
          setInput('');
        }}
      >
        <input
          data-testid="input"
          value={input}
          onChange={(e) => {
            endSuggestion();
            setInput(e.target.value);
          }}
          placeholder={placeholder}
          autoFocus
        />
        <button
          type="button"
          data-testid="suggest"
          data-suggesting={suggesting}
          title="Draft my next message"
          // A chat with nothing in it yet has no session to draft from.
          disabled={busy || suggesting || messages.length === 0}
          onClick={() => void onSuggest()}
        >
          {suggesting ? 'Suggesting…' : 'Suggest'}
        </button>
        {busy ? (
          <button type="button" data-testid="stop" onClick={onStop}>
            Stop
          </button>
        ) : (
          <button type="submit" data-testid="send" disabled={!input.trim()}>
            Send
          </button>
        )}
      </form>
      {feed && createPortal(<OperationsFeed operations={operations} />, feed)}
    </section>
  );
}
