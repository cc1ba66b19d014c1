//! html5ever's tree builder writing into a `dom_query::Document` (as
//! dom_query's own `Document::from` does), with a [`Tally`] of the elements
//! made, how deep they sit, and the attributes merged into `<html>`/`<body>`.
//!
//! Why a wrapper: html5ever's tree builder walks its stack of open elements
//! for nearly every tag, so 100,000 nested `<div>`s cost 50 s of CPU in the
//! parser alone; and dom_smoothie's own element limit is checked only after
//! the whole tree was built. [`super::page`] feeds the parser in chunks and
//! reads the tally between them, so a page over the budget stops being parsed
//! a chunk after it went over. The tally is a running estimate (a subtree
//! that the adoption agency moves is not re-measured); the finished tree is
//! measured exactly before readability runs.

use dom_query::{Document, NodeId};
use html5ever::tree_builder::{ElementFlags, NodeOrText, QuirksMode, TreeSink};
use html5ever::{tendril::StrTendril, Attribute, QualName};
use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

/// What the parser built so far.
#[derive(Debug, Default)]
pub struct Tally {
    pub elements: Cell<usize>,
    pub deepest: Cell<u32>,
    /// The sum of every element's depth: readability's work grows with it.
    pub weight: Cell<u64>,
    /// Attributes merged into an existing `<html>` or `<body>` by repeated tags.
    pub merged_attributes: Cell<usize>,
}

/// The sink: dom_query's, plus the tally and each node's depth.
pub struct Counted {
    doc: Document,
    /// Each element's depth (the document is 0, `<html>` 1).
    depth: RefCell<HashMap<NodeId, u32>>,
    tally: Rc<Tally>,
    /// Merged attributes past this are dropped (they would only be refused).
    max_merged: usize,
}

impl Counted {
    pub fn new(tally: Rc<Tally>, max_merged: usize) -> Counted {
        Counted { doc: Document::default(), depth: RefCell::default(), tally, max_merged }
    }

    fn depth_of(&self, node: &NodeId) -> u32 {
        self.depth.borrow().get(node).copied().unwrap_or(0)
    }

    /// `child` now sits at `depth` (only elements are in the depth table).
    fn placed(&self, child: &NodeOrText<NodeId>, depth: u32) {
        if let NodeOrText::AppendNode(id) = child {
            if let Some(d) = self.depth.borrow_mut().get_mut(id) {
                *d = depth;
                let t = &self.tally;
                t.deepest.set(t.deepest.get().max(depth));
                t.weight.set(t.weight.get() + u64::from(depth));
            }
        }
    }
}

impl TreeSink for Counted {
    type Handle = NodeId;
    type Output = Document;
    type ElemName<'a> = <Document as TreeSink>::ElemName<'a>;

    fn finish(self) -> Document {
        self.doc
    }
    fn parse_error(&self, msg: Cow<'static, str>) {
        self.doc.parse_error(msg)
    }
    fn get_document(&self) -> NodeId {
        self.doc.get_document()
    }
    fn elem_name<'a>(&'a self, target: &'a NodeId) -> Self::ElemName<'a> {
        self.doc.elem_name(target)
    }
    fn create_element(&self, name: QualName, attrs: Vec<Attribute>, flags: ElementFlags) -> NodeId {
        self.tally.elements.set(self.tally.elements.get() + 1);
        let id = self.doc.create_element(name, attrs, flags);
        self.depth.borrow_mut().insert(id, 0);
        id
    }
    fn create_comment(&self, text: StrTendril) -> NodeId {
        self.doc.create_comment(text)
    }
    fn create_pi(&self, target: StrTendril, data: StrTendril) -> NodeId {
        self.doc.create_pi(target, data)
    }
    fn append(&self, parent: &NodeId, child: NodeOrText<NodeId>) {
        self.placed(&child, self.depth_of(parent) + 1);
        self.doc.append(parent, child)
    }
    fn append_based_on_parent_node(&self, element: &NodeId, prev: &NodeId, child: NodeOrText<NodeId>) {
        self.placed(&child, self.depth_of(element).max(self.depth_of(prev) + 1));
        self.doc.append_based_on_parent_node(element, prev, child)
    }
    fn append_doctype_to_document(&self, name: StrTendril, public_id: StrTendril, system_id: StrTendril) {
        self.doc.append_doctype_to_document(name, public_id, system_id)
    }
    fn mark_script_already_started(&self, node: &NodeId) {
        self.doc.mark_script_already_started(node)
    }
    fn pop(&self, node: &NodeId) {
        self.doc.pop(node)
    }
    fn get_template_contents(&self, target: &NodeId) -> NodeId {
        self.doc.get_template_contents(target)
    }
    fn same_node(&self, x: &NodeId, y: &NodeId) -> bool {
        self.doc.same_node(x, y)
    }
    fn set_quirks_mode(&self, mode: QuirksMode) {
        self.doc.set_quirks_mode(mode)
    }
    fn append_before_sibling(&self, sibling: &NodeId, new_node: NodeOrText<NodeId>) {
        self.placed(&new_node, self.depth_of(sibling));
        self.doc.append_before_sibling(sibling, new_node)
    }
    fn add_attrs_if_missing(&self, target: &NodeId, attrs: Vec<Attribute>) {
        // Each merge compares against every attribute already there: quadratic
        // over many repeated `<body a b c …>` tags, so past the budget none are merged.
        let merged = self.tally.merged_attributes.get() + attrs.len();
        self.tally.merged_attributes.set(merged);
        if merged <= self.max_merged {
            self.doc.add_attrs_if_missing(target, attrs)
        }
    }
    fn associate_with_form(&self, target: &NodeId, form: &NodeId, nodes: (&NodeId, Option<&NodeId>)) {
        self.doc.associate_with_form(target, form, nodes)
    }
    fn remove_from_parent(&self, target: &NodeId) {
        self.doc.remove_from_parent(target)
    }
    fn reparent_children(&self, node: &NodeId, new_parent: &NodeId) {
        self.doc.reparent_children(node, new_parent)
    }
    fn is_mathml_annotation_xml_integration_point(&self, handle: &NodeId) -> bool {
        self.doc.is_mathml_annotation_xml_integration_point(handle)
    }
    fn set_current_line(&self, line: u64) {
        self.doc.set_current_line(line)
    }
    fn allow_declarative_shadow_roots(&self, intended_parent: &NodeId) -> bool {
        self.doc.allow_declarative_shadow_roots(intended_parent)
    }
    fn attach_declarative_shadow(&self, location: &NodeId, template: &NodeId, attrs: &[Attribute]) -> bool {
        self.doc.attach_declarative_shadow(location, template, attrs)
    }
    fn maybe_clone_an_option_into_selectedcontent(&self, option: &NodeId) {
        self.doc.maybe_clone_an_option_into_selectedcontent(option)
    }
}
