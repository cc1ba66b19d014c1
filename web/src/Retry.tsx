/**
 * Loads that retry: a request that fails (no answer in time, a network
 * error, an error answer) is shown as a visible error with a "Retry now"
 * button and tried again by itself after a growing pause (1, 2, 4 … 30 s),
 * so a stack that stops answering never leaves the page on an endless
 * "Loading…", and one that answers again is picked up without a reload.
 * Only reads retry by themselves: resending a message could post it twice.
 */
import { useCallback, useEffect, useRef, useState } from 'react';

/** The pause before the `n`th automatic retry (n ≥ 1): 1 s, doubling, at most 30 s. */
export function backoffMs(n: number): number {
  return Math.min(30_000, 1000 * 2 ** Math.max(0, n - 1));
}

export interface Retrying<T> {
  /** The last value loaded for this key (kept while a reload runs or fails). */
  value?: T;
  /** The last failure, until a load succeeds. */
  error?: string;
  /** The pause before the next automatic try, after a failure. */
  retryInMs?: number;
}

/**
 * `load()` for `key`, retried with backoff until it succeeds; `reload` runs
 * it again now (a retry button, or fresher data). A new key starts afresh.
 */
export function useRetrying<T>(key: string | null, load: () => Promise<T>): [Retrying<T>, () => void] {
  const [state, setState] = useState<Retrying<T> & { key: string | null }>({ key });
  const [tick, setTick] = useState(0);
  const failures = useRef(0);
  const latest = useRef(load);
  latest.current = load;
  useEffect(() => {
    failures.current = 0;
  }, [key]);
  useEffect(() => {
    if (key === null) return;
    let live = true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    latest.current().then(
      (value) => {
        if (!live) return;
        failures.current = 0;
        setState({ key, value });
      },
      (e: unknown) => {
        if (!live) return;
        const wait = backoffMs(++failures.current);
        const error = e instanceof Error ? e.message : String(e);
        setState((s) => ({ key, value: s.key === key ? s.value : undefined, error, retryInMs: wait }));
        timer = setTimeout(() => setTick((t) => t + 1), wait);
      },
    );
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, [key, tick]);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  return [state.key === key ? state : { key }, reload];
}

/** "Could not load <what>: <error>. Trying again in 4 s." and a button. */
export function RetryNotice({ what, error, retryInMs, onRetry }: { what: string; error: string; retryInMs?: number; onRetry: () => void }) {
  return (
    <div className="retry error" data-testid="load-error" role="alert">
      Could not load {what}: {error}.
      {retryInMs !== undefined && ` Trying again in ${Math.round(retryInMs / 1000)} s.`}{' '}
      <button type="button" data-testid="retry" onClick={onRetry}>
        Retry now
      </button>
    </div>
  );
}
