/**
 * The project's document tree (in `order`) and the conversation's operations.
 * The operations list is an empty slot (`feedRef`) the open chat renders its
 * feed into (`OperationsFeed`, through a portal), so the feed is drawn in the
 * same render as the messages it comes from: a copy kept in the page's state
 * and set from an effect would be one more update after every render of a
 * streaming message, and a burst of parts (a replayed turn arrives at once)
 * would exceed React's limit of nested updates (error #185).
 */
import type { ReactNode, Ref } from 'react';
import type { DocNode } from './api/types.gen';
import type { OperationData } from './chat-types';
import { sorted, type Ontology } from './ontology';
import { describeOperation } from './operations';

function Tree({ nodes, titles }: { nodes: DocNode[]; titles: Ontology['titles'] }) {
  return (
    <ul>
      {sorted(nodes).map((n) => (
        <li key={n.id}>
          <span data-testid="doc" data-id={n.id}>
            {titles[n.id] ?? n.id}
          </span>
          {n.children && n.children.length > 0 && <Tree nodes={n.children} titles={titles} />}
        </li>
      ))}
    </ul>
  );
}

export function OntologyPanel({
  ontology,
  showProject,
  feedRef,
  children,
}: {
  ontology: Ontology | null;
  /** False in a calendar chat: it has no project, so no tree is shown. */
  showProject: boolean;
  feedRef: Ref<HTMLOListElement>;
  /** Shown above the project (the agenda, "Ask me first"). */
  children?: ReactNode;
}) {
  return (
    <aside className="ontology">
      {children}
      {showProject && <h2 data-testid="project-name">{ontology ? ontology.projectName : 'No project'}</h2>}
      {showProject && ontology && (
        <div data-testid="tree" data-version={ontology.version}>
          <Tree nodes={ontology.tree} titles={ontology.titles} />
        </div>
      )}
      <h2>Operations</h2>
      <ol className="operations" data-testid="operations" ref={feedRef} />
    </aside>
  );
}

/** The feed's rows: each operation once, settled (`settled`), in order. */
export function OperationsFeed({ operations }: { operations: OperationData[] }) {
  return operations.map((op, i) => (
    <li key={i} className={op.status} data-testid="operation">
      {describeOperation(op)}
    </li>
  ));
}
