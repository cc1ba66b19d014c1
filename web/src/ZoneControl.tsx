/**
 * The user's time zone: their choice (`GET`/`PUT /me/settings`), else this
 * browser's. The page lists the agenda and sends each turn in it; a turn
 * without a zone of its own (another client, the daily brief) uses the
 * chosen one, and a turn's zone never changes it: only this control does.
 * "This device's zone" clears the choice.
 */
import { useEffect, useMemo, useState } from 'react';
import type { Api } from './api/client';

/** Every IANA zone the browser knows, with `extra` (a stored one it may not list). */
function zones(extra: string[]): string[] {
  const known = typeof Intl.supportedValuesOf === 'function' ? Intl.supportedValuesOf('timeZone') : [];
  return [...new Set([...known, ...extra.filter(Boolean)])].sort();
}

export function ZoneControl({ api, browser, onChange }: { api: Api; browser: string; onChange: (zone: string | null) => void }) {
  const [chosen, setChosen] = useState<string | null | undefined>(undefined);
  const [state, setState] = useState<'loading' | 'ready' | 'saving' | 'unavailable'>('loading');
  const [error, setError] = useState<string | null>(null);

  useEffect(() => {
    let live = true;
    api.settings().then(
      (s) => {
        if (!live) return;
        setChosen(s.timezone ?? null);
        onChange(s.timezone ?? null);
        setState('ready');
      },
      (e: unknown) => {
        if (!live) return;
        setError(String(e));
        setState('unavailable');
      },
    );
    return () => {
      live = false;
    };
  }, [api, onChange]);

  const options = useMemo(() => zones([browser, chosen ?? '']), [browser, chosen]);
  const set = (zone: string | null) => {
    const before = chosen ?? null;
    setChosen(zone);
    setState('saving');
    setError(null);
    api.setSettings({ timezone: zone }).then(
      (s) => {
        setChosen(s.timezone ?? null);
        onChange(s.timezone ?? null);
        setState('ready');
      },
      (e: unknown) => {
        setChosen(before);
        setError(String(e));
        setState('ready');
      },
    );
  };

  return (
    <label className="zone muted-small" data-testid="zone" data-state={state} title={error ?? undefined}>
      Time zone{' '}
      <select
        data-testid="zone-select"
        value={chosen ?? ''}
        disabled={state !== 'ready'}
        onChange={(e) => set(e.target.value || null)}
      >
        <option value="">This device's ({browser})</option>
        {options.map((z) => (
          <option key={z} value={z}>
            {z}
          </option>
        ))}
      </select>
      {state === 'unavailable' && ' (unavailable)'}
      {error && state !== 'unavailable' && <span className="error"> not saved</span>}
    </label>
  );
}
