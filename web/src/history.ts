/**
 * A session's stored messages (`GET /sessions/{id}/messages`) as the AI SDK's
 * UI messages, `useChat`'s initial messages: one user message each, and one
 * assistant message per turn (its text, its tool calls and their operations,
 * in order), with the turn's id: the shape, and the id, a live `POST /chat`
 * turn builds.
 */
import type { MessageView, OperationAction, ToolCallView } from './api/types.gen';
import type { ChatMessage, OperationData } from './chat-types';

export function toUIMessages(views: MessageView[]): ChatMessage[] {
  const out: ChatMessage[] = [];
  for (const v of views) {
    if (v.role === 'user') {
      out.push({ id: v.id, role: 'user', parts: [{ type: 'text', text: v.content ?? '' }] });
      continue;
    }
    if (v.role !== 'assistant') continue; // tool results ride on their calls' previews
    let turn = out[out.length - 1];
    if (!turn || turn.role !== 'assistant') {
      // The turn's id, as POST /chat's messageId: a resumed replay of this
      // turn then replaces this message instead of adding a second copy.
      turn = { id: v.turn_id, role: 'assistant', parts: [] };
      out.push(turn);
    }
    if (v.content) turn.parts.push({ type: 'text', text: v.content, state: 'done' });
    if (v.claim_mismatches?.length) {
      // As the stream sent it (`answer_check`): a withdrawn answer was asked again.
      const verdict = v.in_context === false ? 'asked_again' : 'corrected';
      turn.parts.push({ type: 'data-answer-check', data: { verdict, mismatches: v.claim_mismatches } });
    }
    for (const call of v.tool_calls ?? []) {
      const base = { type: 'dynamic-tool', toolName: call.name, toolCallId: call.id, input: parseArgs(call.arguments) } as const;
      if (call.approval) {
        // A call that asked the user: still waiting (no result), or answered.
        turn.parts.push({ type: 'data-approval-required', data: { ...call.approval, arguments: base.input ?? {} } });
        const id = call.approval.approval_id;
        const preview = call.result_preview;
        turn.parts.push(
          preview == null
            ? { ...base, state: 'approval-requested', approval: { id } }
            : preview.includes('denied by the user') || preview.includes('not run:')
              ? { ...base, state: 'output-denied', approval: { id, approved: false } }
              : { ...base, state: 'output-available', output: preview, approval: { id, approved: true } },
        );
        if (preview != null && !preview.includes('denied by the user') && !preview.includes('not run:')) {
          for (const data of operationsOf(call)) turn.parts.push({ type: 'data-operation', data });
        }
        continue;
      }
      turn.parts.push(
        call.result_preview == null
          ? { ...base, state: 'input-available' }
          : { ...base, state: 'output-available', output: call.result_preview },
      );
      for (const data of operationsOf(call)) turn.parts.push({ type: 'data-operation', data });
    }
    turn.metadata = { reason: v.status };
  }
  return out;
}

