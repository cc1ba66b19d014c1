/** One UI message: its text, tool calls (by name) and operations, in order. */
import type { ChatMessage } from './chat-types';
import { describeOperation, settled } from './operations';

/** Answers a waiting call (`addToolApprovalResponse`). */
export type OnApproval = (approvalId: string, approved: boolean) => void;

export function Message({ message, onApproval }: { message: ChatMessage; onApproval?: OnApproval }) {
  const ended = message.metadata?.reason;
  // The operation in human words, per waiting call (`data-approval-required`).
  const asked = new Map(
    message.parts.flatMap((p) => (p.type === 'data-approval-required' ? [[p.data.tool_call_id, p.data.summary] as const] : [])),
  );
  const ops = message.parts.flatMap((p) => (p.type === 'data-operation' ? [p.data] : []));
  const shown = new Set(settled(ops));
  return (
    <article className={`message ${message.role}`} data-testid={`message-${message.role}`}>
      {message.parts.map((part, i) => {
        if (part.type === 'text') {
          return (
            <p key={i} className="text" data-testid="text">
              {part.text}
            </p>
          );
        }
        if (part.type === 'dynamic-tool' || part.type.startsWith('tool-')) {
          const p = part as {
            toolName?: string;
            type: string;
            state?: string;
            toolCallId?: string;
            approval?: { id: string; approved?: boolean };
          };
          const name = (p.toolName ?? p.type.slice('tool-'.length)).replace(/_/g, ' ');
          const summary = p.toolCallId ? asked.get(p.toolCallId) : undefined;
          if (summary || p.approval) {
            return (
              <Approval key={i} summary={summary ?? name} state={p.state} approval={p.approval} onApproval={onApproval} />
            );
          }
          return (
            <p key={i} className="tool" data-testid="tool" data-state={p.state}>
              ⚙ {name}
              {p.state === 'output-error' ? ' (failed)' : ''}
            </p>
          );
        }
        if (part.type === 'data-answer-check') {
          // The answer's word against the turn's steps (docs/events.md, `answer_check`).
          return (
            <div key={i} className={`answer-check ${part.data.verdict}`} data-testid="answer-check">
              <p>
                {part.data.verdict !== 'asked_again'
                  ? '⚠ Correction:'
                  : part.data.mismatches.some((m) => m.kind === 'no_answer')
                    ? '⚠ The answer above did not answer; asked again:'
                    : part.data.mismatches.some((m) => m.kind === 'left_out')
                      ? '⚠ The answer above left out what the calendar shows; asked again:'
                      : '⚠ The answer above claimed what no tool did; asked again:'}
              </p>
              {part.data.mismatches.map((m, j) => (
                <p key={j} className="note">
                  {m.note}
                </p>
              ))}
            </div>
          );
        }
        if (part.type === 'data-operation' && shown.has(part.data)) {
          return (
            <p key={i} className={`operation ${part.data.status}`}>
              {describeOperation(part.data)}
            </p>
          );
        }
        return null;
      })}
      {ended && ended !== 'complete' && (
        <p className="ended">
          ({ended === 'stopped' ? 'stopped' : ended === 'cut_off' ? 'cut off' : 'ended with an error'})
        </p>
      )}
    </article>
  );
}

/**
 * A call that waits for the user's yes: the operation in words with Approve
 * and Deny while it waits; then what the user answered (also after a reload:
 * the stored call keeps its approval and its result).
 */
function Approval({
  summary,
  state,
  approval,
  onApproval,
}: {
  summary: string;
  state?: string;
  approval?: { id: string; approved?: boolean };
  onApproval?: OnApproval;
}) {
  const waiting = state === 'approval-requested' && approval;
  const answer =
    state === 'output-denied' || approval?.approved === false
      ? 'denied'
      : state === 'output-available' || state === 'output-error' || approval?.approved
        ? 'approved'
        : undefined;
  return (
    <div className="approval" data-testid="approval" data-state={waiting ? 'waiting' : (answer ?? 'waiting')}>
      <p className="summary">{summary}</p>
      {waiting ? (
        <p className="answer">
          <button type="button" data-testid="approve" onClick={() => onApproval?.(approval.id, true)}>
            Approve
          </button>
          <button type="button" data-testid="deny" onClick={() => onApproval?.(approval.id, false)}>
            Deny
          </button>
        </p>
      ) : (
        <p className="answer" data-testid="approval-answer">
          {answer === 'denied' ? '✗ Denied' : '✓ Approved'}
          {state === 'approval-responded' ? '…' : ''}
        </p>
      )}
    </div>
  );
}
