/**
 * "Ask me first": a checkbox per tool that changes something; a ticked tool's
 * every call waits for the user's Approve / Deny in the chat
 * (`GET`/`PUT /me/approvals`, docs/chat-protocol.md#approvals). Deletes
 * always ask, whatever is ticked. A change is saved at once; the next turn
 * reads it. A backend without the route shows "settings unavailable".
 */
import { useEffect, useState } from 'react';
import type { Api } from './api/client';
import type { ApprovalSettingsView } from './api/types.gen';

type State =
  | { kind: 'loading' }
  | { kind: 'unavailable'; reason: string }
  | { kind: 'ready'; settings: ApprovalSettingsView; saving: boolean; error: string | null };

/** `create_task` as "create task". */
function label(tool: string): string {
  return tool.replace(/_/g, ' ');
}

export function AskFirstPanel({ api }: { api: Api }) {
  const [state, setState] = useState<State>({ kind: 'loading' });

  useEffect(() => {
    let live = true;
    api.approvalSettings().then(
      (settings) => live && setState({ kind: 'ready', settings, saving: false, error: null }),
      (e: unknown) => live && setState({ kind: 'unavailable', reason: String(e) }),
    );
    return () => {
      live = false;
    };
  }, [api]);

  const toggle = (tool: string, on: boolean) => {
    if (state.kind !== 'ready' || state.saving) return;
    const current = state.settings.ask_first;
    const next = on ? [...current, tool] : current.filter((t) => t !== tool);
    const before = state.settings;
    // Shown ticked at once; put back if the save fails.
    setState({ kind: 'ready', settings: { ...before, ask_first: next }, saving: true, error: null });
    api.setApprovalSettings(next).then(
      (settings) => setState({ kind: 'ready', settings, saving: false, error: null }),
      (e: unknown) => setState({ kind: 'ready', settings: before, saving: false, error: String(e) }),
    );
  };

  return (
    <section className="ask-first" data-testid="ask-first" data-state={state.kind}>
      <h2 title="Calls of a ticked tool wait for your Approve / Deny">Ask me first</h2>
      {state.kind === 'loading' && <p className="muted-small">Loading…</p>}
      {state.kind === 'unavailable' && (
        <p className="muted-small" title={state.reason}>
          settings unavailable
        </p>
      )}
      {state.kind === 'ready' && (
        <>
          <ul>
            {state.settings.askable.map((tool) => (
              <li key={tool}>
                <label>
                  <input
                    type="checkbox"
                    data-testid="ask-first-tool"
                    data-tool={tool}
                    checked={state.settings.ask_first.includes(tool)}
                    disabled={state.saving}
                    onChange={(e) => toggle(tool, e.target.checked)}
                  />{' '}
                  {label(tool)}
                </label>
              </li>
            ))}
          </ul>
          {state.error && <p className="muted-small error">{state.error}</p>}
        </>
      )}
    </section>
  );
}
