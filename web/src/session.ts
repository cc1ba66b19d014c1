/**
 * The open session: its id in the address (`#/s/<id>`, so a reload comes
 * back to it), and what the chat needs to show it: a chat this tab just made
 * (no history to read) or a stored one (its history and focus, read with
 * retries: `src/Retry.tsx`), with the scope its turns name.
 */
import { generateId } from 'ai';
import { useEffect, useState } from 'react';
import type { Api } from './api/client';
import type { ContextType, SessionView } from './api/types.gen';
import type { ChatScope } from './Chat';
import type { ChatMessage } from './chat-types';
import { toUIMessages } from './history';
import { useRetrying, type Retrying } from './Retry';

function hashSession(): string | null {
  const m = /^#\/s\/([A-Za-z0-9._:|@-]{1,64})$/.exec(window.location.hash);
  return m ? m[1] : null;
}

export function useHashSession(): string | null {
  const [id, setId] = useState(hashSession);
  useEffect(() => {
    const on = () => setId(hashSession());
    window.addEventListener('hashchange', on);
    return () => window.removeEventListener('hashchange', on);
  }, []);
  return id;
}

/**
 * Chat ids this tab made and has not sent anything under yet, with the scope
 * their first turn names: they have no stored history to ask for (asking
 * would only log a 404 in the console).
 */
const fresh = new Map<string, ChatScope>();

/** A new chat: an id like `useChat`'s own, which the server takes as the session's key. */
export function openSession(scope: ChatScope = 'project', id: string = generateId()) {
  fresh.set(id, scope);
  window.location.hash = `#/s/${id}`;
}

/**
 * The scope a stored session's turns keep: a calendar session (or a daily
 * brief) stays one; any other is turned toward its project, as before.
 */
function sessionScope(session: SessionView | null): ChatScope {
  const t: ContextType | undefined = session?.context_type;
  return t === 'calendar' || t === 'daily_brief_update' ? t : 'project';
}

/** The project a session works in, from its focus (`projectFocus`: `projectId`), if it names one. */
export function focusProject(focus: unknown): string | null {
  const f = focus as { projectId?: unknown; project_id?: unknown } | null | undefined;
  const id = f?.projectId ?? f?.project_id;
  return typeof id === 'string' && id ? id : null;
}

/** The open chat: its messages, the project its focus names, its scope. */
export interface OpenChat {
  id: string;
  messages: ChatMessage[];
  project: string | null;
  scope: ChatScope;
}

type Stored = Omit<OpenChat, 'id'>;

/**
 * The chat `sessionId` names, once known (null while its history loads or
 * fails), the state of that load, and its retry.
 */
export function useOpenChat(api: Api, sessionId: string | null): [OpenChat | null, Retrying<Stored>, () => void] {
  // The open session: a chat this tab just made (no history to read), or a stored one.
  const [opened, setOpened] = useState<{ id: string; fresh?: ChatScope } | null>(null);

  useEffect(() => {
    if (!sessionId) return openSession();
    const scope = fresh.get(sessionId);
    fresh.delete(sessionId);
    setOpened({ id: sessionId, fresh: scope });
  }, [sessionId]);

  const stored = opened && !opened.fresh && opened.id === sessionId ? opened.id : null;
  const [history, reloadHistory] = useRetrying<Stored>(stored, async () => {
    const [page, session] = await Promise.all([api.messages(stored!), api.session(stored!)]);
    return { messages: toUIMessages(page.messages), project: focusProject(session?.focus), scope: sessionScope(session) };
  });

  let current: OpenChat | null = null;
  if (opened?.id === sessionId && opened.fresh) current = { id: opened.id, messages: [], project: null, scope: opened.fresh };
  else if (opened?.id === sessionId && history.value) current = { id: opened.id, ...history.value };
  return [current, history, reloadHistory];
}
