/**
 * The JSON APIs the page reads besides the chat stream: the sessions API on
 * the stream function's URL (docs/sessions.md) and the entities API
 * (docs/entities.md). Every call sends the bearer token; a non-2xx answer
 * throws with the server's `{"error":{"code","message"}}`; no answer within
 * the config's `requestTimeoutMs`, or a network error, throws
 * {@link NoAnswer} (the page shows it and retries, never an endless
 * "Loading…").
 */
import type { EventList } from '../agenda';
import { DEFAULT_TIMEOUT_MS, join, type AppConfig } from '../config';
import type {
  ApprovalSettings,
  ApprovalSettingsView,
  BudgetUsage,
  DocStructure,
  Entity,
  ErrorBody,
  MessagesPage,
  Project,
  SessionList,
  SessionView,
  StopAnswer,
  StopRequest,
  SuggestionRequest,
  UserSettings,
} from './types.gen';

/** One page of an entities listing (`Page<T>` in Rust, generic so not generated). */
export interface Page<T> {
  items: T[];
  next_cursor?: string | null;
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(`${status} ${code}: ${message}`);
  }
}

/** The server did not answer in time, or could not be reached. */
export class NoAnswer extends Error {}

/**
 * `fetch`, given up on when no answer (its status and headers) arrives within
 * `timeoutMs` or the network fails: {@link NoAnswer}. A body that is already
 * streaming is not timed (a turn's stream may rightly run for minutes).
 * `init.signal` (the chat's Stop) still aborts it as before.
 */
export async function fetchAnswered(input: RequestInfo | URL, init: RequestInit = {}, timeoutMs = DEFAULT_TIMEOUT_MS): Promise<Response> {
  const timer = new AbortController();
  const handle = setTimeout(() => timer.abort(), timeoutMs);
  const signal = init.signal ? AbortSignal.any([init.signal, timer.signal]) : timer.signal;
  try {
    return await fetch(input, { ...init, signal });
  } catch (e) {
    if (init.signal?.aborted) throw e;
    if (timer.signal.aborted) throw new NoAnswer(`the server did not answer within ${Math.round(timeoutMs / 1000)} s`);
    throw new NoAnswer(`the server could not be reached (${e instanceof Error ? e.message : String(e)})`);
  } finally {
    clearTimeout(handle);
  }
}

export class Api {
  constructor(private readonly config: AppConfig) {}

  get authHeaders(): Record<string, string> {
    return { Authorization: `Bearer ${this.config.token}` };
  }

  /** How long a request may wait for its answer (config `requestTimeoutMs`). */
  get timeoutMs(): number {
    return this.config.requestTimeoutMs ?? DEFAULT_TIMEOUT_MS;
  }

  /** The answer to a request, once its head says 2xx; else the server's error, thrown. */
  private async answer(base: string, path: string, init: RequestInit = {}): Promise<Response> {
    const headers: Record<string, string> = { ...this.authHeaders };
    if (init.body) headers['Content-Type'] = 'application/json';
    const res = await fetchAnswered(join(base, path), { ...init, headers }, this.timeoutMs);
    if (!res.ok) {
      const body = (await res.json().catch(() => null)) as ErrorBody | null;
      throw new ApiError(res.status, body?.error.code ?? 'http_error', body?.error.message ?? res.statusText);
    }
    return res;
  }

  private async call<T>(base: string, path: string, init: RequestInit = {}): Promise<T> {
    const res = await this.answer(base, path, init);
    return (res.status === 204 ? undefined : await res.json()) as T;
  }

  sessions(): Promise<SessionList> {
    return this.call(this.config.streamUrl, 'sessions?limit=50');
  }

  /** One session (its scope and focus); null for an unknown one. */
  async session(sessionId: string): Promise<SessionView | null> {
    try {
      return await this.call(this.config.streamUrl, `sessions/${encodeURIComponent(sessionId)}`);
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) return null;
      throw e;
    }
  }

  /** The newest page of a session's messages (chronological); an unknown session is empty. */
  async messages(sessionId: string): Promise<MessagesPage> {
    try {
      return await this.call(this.config.streamUrl, `sessions/${encodeURIComponent(sessionId)}/messages?limit=100`);
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) return { messages: [] };
      throw e;
    }
  }

  stop(sessionId: string): Promise<StopAnswer> {
    const body: StopRequest = {};
    return this.call(this.config.streamUrl, `sessions/${encodeURIComponent(sessionId)}/stop`, {
      method: 'POST',
      body: JSON.stringify(body),
    });
  }

  /**
   * A message suggestion for the session: the answer's stream (our native
   * events: `text_delta`s, then `done`), read by `src/suggestion.ts`. Nothing
   * is stored until the user sends the text as a turn.
   */
  suggestion(sessionId: string, body: SuggestionRequest, signal?: AbortSignal): Promise<Response> {
    return this.answer(this.config.streamUrl, `sessions/${encodeURIComponent(sessionId)}/suggestion`, {
      method: 'POST',
      body: JSON.stringify(body),
      signal,
    });
  }

  /** The user's budgets: what was used, the limits, when a spent one lets them go on (docs/budgets.md). */
  usage(): Promise<BudgetUsage> {
    return this.call(this.config.streamUrl, 'me/usage');
  }

  /** The tools the user set to ask first, and those that may be (docs/chat-protocol.md#approvals). */
  approvalSettings(): Promise<ApprovalSettingsView> {
    return this.call(this.config.streamUrl, 'me/approvals');
  }

  /** Replaces the tools that ask first; the settings as stored. */
  setApprovalSettings(askFirst: string[]): Promise<ApprovalSettingsView> {
    // The names come from the server's own `askable` list (a string list in
    // the view); the body's schema names them one by one.
    const body = { ask_first: askFirst } as ApprovalSettings;
    return this.call(this.config.streamUrl, 'me/approvals', { method: 'PUT', body: JSON.stringify(body) });
  }

  /** The user's settings: the time zone they chose (`null`: none). */
  settings(): Promise<UserSettings> {
    return this.call(this.config.streamUrl, 'me/settings');
  }

  /** Sets the user's chosen time zone (`null`: none); the settings as stored. */
  setSettings(settings: UserSettings): Promise<UserSettings> {
    return this.call(this.config.streamUrl, 'me/settings', { method: 'PUT', body: JSON.stringify(settings) });
  }

  projects(): Promise<Page<Project>> {
    return this.call(this.config.entitiesUrl, 'projects?limit=100');
  }

  docStructure(projectId: string): Promise<DocStructure> {
    return this.call(this.config.entitiesUrl, `projects/${encodeURIComponent(projectId)}/doc-structure`);
  }

  /**
   * The user's calendar from day `from` through day `to` (both included) in
   * `timezone`: recurrences expanded, times local to that zone.
   */
  events(from: string, to: string, timezone: string): Promise<EventList> {
    const q = new URLSearchParams({ from, to, timezone });
    return this.call(this.config.entitiesUrl, `events?${q}`);
  }

  /** The project's documents (without content), every page. */
  async documents(projectId: string): Promise<Entity[]> {
    const out: Entity[] = [];
    let cursor: string | null | undefined;
    do {
      const q = cursor ? `&cursor=${encodeURIComponent(cursor)}` : '';
      const page = await this.call<Page<Entity>>(
        this.config.entitiesUrl,
        `projects/${encodeURIComponent(projectId)}/documents?limit=100${q}`,
      );
      out.push(...page.items);
      cursor = page.next_cursor;
    } while (cursor);
    return out;
  }
}
