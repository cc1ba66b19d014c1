/** One UI message: its text, tool calls (by name) and operations, in order. */
import type { ChatMessage } from './chat-types';
import { describeOperation, settled } from './operations';

export function Message({ message }: { message: ChatMessage }) {
  const ended = message.metadata?.reason;
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
          const p = part as { toolName?: string; type: string; state?: string };
          const name = (p.toolName ?? p.type.slice('tool-'.length)).replace(/_/g, ' ');
          return (
            <p key={i} className="tool" data-testid="tool" data-state={p.state}>
              ⚙ {name}
              {p.state === 'output-error' ? ' (failed)' : ''}
            </p>
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
        <p className="ended">({ended === 'stopped' ? 'stopped' : 'ended with an error'})</p>
      )}
    </article>
  );
}
