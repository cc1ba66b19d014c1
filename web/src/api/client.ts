/**
 * The JSON APIs the page reads besides the chat stream: the sessions API on
 * the stream function's URL (docs/sessions.md) and the entities API
 * (docs/entities.md). Every call sends the bearer token; a non-2xx answer
 * throws with the server's `{"error":{"code","message"}}`.
 */
import type { EventList } from '../agenda';
import { join, type AppConfig } from '../config';
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

export class Api {
  constructor(private readonly config: AppConfig) {}

  get authHeaders(): Record<string, string> {
    return { Authorization: `Bearer ${this.config.token}` };
  }

  private async call<T>(base: string, path: string, init: RequestInit = {}): Promise<T> {
    const headers: Record<string, string> = { ...this.authHeaders };
    if (init.body) headers['Content-Type'] = 'application/json';
    const res = await fetch(join(base, path), { ...init, headers });
    if (!res.ok) {
      const body = (await res.json().catch(() => null)) as ErrorBody | null;
      throw new ApiError(res.status, body?.error.code ?? 'http_error', body?.error.message ?? res.statusText);
    }
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
