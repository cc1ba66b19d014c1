/**
 * "Ask me first": a checkbox per tool that changes something; a ticked tool's
 * every call waits for the user's Approve / Deny in the chat
 * (`GET`/`PUT /me/approvals`, docs/chat-protocol.md#approvals). Deletes
 * always ask, whatever is ticked. A change is saved at once; the next turn
 * reads it. A backend without the route shows "settings unavailable".
 * Collapsed by default (its heading says how many are ticked), the tools
 * grouped in words (Creating, Changing, Deleting, Calendar), so the project's
 * tree below stays in view.
 */
import { useEffect, useState } from 'react';
import type { Api } from './api/client';
import type { ApprovalSettingsView } from './api/types.gen';

type State =
  | { kind: 'loading' }
  | { kind: 'unavailable'; reason: string }
  | { kind: 'ready'; settings: ApprovalSettingsView; saving: boolean; error: string | null };

/** Each askable tool's group and words; a tool not listed here shows under "Other" by its name. */
const TOOLS: { [tool: string]: [group: string, words: string] } = {
  create_project: ['Creating', 'a project'],
  create_onto_project: ['Creating', 'a project with its plan'],
  create_document: ['Creating', 'a document'],
  create_task: ['Creating', 'a task'],
  create_goal: ['Creating', 'a goal'],
  create_plan: ['Creating', 'a plan'],
  create_milestone: ['Creating', 'a milestone'],
  create_risk: ['Creating', 'a risk'],
  create_requirement: ['Creating', 'a requirement'],
  update_project: ['Changing', 'a project'],
  update_entity: ['Changing', 'anything in a project'],
  move_document: ['Changing', 'moving a document'],
  link_entities: ['Changing', 'linking two things'],
  unlink_entities: ['Changing', 'unlinking two things'],
  reorganize_project: ['Changing', 'reorganizing a project in one step'],
  propose_entities: ['Creating', "a brain dump's batch"],
  delete_entity: ['Deleting', 'anything in a project (always asks)'],
  create_calendar_event: ['Calendar', 'a new event'],
  update_calendar_event: ['Calendar', 'changing an event'],
  delete_calendar_event: ['Calendar', 'deleting an event (always asks)'],
};

const ORDER = ['Creating', 'Changing', 'Deleting', 'Calendar', 'Other'];

/** `askable` grouped in words: [group, its tools] for each group with any, in {@link ORDER}. */
export function grouped(tools: string[]): [string, string[]][] {
  const groups = new Map<string, string[]>();
  for (const t of tools) {
    const g = TOOLS[t]?.[0] ?? 'Other';
    groups.set(g, [...(groups.get(g) ?? []), t]);
  }
  return ORDER.flatMap((g) => (groups.has(g) ? [[g, groups.get(g)!] as [string, string[]]] : []));
}

/** `create_task` as "a task" (under "Creating"). */
function label(tool: string): string {
  return TOOLS[tool]?.[1] ?? tool.replace(/_/g, ' ');
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

  const ticked = state.kind === 'ready' ? state.settings.ask_first.length : 0;
  return (
    <details className="ask-first" data-testid="ask-first" data-state={state.kind}>
      <summary title="Calls of a ticked tool wait for your Approve / Deny">
        <h2>Ask me first</h2>
        <span className="muted-small" data-testid="ask-first-count">
          {state.kind === 'ready' ? (ticked ? ` ${ticked} ticked` : ' none ticked') : ''}
        </span>
      </summary>
      {state.kind === 'loading' && <p className="muted-small">Loading…</p>}
      {state.kind === 'unavailable' && (
        <p className="muted-small" title={state.reason}>
          settings unavailable
        </p>
      )}
      {state.kind === 'ready' && (
        <>
          {grouped(state.settings.askable).map(([group, tools]) => (
            <div key={group} className="ask-group" data-testid="ask-first-group" data-group={group}>
              <h3>{group}</h3>
              <ul>
                {tools.map((tool) => (
                  <li key={tool}>
                    <label title={tool}>
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
            </div>
          ))}
          {state.error && <p className="muted-small error">{state.error}</p>}
        </>
      )}
    </details>
  );
}
