/**
 * The agenda panel's state: the user's calendar from today through the next
 * six days in the user's time zone, as the entities API lists it
 * (`GET <entitiesUrl>/events?from&to&timezone`: recurrences expanded into
 * their occurrences, overrides applied, every time local to that zone), kept
 * current by the turn's `calendar_patch` events (`data-calendar-patch`).
 *
 * A patch is not applied to the listing: the listing is fetched again.
 * A patch carries each changed event whole — a series as its `RRULE`,
 * exceptions and overrides, not as occurrences — so applying it here would
 * mean expanding RFC 5545 recurrences in the browser, across DST changes,
 * exactly as the server's `rrule` crate does, or the two would disagree
 * (an instance an hour off, a cancelled one shown). Even a single event's
 * start is a UTC instant that must be placed on a local day. The server
 * already does all of that for this range in one small request, so a patch
 * is only the signal that the range changed: re-listing is always right,
 * for a series or a single event, and a replayed patch (a resumed turn
 * replays its parts) costs one more identical request and changes nothing.
 */
import type { Api } from './api/client';
import type { CalendarPatch, EventId, EventTime, ProjectId, EntityId } from './api/types.gen';

/**
 * One occurrence as `GET /events` lists it (Rust `shared::calendar::EventInstance`).
 * Written here from the route's contract until the route's types are in the
 * generated ones (they come with the entities API's OpenAPI document).
 */
export interface EventInstance {
  event_id: EventId;
  /** For an occurrence of a series: its original start (names it in edits). */
  instance?: EventTime | null;
  title: string;
  /** A date (`2026-12-01`, all-day) or the local time with its offset (`2026-12-01T10:00:00+01:00`). */
  start: string;
  /** Exclusive: the day after an all-day event's last day. */
  end: string;
  all_day: boolean;
  recurring: boolean;
  location?: string | null;
  description?: string | null;
  project_id?: ProjectId | null;
  task_id?: EntityId | null;
  version: number;
}

/** The listing over a range in one zone (Rust `shared::calendar::EventList`). */
export interface EventList {
  from: string;
  to: string;
  timezone: string;
  events: EventInstance[];
  /** More occurrences exist than the listing's cap returned. */
  truncated: boolean;
}

/** How many days the agenda shows: today and the next six. */
export const AGENDA_DAYS = 7;

/** The browser's IANA time zone (the page's zone when the user chose none). */
export function browserZone(): string {
  return Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';
}

/** Today's date (`YYYY-MM-DD`) in `zone`. */
export function todayIn(zone: string, now: Date = new Date()): string {
  // en-CA writes dates as YYYY-MM-DD.
  return new Intl.DateTimeFormat('en-CA', { timeZone: zone, year: 'numeric', month: '2-digit', day: '2-digit' }).format(now);
}

/** `day` (`YYYY-MM-DD`) plus `n` days: calendar arithmetic, no zone involved. */
export function addDays(day: string, n: number): string {
  const [y, m, d] = day.split('-').map(Number);
  return new Date(Date.UTC(y, m - 1, d + n)).toISOString().slice(0, 10);
}

export interface AgendaDay {
  date: string;
  events: EventInstance[];
}

export interface Agenda {
  timezone: string;
  days: AgendaDay[];
  truncated: boolean;
}

/** The listing grouped by local day, each day's all-day events first, then by start. */
export function groupByDay(list: EventList, days: string[]): Agenda {
  const byDay = new Map<string, EventInstance[]>(days.map((d) => [d, []]));
  const first = days[0];
  for (const e of list.events) {
    for (const d of daysOf(e, days)) byDay.get(d)?.push(e);
    // A timed event that began before the range and runs into it shows on its first day.
    if (!e.all_day && e.start.slice(0, 10) < first && e.end.slice(0, 10) >= first && e.end.slice(0, 16) !== `${first}T00:00`) {
      byDay.get(first)?.push(e);
    }
  }
  const order = (a: EventInstance, b: EventInstance) =>
    Number(b.all_day) - Number(a.all_day) || a.start.localeCompare(b.start) || a.title.localeCompare(b.title);
  return {
    timezone: list.timezone,
    truncated: list.truncated,
    days: days.map((date) => ({ date, events: (byDay.get(date) ?? []).sort(order) })),
  };
}

/** The agenda's days an occurrence is on: an all-day one on each of its days, a timed one on its start's. */
function daysOf(e: EventInstance, days: string[]): string[] {
  const start = e.start.slice(0, 10);
  if (!e.all_day) return [start];
  const end = e.end.slice(0, 10);
  return days.filter((d) => d === start || (d > start && d < end));
}

/** An occurrence's time as shown: "all day", or its local start ("10:00") as the listing gives it. */
export function timeOf(e: EventInstance): string {
  if (e.all_day) return 'all day';
  const local = /T(\d{2}:\d{2})/.exec(e.start)?.[1] ?? e.start;
  return local;
}

/** A day's heading: "Today", "Tomorrow", else "Mon 30 Nov". */
export function dayLabel(date: string, today: string): string {
  if (date === today) return 'Today';
  if (date === addDays(today, 1)) return 'Tomorrow';
  const [y, m, d] = date.split('-').map(Number);
  return new Intl.DateTimeFormat('en-GB', { weekday: 'short', day: 'numeric', month: 'short', timeZone: 'UTC' }).format(
    new Date(Date.UTC(y, m - 1, d)),
  );
}

/** The agenda from today through the next six days in `zone`. */
export async function loadAgenda(api: Api, zone: string = browserZone(), now: Date = new Date()): Promise<Agenda> {
  const from = todayIn(zone, now);
  const days = Array.from({ length: AGENDA_DAYS }, (_, i) => addDays(from, i));
  const list = await api.events(from, days[days.length - 1], zone);
  return groupByDay(list, days);
}

/** Whether a patch changed anything (an empty one needs no new listing). */
export function changesSomething(patch: CalendarPatch): boolean {
  return patch.changes.length > 0;
}
