/**
 * The agenda: today and the next six days of the user's calendar in the
 * user's time zone (their choice, else the browser's; `src/ZoneControl.tsx`), grouped by day, each occurrence with its local time
 * (or "all day") and title. Loaded when the page opens and listed again when
 * a turn's `calendar_patch` arrives (src/agenda.ts says why a patch is not
 * applied in place). A calendar the backend cannot list (no `/events` route,
 * an error) shows "calendar unavailable" and leaves the rest of the page be.
 */
import { useCallback, useEffect, useRef, useState, type ReactNode } from 'react';
import type { Api } from './api/client';
import { dayLabel, loadAgenda, timeOf, todayIn, type Agenda } from './agenda';

export type AgendaState =
  | { kind: 'loading' }
  | { kind: 'unavailable'; reason: string }
  /** `stale`: the last listing failed; this is the one before it. */
  | { kind: 'ready'; agenda: Agenda; stale: boolean };

/**
 * The agenda's state and `refresh`, which lists the range again. Refreshes
 * never overlap: one asked for (a patch, a new zone) while a listing is in
 * flight runs once that one ends (however many were asked for: a replayed turn brings its patches
 * at once), so the last listing always starts after the last patch.
 */
export function useAgenda(api: Api, zone: string): [AgendaState, () => void] {
  const [state, setState] = useState<AgendaState>({ kind: 'loading' });
  const running = useRef(false);
  const again = useRef(false);
  const live = useRef(true);
  // The newest `refresh` (its zone): the one a listing in flight runs after it.
  const latest = useRef<() => void>(() => undefined);

  const refresh = useCallback(() => {
    if (running.current) {
      again.current = true;
      return;
    }
    running.current = true;
    loadAgenda(api, zone)
      .then(
        (agenda) => live.current && setState({ kind: 'ready', agenda, stale: false }),
        (e: unknown) =>
          live.current &&
          setState((s) => (s.kind === 'ready' ? { ...s, stale: true } : { kind: 'unavailable', reason: String(e) })),
      )
      .finally(() => {
        running.current = false;
        if (again.current && live.current) {
          again.current = false;
          latest.current();
        }
      });
  }, [api, zone]);
  latest.current = refresh;

  useEffect(() => {
    live.current = true;
    refresh();
    return () => {
      live.current = false;
    };
  }, [refresh]);

  return [state, refresh];
}

/** The agenda; `children` (the zone control) under its heading. */
export function AgendaPanel({ state, children }: { state: AgendaState; children?: ReactNode }) {
  const zone = state.kind === 'ready' ? state.agenda.timezone : 'UTC';
  const today = todayIn(zone);
  return (
    <section className="agenda" data-testid="agenda" data-state={state.kind} data-zone={state.kind === 'ready' ? zone : undefined}>
      <h2 title={zone}>Agenda</h2>
      {children}
      {state.kind === 'loading' && <p className="muted-small">Loading…</p>}
      {state.kind === 'unavailable' && (
        <p className="muted-small" data-testid="agenda-unavailable" title={state.reason}>
          calendar unavailable
        </p>
      )}
      {state.kind === 'ready' && (
        <>
          {state.agenda.days.map((day) => (
            <div key={day.date} className="agenda-day" data-testid="agenda-day" data-date={day.date}>
              <h3>{dayLabel(day.date, today)}</h3>
              {day.events.length === 0 ? (
                <p className="muted-small">—</p>
              ) : (
                <ul>
                  {day.events.map((e) => (
                    <li key={`${e.event_id}/${e.instance ?? e.start}`} data-testid="agenda-event" data-event-id={e.event_id}>
                      <span className="agenda-time" data-testid="agenda-time">
                        {timeOf(e)}
                      </span>{' '}
                      <span data-testid="agenda-title">{e.title}</span>
                    </li>
                  ))}
                </ul>
              )}
            </div>
          ))}
          {state.agenda.truncated && <p className="muted-small">More events than shown.</p>}
          {state.stale && <p className="muted-small error">could not refresh the calendar</p>}
        </>
      )}
    </section>
  );
}