/** Tool arguments are JSON text as the model wrote it, possibly invalid: kept as text then. */
function parseArgs(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

const KINDS = ['document', 'task', 'goal', 'plan', 'milestone', 'risk', 'requirement'];
/** Failures the server reports before the call reaches the ontology: no operation was sent for them. */
const REFUSED = new Set(['invalid_arguments', 'unknown_tool', 'out_of_scope', 'invalid_id']);

/**
 * The operations a stored call sent when it ran, in the live turn's words:
 * the server keeps them with the call's result (`operations`). Calls stored
 * before it did are rebuilt from their arguments (`storedOperations`).
 */
export function operationsOf(call: ToolCallView): OperationData[] {
  return call.operations?.length ? call.operations : storedOperations(call);
}

/**
 * The operations a stored tool call sent when it ran (`data-operation`), as
 * far as an older log keeps what they said: before operations were stored,
 * the call (its name and arguments) and its result's preview were, and the server
 * derives each operation from those (`shared::tools`). The action and kind
 * always follow from the call; the name comes from the arguments for creates,
 * lists and searches (as the server names them), else from the result's
 * preview (`title` or `name` of the entity read or written), else the id.
 * The status: `success`, `error` when the result is an error, `start` when
 * the result is missing (the turn ended during the call). One operation per
 * call: the settled one the live feed shows. A calendar write's sentence
 * (`summary`: "Scheduled Design review for …") is its result's `done`; a
 * web step's is rebuilt from its arguments ("Read example.org/pricing").
 */
export function storedOperations(call: ToolCallView): OperationData[] {
  const args = parseArgs(call.arguments);
  const a = (args && typeof args === 'object' ? args : {}) as Record<string, unknown>;
  const str = (k: string) => (typeof a[k] === 'string' ? (a[k] as string) : undefined);
  const kind = str('kind');
  const preview = call.result_preview;
  const failed = preview != null && /^\{"error":/.test(preview);
  if (failed && REFUSED.has(/^\{"error":\{"code":"([^"]*)"/.exec(preview)?.[1] ?? '')) return [];
  // The calendar reads' days: a named range (`this_week`) or `from – to`, as the server words it.
  const days = () => str('range') ?? `${str('from') ?? ''} – ${str('to') ?? ''}`;
  const named = (fallback: string | undefined) => (preview && !failed ? nameIn(preview) : undefined) ?? fallback ?? '';

  let op: [OperationAction, string, string, string?] | undefined;
  const create = /^create_(document|task|goal|plan|milestone|risk|requirement)$/.exec(call.name);
  if (create) op = ['create', create[1], str('title') ?? str('name') ?? ''];
  else
    switch (call.name) {
      case 'create_project':
      case 'create_onto_project':
        op = ['create', 'project', str('name') ?? ''];
        break;
      case 'list_projects':
        op = ['list', 'project', 'projects'];
        break;
      case 'search_workspace':
      case 'search_project':
        op = ['search', 'project', `“${str('query') ?? ''}”`];
        break;
      case 'get_project':
        op = ['read', 'project', named(str('project_id')), str('project_id')];
        break;
      case 'update_project':
        op = ['update', 'project', named(str('project_id')), str('project_id')];
        break;
      case 'list_entities':
        if (kind && KINDS.includes(kind)) op = ['list', kind, `${kind}s`];
        break;
      case 'get_entity':
        if (kind) op = ['read', kind, named(str('id')), str('id')];
        break;
      case 'read_document':
        op = ['read', 'document', named(str('document_id')), str('document_id')];
        break;
      case 'update_entity':
        if (kind) op = ['update', kind, named(str('id')), str('id')];
        break;
      case 'delete_entity':
        if (kind) op = ['delete', kind, named(str('id')), str('id')];
        break;
      case 'move_document':
        op = ['update', 'document', named(str('document_id')), str('document_id')];
        break;
      case 'link_entities':
      case 'unlink_entities': {
        const relation = (str('relation') ?? '').replace(/_/g, ' ');
        if (str('from_kind')) op = ['update', str('from_kind')!, `${str('from_id')} ${relation} ${str('to_id')}`, str('from_id')];
        break;
      }
      case 'create_calendar_event':
        op = ['create', 'calendar_event', str('title') ?? ''];
        break;
      case 'update_calendar_event':
        op = ['update', 'calendar_event', named(str('event_id')), str('event_id')];
        break;
      case 'delete_calendar_event':
        op = ['delete', 'calendar_event', named(str('event_id')), str('event_id')];
        break;
      case 'list_calendar_events':
        op = ['list', 'calendar_event', `calendar ${days()}`];
        break;
      case 'find_free_time':
        op = ['search', 'calendar_event', `free ${String(a.duration_minutes ?? 30)} min, ${days()}`];
        break;
      case 'web_visit':
        op = ['read', 'web_page', displayUrl(str('url') ?? '')];
        break;
      case 'web_search':
        op = ['search', 'web', `“${(str('query') ?? '').trim()}”`];
        break;
      case 'get_document_metadata': {
        const ids = Array.isArray(a.document_ids) ? a.document_ids : [];
        const titles = preview && !failed ? namesIn(preview) : [];
        op = ['read', 'document', titles.length ? titles.join(', ') : `${ids.length} documents`];
        break;
      }
    }
  if (!op) return []; // the calls that send no operation (questions, edges, the doc tree, plans)
  const [action, entity_type, entity_name, entity_id] = op;
  const status = preview == null ? 'start' : failed ? 'error' : 'success';
  const summary =
    status === 'success' && entity_type === 'calendar_event' ? doneIn(preview!) : webSentence(entity_type, entity_name);
  return [{ action, entity_type, entity_name, status, ...(entity_id ? { entity_id } : {}), ...(summary ? { summary } : {}) }];
}

/** A web step's sentence, as the server words it (shared/src/tools/web.rs). */
function webSentence(entityType: string, name: string): string | undefined {
  if (entityType === 'web_page') return `Read ${name}`;
  if (entityType === 'web') return `Searched the web for ${name}`;
  return undefined;
}

/** A URL as a sentence shows it: host (no `www.`) and path, no scheme or query (`display_url`). */
function displayUrl(raw: string): string {
  try {
    const u = new URL(raw.trim());
    const shown = u.hostname.replace(/^www\./, '') + u.pathname.replace(/\/+$/, '');
    return shown.length > 80 ? `${shown.slice(0, 79)}…` : shown;
  } catch {
    return raw.slice(0, 80);
  }
}

/** A calendar write's sentence: its result's `done` (JSON, possibly cut short). */
function doneIn(preview: string): string | undefined {
  const m = /"done":("(?:[^"\\]|\\.)*")/.exec(preview);
  return m ? (JSON.parse(m[1]) as string) : undefined;
}

const NAME = /"(?:title|name)":("(?:[^"\\]|\\.)*")/g;

/** Every `title` or `name` string in `preview` (JSON, possibly cut short). */
function namesIn(preview: string): string[] {
  return [...preview.matchAll(NAME)].map((m) => JSON.parse(m[1]) as string);
}

function nameIn(preview: string): string | undefined {
  return namesIn(preview)[0];
}
