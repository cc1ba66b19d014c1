/**
 * Where the page finds its backend: `config.json`, served beside the page and
 * written per stack (scripts/stack.sh, the browser test), so one build of the
 * page serves any stack without a rebuild.
 */
export interface AppConfig {
  /** The stream function's URL (`…/lambda-url/stream/` locally). */
  streamUrl: string;
  /** The entities function's URL. */
  entitiesUrl: string;
  /** A bearer JWT (locally: `agentic-chat token`). */
  token: string;
  /**
   * How long a request may go without an answer (its headers, for a turn's
   * stream) before the page says the server is not answering and retries;
   * default {@link DEFAULT_TIMEOUT_MS}.
   */
  requestTimeoutMs?: number;
}

/** A request unanswered this long is given up on (shown, then retried). */
export const DEFAULT_TIMEOUT_MS = 15_000;

export async function loadConfig(): Promise<AppConfig> {
  const res = await fetch('config.json', { cache: 'no-store' });
  if (!res.ok) throw new Error(`config.json: HTTP ${res.status} (scripts/stack.sh writes it)`);
  const c = (await res.json()) as Partial<AppConfig>;
  for (const key of ['streamUrl', 'entitiesUrl', 'token'] as const) {
    if (typeof c[key] !== 'string' || !c[key]) throw new Error(`config.json: "${key}" is missing`);
  }
  return c as AppConfig;
}

/** `base` (a function URL, with or without its trailing slash) joined with `path`. */
export function join(base: string, path: string): string {
  return base.replace(/\/+$/, '') + '/' + path.replace(/^\/+/, '');
}
