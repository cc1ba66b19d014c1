/**
 * The chat page: sessions on the left, the conversation in the middle, the
 * project's document tree and the turn's operations on the right. The open
 * session is in the address (`#/s/<id>`), so a reload comes back to it and
 * resumes a running turn.
 */
import { generateId } from 'ai';
import { useCallback, useEffect, useMemo, useState } from 'react';
import { Api } from './api/client';
import type { EntityPatch, SessionView } from './api/types.gen';
import { Chat } from './Chat';
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

/** A new chat: an id like `useChat`'s own, which the server takes as the session's key. */
/** Chat ids this tab made and has not sent anything under yet: they have no
 * stored history to ask for (asking would only log a 404 in the console). */
const fresh = new Set<string>();

function openSession(id: string = generateId()) {
  fresh.add(id);
  window.location.hash = `#/s/${id}`;
}

export function App({ config }: { config: AppConfig }) {
  const api = useMemo(() => new Api(config), [config]);
  const sessionId = useHashSession();
  const [sessions, setSessions] = useState<SessionView[]>([]);
  const [history, setHistory] = useState<{ id: string; messages: ChatMessage[] } | null>(null);
  const [ontology, setOntology] = useState<Ontology | null>(null);
  // The panel's operations list, which the open chat fills (OntologyPanel).
  const [feed, setFeed] = useState<HTMLOListElement | null>(null);
  const [error, setError] = useState<string | null>(null);

  const refreshSessions = useCallback(() => {
    api.sessions().then((l) => setSessions(l.sessions), (e) => setError(String(e)));
  }, [api]);

  useEffect(refreshSessions, [refreshSessions]);

  useEffect(() => {
    api
      .projects()
      .then((p) => (p.items[0] ? loadOntology(api, p.items[0].id, p.items[0].name) : null))
      .then(setOntology, (e) => setError(String(e)));
  }, [api]);

  useEffect(() => {
    if (!sessionId) return openSession();
    setHistory(null);
    if (fresh.delete(sessionId)) {
      setHistory({ id: sessionId, messages: [] });
      return;
    }
    api.messages(sessionId).then(
      (page) => setHistory({ id: sessionId, messages: toUIMessages(page.messages) }),
      (e) => setError(String(e)),
    );
  }, [api, sessionId]);

  const onPatch = useCallback((p: EntityPatch) => setOntology((o) => (o ? applyPatch(o, p) : o)), []);

  return (
    <div className="layout">
      <nav className="sessions">
        <button data-testid="new-chat" onClick={() => openSession()}>
          New chat
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
        {history && history.id === sessionId ? (
          <Chat
            key={history.id}
            api={api}
            config={config}
            sessionId={history.id}
            initial={history.messages}
            projectId={ontology?.projectId}
            onPatch={onPatch}
            feed={feed}
            onTurnEnd={refreshSessions}
          />
        ) : (
          <p className="muted">Loading…</p>
        )}
      </main>
      <OntologyPanel ontology={ontology} feedRef={setFeed} />
    </div>
  );
}
