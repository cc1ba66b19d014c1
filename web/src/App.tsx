/**
 * The chat page: sessions on the left (each labelled with its scope: the
 * calendar, or its project's name), the conversation in the middle, the
 * agenda (the calendar's next seven days, with the user's time zone), the
 * project's document tree (not in a calendar chat), the tools that ask
 * first and the turn's operations on the right. The open session is in the
 * address (`#/s/<id>`), so a reload comes back to it and resumes a running
 * turn. Every read retries with backoff and says so while it fails
 * (`src/Retry.tsx`).
 */
import { useCallback, useEffect, useMemo, useState } from 'react';
import type { ChatData } from './chat-types';
import { Api } from './api/client';
import type { CalendarPatch, EntityPatch, Project, SessionView } from './api/types.gen';
import { browserZone, changesSomething } from './agenda';
import { AgendaPanel, useAgenda } from './AgendaPanel';
import { AskFirstPanel } from './AskFirstPanel';
import { Chat } from './Chat';
import type { AppConfig } from './config';
import { applyPatch, loadOntology, type Ontology } from './ontology';
import { OntologyPanel } from './OntologyPanel';
import { RetryNotice, useRetrying } from './Retry';
import { focusProject, openSession, useHashSession, useOpenChat } from './session';
import { ZoneControl } from './ZoneControl';

/** What a session is about, for its label: "Calendar", its project's name, … */
export function scopeLabel(session: SessionView, projects: Project[], movedTo?: string): string {
  switch (session.context_type) {
    case 'calendar':
      return 'Calendar';
    case 'daily_brief_update':
      return 'Daily brief';
    default: {
      const id = movedTo ?? focusProject(session.focus);
      const named = (session.focus as { projectName?: unknown } | undefined)?.projectName;
      if (!id) return 'No project';
      return projects.find((p) => p.id === id)?.name ?? (typeof named === 'string' && named ? named : 'Project');
    }
  }
}

/** The projects a turn's entity patch created (`created` changes of kind `project`). */
function createdProjects(p: EntityPatch): Project[] {
  return p.changes.flatMap((c) => (c.op === 'created' && c.kind === 'project' && 'name' in c.entity ? [c.entity as Project] : []));
}

