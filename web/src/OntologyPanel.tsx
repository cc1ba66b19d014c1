/** The project's document tree (in `order`) and the current turn's operations. */
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

export function OntologyPanel({ ontology, operations }: { ontology: Ontology | null; operations: OperationData[] }) {
  return (
    <aside className="ontology">
      <h2>{ontology ? ontology.projectName : 'No project'}</h2>
      {ontology && (
        <div data-testid="tree" data-version={ontology.version}>
          <Tree nodes={ontology.tree} titles={ontology.titles} />
        </div>
      )}
      <h2>Operations</h2>
      <ol className="operations" data-testid="operations">
        {operations.map((op, i) => (
          <li key={i} className={op.status} data-testid="operation">
            {describeOperation(op)}
          </li>
        ))}
      </ol>
    </aside>
  );
}
