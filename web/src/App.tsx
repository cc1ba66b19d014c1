/**
 * The chat page: sessions on the left, the conversation in the middle, the
 * agenda (the calendar's next seven days), the tools that ask first, the
 * project's document tree and the turn's operations on the right. The open
 * session is in the address (`#/s/<id>`), so a reload comes back to it and
 * resumes a running turn.
 */
import { generateId } from 'ai';
import { useCallback, useEffect, useMemo, useState } from 'react';
import { Api } from './api/client';
import type { CalendarPatch, ContextType, EntityPatch, Project, SessionView } from './api/types.gen';
import { changesSomething } from './agenda';
import { AgendaPanel, useAgenda } from './AgendaPanel';
import { AskFirstPanel } from './AskFirstPanel';
import { Chat, type ChatScope } from './Chat';
import type { ChatMessage } from './chat-types';
import type { AppConfig } from './config';
import { toUIMessages } from './history';
import { applyPatch, loadOntology, type Ontology } from './ontology';
import { OntologyPanel } from './OntologyPanel';

function hashSession(): string | null {
  const m = /^#\/s\/([A-Za-z0-9._:|@-]{1,64})$/.exec(window.location.hash);
  return m ? m[1] : null;
}

function useHashSession(): string | null {
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
function openSession(scope: ChatScope = 'project', id: string = generateId()) {
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
function focusProject(focus: unknown): string | null {
  const f = focus as { projectId?: unknown; project_id?: unknown } | null | undefined;
  const id = f?.projectId ?? f?.project_id;
  return typeof id === 'string' && id ? id : null;
}

export function App({ config }: { config: AppConfig }) {
  const api = useMemo(() => new Api(config), [config]);
  const sessionId = useHashSession();
  const [sessions, setSessions] = useState<SessionView[]>([]);
  // The open session: its history, and the project it works in (its stored
  // focus; null for a new chat or one without a project).
  const [history, setHistory] = useState<{
    id: string;
    messages: ChatMessage[];
    project: string | null;
    scope: ChatScope;
  } | null>(null);
  const [projects, setProjects] = useState<Project[] | null>(null);
  const [ontology, setOntology] = useState<Ontology | null>(null);
  // The panel's operations list, which the open chat fills (OntologyPanel).
  const [feed, setFeed] = useState<HTMLOListElement | null>(null);
  const [error, setError] = useState<string | null>(null);

  const refreshSessions = useCallback(() => {
    api.sessions().then((l) => setSessions(l.sessions), (e) => setError(String(e)));
  }, [api]);

  useEffect(refreshSessions, [refreshSessions]);

  useEffect(() => {
    api.projects().then(
      (p) => setProjects(p.items),
      (e) => {
        setError(String(e));
        setProjects([]);
      },
    );
  }, [api]);

  useEffect(() => {
    if (!sessionId) return openSession();
    setHistory(null);
    const scope = fresh.get(sessionId);
    if (scope) {
      fresh.delete(sessionId);
      setHistory({ id: sessionId, messages: [], project: null, scope });
      return;
    }
    let live = true;
    Promise.all([api.messages(sessionId), api.session(sessionId)]).then(
      ([page, session]) =>
        live &&
        setHistory({
          id: sessionId,
          messages: toUIMessages(page.messages),
          project: focusProject(session?.focus),
          scope: sessionScope(session),
        }),
      (e) => live && setError(String(e)),
    );
    return () => {
      live = false;
    };
  }, [api, sessionId]);

  // The session's project, else (a new chat, or one without a project) the
  // first project: what the panel shows and what the next turn names.
  const current = history && history.id === sessionId ? history : null;
  const projectId = current ? (current.project ?? projects?.[0]?.id) : undefined;
  const projectName = projects?.find((p) => p.id === projectId)?.name;

  const loaded = projects !== null;
  useEffect(() => {
    if (!projectId || !loaded) return;
    let live = true;
    setOntology((o) => (o?.projectId === projectId ? o : null));
    loadOntology(api, projectId, projectName ?? projectId).then(
      (o) => live && setOntology(o),
      (e) => live && setError(String(e)),
    );
    return () => {
      live = false;
    };
  }, [api, projectId, projectName, loaded]);

  const onPatch = useCallback((p: EntityPatch) => setOntology((o) => (o ? applyPatch(o, p) : o)), []);

  // The calendar's next days; a turn's calendar patch lists them again.
  const [agenda, refreshAgenda] = useAgenda(api);
  const onCalendarPatch = useCallback((p: CalendarPatch) => changesSomething(p) && refreshAgenda(), [refreshAgenda]);

  return (
    <div className="layout">
      <nav className="sessions">
        <button data-testid="new-chat" onClick={() => openSession()}>
          New chat
        </button>
        <button data-testid="new-calendar-chat" onClick={() => openSession('calendar')}>
          New calendar chat
        </button>
        <ul>
          {sessions.map((s) => (
            <li key={s.id} className={s.id === sessionId ? 'current' : ''}>
              <a href={`#/s/${s.id}`} data-testid="session">
                {s.title || 'Untitled'}
                <small>{new Date(s.last_activity_at).toLocaleString()}</small>
              </a>
            </li>
          ))}
        </ul>
      </nav>
      <main>
        {error && <p className="error">{error}</p>}
        {current && projects ? (
          <Chat
            key={current.id}
            api={api}
            config={config}
            sessionId={current.id}
            initial={current.messages}
            projectId={projectId}
            scope={current.scope}
            onPatch={onPatch}
            onCalendarPatch={onCalendarPatch}
            feed={feed}
            onTurnEnd={refreshSessions}
          />
        ) : (
          <p className="muted">Loading…</p>
        )}
      </main>
      <OntologyPanel ontology={ontology} feedRef={setFeed}>
        <AgendaPanel state={agenda} />
        <AskFirstPanel api={api} />
      </OntologyPanel>
    </div>
  );
}
