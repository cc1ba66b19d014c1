//! The document tree (`doc_structure`) as plain functions over its nodes.
//!
//! Invariants every function keeps: each document id appears once; every
//! sibling list has `order` 0, 1, 2, ... in list order (renumbered after each
//! change, so `order` is canonical and never has gaps).

use super::model::DocNode;
use crate::ids::EntityId;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TreeError {
    NotFound,
    ParentNotFound,
    Cycle,
}

fn renumber(nodes: &mut [DocNode]) {
    for (i, n) in nodes.iter_mut().enumerate() {
        n.order = i as u32;
    }
}

pub fn contains(nodes: &[DocNode], id: &EntityId) -> bool {
    find(nodes, id).is_some()
}

pub fn find<'a>(nodes: &'a [DocNode], id: &EntityId) -> Option<&'a DocNode> {
    for n in nodes {
        if &n.id == id {
            return Some(n);
        }
        if let Some(f) = find(&n.children, id) {
            return Some(f);
        }
    }
    None
}

/// The sibling list that holds `parent`'s children (the root for `None`).
fn children_mut<'a>(nodes: &'a mut Vec<DocNode>, parent: Option<&EntityId>) -> Option<&'a mut Vec<DocNode>> {
    match parent {
        None => Some(nodes),
        Some(p) => {
            for n in nodes.iter_mut() {
                if &n.id == p {
                    return Some(&mut n.children);
                }
                if let Some(c) = children_mut(&mut n.children, Some(p)) {
                    return Some(c);
                }
            }
            None
        }
    }
}

/// Inserts `node` under `parent` at `position` (clamped; last when `None`).
pub fn insert(
    nodes: &mut Vec<DocNode>,
    parent: Option<&EntityId>,
    node: DocNode,
    position: Option<u32>,
) -> Result<(), TreeError> {
    let siblings = children_mut(nodes, parent).ok_or(TreeError::ParentNotFound)?;
    let at = position.map(|p| (p as usize).min(siblings.len())).unwrap_or(siblings.len());
    siblings.insert(at, node);
    renumber(siblings);
    Ok(())
}

/// Takes the node (with its subtree) out of the tree.
fn take(nodes: &mut Vec<DocNode>, id: &EntityId) -> Option<(DocNode, usize, Option<EntityId>)> {
    fn go(
        nodes: &mut Vec<DocNode>,
        id: &EntityId,
        parent: Option<&EntityId>,
    ) -> Option<(DocNode, usize, Option<EntityId>)> {
        if let Some(i) = nodes.iter().position(|n| &n.id == id) {
            let n = nodes.remove(i);
            renumber(nodes);
            return Some((n, i, parent.cloned()));
        }
        for n in nodes.iter_mut() {
            let pid = n.id.clone();
            if let Some(found) = go(&mut n.children, id, Some(&pid)) {
                return Some(found);
            }
        }
        None
    }
    go(nodes, id, None)
}

/// Removes a document from the tree. Its children are not orphaned: they take
/// its place, in their order, under its parent.
pub fn remove_promoting_children(nodes: &mut Vec<DocNode>, id: &EntityId) -> Result<(), TreeError> {
    let (node, at, parent) = take(nodes, id).ok_or(TreeError::NotFound)?;
    let siblings = children_mut(nodes, parent.as_ref()).ok_or(TreeError::ParentNotFound)?;
    for (k, child) in node.children.into_iter().enumerate() {
        siblings.insert(at + k, child);
    }
    renumber(siblings);
    Ok(())
}

/// Moves a document with its subtree under `new_parent` (root for `None`) at
/// `position`. Refuses a move under itself or its own descendant.
pub fn move_node(
    nodes: &mut Vec<DocNode>,
    id: &EntityId,
    new_parent: Option<&EntityId>,
    position: Option<u32>,
) -> Result<(), TreeError> {
    let node = find(nodes, id).ok_or(TreeError::NotFound)?;
    if let Some(p) = new_parent {
        if p == id || contains(&node.children, p) {
            return Err(TreeError::Cycle);
        }
        if !contains(nodes, p) {
            return Err(TreeError::ParentNotFound);
        }
    }
    let (node, _, _) = take(nodes, id).ok_or(TreeError::NotFound)?;
    insert(nodes, new_parent, node, position)
}

pub fn leaf(id: EntityId) -> DocNode {
    DocNode { id, order: 0, children: vec![] }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str) -> EntityId {
        EntityId::parse(s).unwrap()
    }

    fn shape(nodes: &[DocNode]) -> String {
        nodes
            .iter()
            .map(|n| {
                if n.children.is_empty() {
                    format!("{}{}", n.id, n.order)
                } else {
                    format!("{}{}({})", n.id, n.order, shape(&n.children))
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn insert_move_remove_keep_orders_canonical() {
        let mut t = vec![];
        insert(&mut t, None, leaf(id("a")), None).unwrap();
        insert(&mut t, None, leaf(id("b")), None).unwrap();
        insert(&mut t, Some(&id("a")), leaf(id("c")), None).unwrap();
        insert(&mut t, Some(&id("a")), leaf(id("d")), Some(0)).unwrap();
        assert_eq!(shape(&t), "a0(d0 c1) b1");
        assert_eq!(insert(&mut t, Some(&id("x")), leaf(id("e")), None), Err(TreeError::ParentNotFound));
        move_node(&mut t, &id("a"), Some(&id("b")), None).unwrap();
        assert_eq!(shape(&t), "b0(a0(d0 c1))");
        assert_eq!(move_node(&mut t, &id("b"), Some(&id("c")), None), Err(TreeError::Cycle));
        assert_eq!(move_node(&mut t, &id("a"), Some(&id("a")), None), Err(TreeError::Cycle));
        move_node(&mut t, &id("c"), Some(&id("a")), Some(0)).unwrap();
        assert_eq!(shape(&t), "b0(a0(c0 d1))");
        remove_promoting_children(&mut t, &id("a")).unwrap();
        assert_eq!(shape(&t), "b0(c0 d1)");
        remove_promoting_children(&mut t, &id("b")).unwrap();
        assert_eq!(shape(&t), "c0 d1");
    }
}
