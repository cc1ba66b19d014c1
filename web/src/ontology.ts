/**
 * The ontology panel's state: one project's document tree (in `order`) with
 * each document's title, loaded from the entities API and then kept current
 * by the `entity_patch` events a turn sends (`data-entity-patch` parts).
 */
import type { Api } from './api/client';
import type { DocNode, EntityPatch, Record as EntityRecord } from './api/types.gen';

export interface Ontology {
  projectId: string;
  projectName: string;
  /** The project version the tree and titles reflect. */
  version: number;
  tree: DocNode[];
  titles: { [id: string]: string };
}

export async function loadOntology(api: Api, projectId: string, projectName: string): Promise<Ontology> {
  const [structure, docs] = await Promise.all([api.docStructure(projectId), api.documents(projectId)]);
  const titles: Ontology['titles'] = {};
  for (const d of docs) if (d.kind === 'document') titles[d.id] = d.fields.title;
  return { projectId, projectName, version: structure.version, tree: structure.root, titles };
}

/**
 * `patch` applied: the backend's truth after a write. A patch of another
 * project, or one this state already reflects (a resumed stream replays the
 * turn's patches), changes nothing.
 */
export function applyPatch(o: Ontology, patch: EntityPatch): Ontology {
  if (patch.project_id !== o.projectId || patch.version <= o.version) return o;
  const titles = { ...o.titles };
  for (const c of patch.changes) {
    if ((c.op === 'created' || c.op === 'updated') && c.kind === 'document') {
      const title = documentTitle(c.entity);
      if (title !== undefined) titles[c.id] = title;
    } else if (c.op === 'deleted' && c.kind === 'document') {
      delete titles[c.id];
    }
  }
  return { ...o, version: patch.version, tree: patch.doc_structure?.root ?? o.tree, titles };
}

function documentTitle(r: EntityRecord): string | undefined {
  return 'kind' in r && r.kind === 'document' ? r.fields.title : undefined;
}

/** The tree's nodes in `order` at every level (the API sends them so; this keeps it true). */
export function sorted(nodes: DocNode[]): DocNode[] {
  return [...nodes].sort((a, b) => a.order - b.order);
}