export function App({ config }: { config: AppConfig }) {
  const api = useMemo(() => new Api(config), [config]);
  const sessionId = useHashSession();
  const [sessions, reloadSessions] = useRetrying('sessions', () => api.sessions());
  const [listed, reloadProjects] = useRetrying('projects', () => api.projects());
  // Projects a turn made (its entity patch) before the list is read again.
  const [made, setMade] = useState<Project[]>([]);
  const projects = useMemo(() => {
    if (!listed.value) return null;
    const known = new Set(listed.value.items.map((p) => p.id));
    return [...listed.value.items, ...made.filter((p) => !known.has(p.id))];
  }, [listed.value, made]);
  // Sessions a turn moved into a project (a created project, a `context_shift`).
  const [moved, setMoved] = useState<{ [session: string]: string }>({});
  const [ontology, setOntology] = useState<Ontology | null>(null);
  // The panel's operations list, which the open chat fills (OntologyPanel).
  const [feed, setFeed] = useState<HTMLOListElement | null>(null);
  const [error, setError] = useState<string | null>(null);
  // The user's chosen zone (GET /me/settings); null: none, the browser's is used.
  const [chosenZone, setChosenZone] = useState<string | null>(null);
  const zone = chosenZone ?? browserZone();
  const [current, history, reloadHistory] = useOpenChat(api, sessionId);
  // A project chat's project: where a turn moved it, its stored focus, else
  // (a new chat, or one without a project) the first project. A calendar
  // chat has none: the panel shows its agenda, not a project's tree.
  const projectId =
    current && current.scope === 'project' ? (moved[current.id] ?? current.project ?? projects?.[0]?.id) : undefined;
  const projectName = projects?.find((p) => p.id === projectId)?.name;

  const loaded = projects !== null;
  useEffect(() => {
    if (!projectId || !loaded) return setOntology(null);
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

  const chatId = current?.id;
  const onPatch = useCallback(
    (p: EntityPatch) => {
      // A project the turn created: known at once (its name for the panel and
      // the sessions' labels), and the chat's project if it had none.
      const created = createdProjects(p);
      if (created.length) {
        setMade((m) => [...m, ...created]);
        if (chatId && !projectId) setMoved((m) => ({ ...m, [chatId]: created[0].id }));
      }
      setOntology((o) => (o ? applyPatch(o, p) : o));
    },
    [chatId, projectId],
  );
  // The conversation moved into a project (`create_onto_project`): the chat follows.
  const onContextShift = useCallback(
    (s: ChatData['context-shift']) => {
      const id = focusProject(s.current.focus);
      if (!chatId || !id) return;
      setMade((m) => [...m, { id, name: s.entity_name } as Project]);
      setMoved((m) => ({ ...m, [chatId]: id }));
    },
    [chatId],
  );
  const onTurnEnd = useCallback(() => {
    reloadSessions();
    reloadProjects();
  }, [reloadSessions, reloadProjects]);

  // The calendar's next days in the user's zone; a turn's calendar patch lists them again.
  const [agenda, refreshAgenda] = useAgenda(api, zone);
  const onCalendarPatch = useCallback((p: CalendarPatch) => changesSomething(p) && refreshAgenda(), [refreshAgenda]);

  const calendar = current?.scope === 'calendar';
  const placeholder = !current
    ? ''
    : current.scope === 'calendar'
      ? 'Ask about your calendar…'
      : current.scope === 'daily_brief_update'
        ? 'Ask about your day…'
        : projectName
          ? `Ask about ${projectName}…`
          : 'Ask anything, or start a project…';

  return (
    <div className="layout">
      <nav className="sessions">
        <button data-testid="new-chat" onClick={() => openSession()}>
          New chat
        </button>
        <button data-testid="new-calendar-chat" onClick={() => openSession('calendar')}>
          New calendar chat
        </button>
        {sessions.error && (
          <RetryNotice what="the sessions" error={sessions.error} retryInMs={sessions.retryInMs} onRetry={reloadSessions} />
        )}
        <ul>
          {(sessions.value?.sessions ?? []).map((s) => (
            <li key={s.id} className={s.id === sessionId ? 'current' : ''}>
              <a href={`#/s/${s.id}`} data-testid="session" data-scope={s.context_type}>
                <span className="scope" data-testid="session-scope">
                  {scopeLabel(s, projects ?? [], moved[s.id])}
                </span>
                {s.title || 'Untitled'}
                <small>{new Date(s.last_activity_at).toLocaleString()}</small>
              </a>
            </li>
          ))}
        </ul>
      </nav>
      <main>
        {error && <p className="error">{error}</p>}
        {listed.error && (
          <RetryNotice what="your projects" error={listed.error} retryInMs={listed.retryInMs} onRetry={reloadProjects} />
        )}
        {history.error && (
          <RetryNotice what="this chat" error={history.error} retryInMs={history.retryInMs} onRetry={reloadHistory} />
        )}
        {current && projects ? (
          <Chat
            key={current.id}
            api={api}
            config={config}
            sessionId={current.id}
            initial={current.messages}
            projectId={projectId}
            scope={current.scope}
            zone={zone}
            placeholder={placeholder}
            onPatch={onPatch}
            onCalendarPatch={onCalendarPatch}
            onContextShift={onContextShift}
            feed={feed}
            onTurnEnd={onTurnEnd}
          />
        ) : (
          !history.error && !listed.error && <p className="muted">Loading…</p>
        )}
      </main>
      <OntologyPanel ontology={ontology} showProject={!calendar} feedRef={setFeed}>
        <AgendaPanel state={agenda}>
          <ZoneControl api={api} browser={browserZone()} onChange={setChosenZone} />
        </AgendaPanel>
        <AskFirstPanel api={api} />
      </OntologyPanel>
    </div>
  );
}
