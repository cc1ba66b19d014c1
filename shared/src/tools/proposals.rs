//! `propose_entities` (brain dump, issue 44): a batch of new entities and
//! the links between them, proposed in one call and reviewed once.
//!
//! - the approval policy always makes this call wait for the user's yes
//!   (`approval::policy`): nothing is written before it, and the question
//!   lists the whole batch;
//! - approved, every part is checked before anything is written (fields by
//!   their kind's rules, refs unique, parents and link ends known, relations
//!   well formed); a refused batch writes nothing;
//! - then the entities are created in order (a document's parent is an
//!   earlier document of the batch or an existing one), then the links.
//!   A store failure part-way stops there: the result names what was
//!   created and what was not.

use super::call::{entity_id, without_nulls, Call};
use super::outcome::{Done, Op, Refusal};
use super::{Tool, ToolName};
use crate::entities::rules::check_relation;
use crate::entities::service::validate_fields;
use crate::entities::{CreateEntity, Edge, EdgeEnd, EntityError, EntityFields, EntityKind};
use crate::ids::EntityId;
use crate::sse::OperationAction;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use utoipa::ToSchema;

/// Entities one batch may propose.
pub const MAX_PROPOSALS: usize = 30;
/// Links one batch may propose.
pub const MAX_PROPOSED_LINKS: usize = 60;

#[allow(non_upper_case_globals)]
impl ToolName {
    pub const ProposeEntities: ToolName = ToolName::of(&ProposeEntities);
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProposeEntitiesArgs {
    /// The entities to create, in order (1 to 30).
    pub entities: Vec<Proposal>,
    /// Links to create once the entities exist.
    #[serde(default)]
    pub links: Vec<ProposedLink>,
}

/// One proposed entity: its title, and what the user said of it. The
/// schema the model reads has no free-form `fields` (still taken, for the
/// kind's other fields): given one, the local model filled a task's `state`
/// with "pending" and a `due_at` nobody said, and the batch was refused.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Proposal {
    /// A short name for it, unique in the batch (`t1`), for links and parents.
    #[serde(rename = "ref")]
    pub reference: String,
    pub kind: EntityKind,
    /// Its title (a goal's or plan's name), in the user's words.
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    /// Tasks and milestones: when it is due, as a date text (2026-12-10);
    /// only a date the user gave.
    #[serde(default)]
    pub due: Option<String>,
    /// The kind's fields as its create tool takes them (title or name,
    /// description, state, priority, due_at as a date text).
    #[serde(default)]
    #[schema(ignore)]
    pub fields: Map<String, Value>,
    /// Documents only: the content.
    #[serde(default)]
    pub content: Option<String>,
    /// Documents only: the parent, a ref of an earlier document of the batch
    /// or an existing document's id; the tree's root when absent.
    #[serde(default)]
    pub parent: Option<String>,
}

impl Proposal {
    /// Its fields: `fields`, with `title`, `description` and `due` in the
    /// kind's own names; `null`s left out.
    fn all_fields(&self) -> Map<String, Value> {
        let mut f = without_nulls(&self.fields);
        let name = match self.kind {
            EntityKind::Goal | EntityKind::Plan => "name",
            _ => "title",
        };
        let said = [
            (Some(name), &self.title),
            (Some("description"), &self.description),
            (super::entities::date_fields(self.kind).first().copied(), &self.due),
        ];
        for (key, value) in said {
            if let (Some(key), Some(v)) = (key, value) {
                f.insert(key.to_string(), Value::String(v.clone()));
            }
        }
        f
    }
}

/// `p`'s parent, unless it names the project itself.
fn parent_of<'p>(p: &'p Proposal, project: &str) -> Option<&'p str> {
    p.parent.as_deref().map(str::trim).filter(|r| *r != project)
}

/// A link between two entities, each a ref of the batch or an existing id.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProposedLink {
    pub from: String,
    /// `supports`, `blocks`, `mitigates`, ...
    pub relation: String,
    pub to: String,
}

pub struct ProposeEntities;

/// An end of a link or a parent: made by the batch, or already there.
#[derive(Debug, Clone)]
enum End {
    Batch(usize),
    Existing(EdgeEnd),
}

#[async_trait::async_trait]
impl Tool for ProposeEntities {
    type Args = ProposeEntitiesArgs;
    const NAME: &'static str = "propose_entities";
    const DESCRIPTION: &'static str = "Propose a batch of new entities (tasks, goals, plans, milestones, risks, \
        requirements, documents) and links between them, for the user to review: the whole batch waits for \
        their yes, then everything is created at once. Give each a ref; links and parents name refs or \
        existing ids.";
    const NEEDS_PROJECT: bool = true;

    async fn run(&self, c: &Call<'_>, a: ProposeEntitiesArgs) -> Result<Done, Refusal> {
        let project = c.project()?;
        let (news, ends, parents) = check(c, &a).await?;
        let mut done = Done { result: Ok(Value::Null), ops: vec![], patches: vec![], turn_events: vec![] };
        let names: Vec<String> = news.iter().map(|n| n.fields.name().to_string()).collect();
        let mut made: Vec<(EntityKind, EntityId)> = Vec::new();
        for (i, mut new) in news.into_iter().enumerate() {
            new.parent_id = match &parents[i] {
                Some(End::Batch(j)) => Some(made[*j].1.clone()),
                Some(End::Existing(e)) => Some(e.id.clone()),
                None => None,
            };
            let (kind, name) = (new.fields.kind(), new.fields.name().to_string());
            match c.svc.create(c.user, project, new).await {
                Ok(w) => {
                    let op = Op {
                        action: OperationAction::Create,
                        entity_type: kind.as_str(),
                        name,
                        id: Some(w.data.id.to_string()),
                    };
                    done.ops.push((op, true));
                    done.patches.push(w.patch);
                    made.push((kind, w.data.id));
                }
                Err(e) => return Ok(partial(done, &a, &made, 0, e)),
            }
        }
        let end = |e: &End| match e {
            End::Batch(j) => EdgeEnd { kind: made[*j].0, id: made[*j].1.clone() },
            End::Existing(e) => e.clone(),
        };
        for (n, (l, (from, to))) in a.links.iter().zip(&ends).enumerate() {
            let edge = Edge { from: end(from), relation: l.relation.clone(), to: end(to) };
            let (f, t) = futures::join!(end_name(c, &names, from, &edge.from), end_name(c, &names, to, &edge.to));
            let op = Op {
                action: OperationAction::Update,
                entity_type: edge.from.kind.as_str(),
                name: format!("{f} {} {t}", l.relation.replace('_', " ")),
                id: Some(edge.from.id.to_string()),
            };
            match c.svc.link(c.user, project, edge).await {
                Ok(w) => {
                    done.ops.push((op, true));
                    done.patches.push(w.patch);
                }
                Err(e) => return Ok(partial(done, &a, &made, n, e)),
            }
        }
        done.result = Ok(json!({"created": created(&a, &made), "linked": a.links.len()}));
        Ok(done)
    }
}

/// How a link's step names an end: the batch's own name, or the entity's.
async fn end_name(c: &Call<'_>, names: &[String], e: &End, edge_end: &EdgeEnd) -> String {
    match (e, c.scope.project()) {
        (End::Batch(j), _) => names[*j].clone(),
        (End::Existing(_), Some(p)) => c.name_of(p, edge_end.kind, &edge_end.id).await,
        (End::Existing(_), None) => edge_end.id.to_string(),
    }
}

/// What was created, by ref.
fn created(a: &ProposeEntitiesArgs, made: &[(EntityKind, EntityId)]) -> Vec<Value> {
    a.entities.iter().zip(made).map(|(p, (k, id))| json!({"ref": p.reference, "kind": k, "id": id})).collect()
}

/// A batch a store failure stopped: what was made, and what was not.
fn partial(
    mut done: Done,
    a: &ProposeEntitiesArgs,
    made: &[(EntityKind, EntityId)],
    links: usize,
    e: EntityError,
) -> Done {
    let not_created: Vec<&str> = a.entities[made.len()..].iter().map(|p| p.reference.as_str()).collect();
    let (code, message) = super::outcome::entity_failure(&e);
    done.result = Ok(json!({
        "created": created(a, made),
        "linked": links,
        "stopped": {"code": code, "message": message},
        "not_created": not_created,
        "links_not_made": a.links.len() - links,
    }));
    done
}

/// The checked batch: each entity's create (parents still to resolve), the
/// links' ends, each entity's parent. Refused whole on the first problem.
async fn check(
    c: &Call<'_>,
    a: &ProposeEntitiesArgs,
) -> Result<(Vec<CreateEntity>, Vec<(End, End)>, Vec<Option<End>>), Refusal> {
    let bad = |m: String| Refusal::Args(m);
    if a.entities.is_empty() || a.entities.len() > MAX_PROPOSALS {
        return Err(bad(format!("entities: 1 to {MAX_PROPOSALS} proposals")));
    }
    if a.links.len() > MAX_PROPOSED_LINKS {
        return Err(bad(format!("links: at most {MAX_PROPOSED_LINKS}")));
    }
    // A parent naming the project itself is no parent: the local model gave
    // each task of a brain dump the project's id as its parent.
    let project = c.project()?.to_string();
    let mut refs: HashMap<&str, usize> = HashMap::new();
    let mut news = Vec::with_capacity(a.entities.len());
    for (i, p) in a.entities.iter().enumerate() {
        let r = p.reference.trim();
        if r.is_empty() || refs.insert(r, i).is_some() {
            return Err(bad(format!("entities[{i}]: ref {:?} is empty or used twice", p.reference)));
        }
        // Dates as the create tools take them (text in the user's zone, not
        // in the past): the local model wrote `due_at: "2023-04-15T12:00:00Z"`
        // into a brain dump, was told "expected an integer" and wrote a
        // lesson on epoch milliseconds instead of the batch.
        let mut raw = p.all_fields();
        super::dates::read(&mut raw, super::entities::date_fields(p.kind), c.zone_or_utc(), crate::now_ms()).map_err(
            |e| match e {
                Refusal::Args(m) => bad(format!("entities[{i}] ({r}): {m}")),
                other => other,
            },
        )?;
        let fields = EntityFields::from_object(p.kind, raw).map_err(|e| bad(format!("entities[{i}] ({r}): {e}")))?;
        validate_fields(&fields).map_err(|e| bad(format!("entities[{i}] ({r}): {e}")))?;
        if p.kind != EntityKind::Document && (p.content.is_some() || parent_of(p, &project).is_some()) {
            return Err(bad(format!("entities[{i}] ({r}): only documents take content and parent")));
        }
        let content = (p.kind == EntityKind::Document).then(|| p.content.clone().unwrap_or_default());
        news.push(CreateEntity { content, ..CreateEntity::new(fields) });
    }
    let mut parents = Vec::with_capacity(a.entities.len());
    for (i, p) in a.entities.iter().enumerate() {
        parents.push(match parent_of(p, &project) {
            None => None,
            Some(r) => match refs.get(r.trim()) {
                Some(&j) if j < i && a.entities[j].kind == EntityKind::Document => Some(End::Batch(j)),
                Some(_) => return Err(bad(format!("entities[{i}]: parent {r:?} is not an earlier document"))),
                None => Some(existing(c, r, Some(EntityKind::Document)).await?),
            },
        });
    }
    let mut ends = Vec::with_capacity(a.links.len());
    for (n, l) in a.links.iter().enumerate() {
        check_relation(&l.relation).map_err(|e| bad(format!("links[{n}]: {e}")))?;
        let from = link_end(c, &refs, &l.from, n).await?;
        let to = link_end(c, &refs, &l.to, n).await?;
        ends.push((from, to));
    }
    Ok((news, ends, parents))
}

/// The end of link `n`: a ref of the batch, else an existing entity.
async fn link_end(c: &Call<'_>, refs: &HashMap<&str, usize>, s: &str, n: usize) -> Result<End, Refusal> {
    match refs.get(s.trim()) {
        Some(&j) => Ok(End::Batch(j)),
        None => existing(c, s, None).await.map_err(|e| match e {
            Refusal::Args(m) => Refusal::Args(format!("links[{n}]: {m}")),
            e => e,
        }),
    }
}

/// An existing entity of the project named by id (of `kind` when given):
/// its kind is found by reading it.
async fn existing(c: &Call<'_>, s: &str, kind: Option<EntityKind>) -> Result<End, Refusal> {
    let id = entity_id("id", s.trim())
        .map_err(|_| Refusal::Args(format!("{s:?} is neither a ref of this batch nor an id")))?;
    let project = c.project()?;
    let kinds: Vec<EntityKind> = kind.map_or(EntityKind::ALL.to_vec(), |k| vec![k]);
    let found = futures::future::join_all(kinds.iter().map(|k| c.svc.get(c.user, project, *k, &id))).await;
    match kinds.into_iter().zip(found).find(|(_, r)| r.is_ok()) {
        Some((kind, _)) => Ok(End::Existing(EdgeEnd { kind, id })),
        None => Err(Refusal::Args(format!("{s:?} is neither a ref of this batch nor an entity of this project"))),
    }
}

/// The question the approval shows: every proposed entity, then the links.
pub fn summary(args: &Map<String, Value>) -> Option<String> {
    let a: ProposeEntitiesArgs = serde_json::from_value(Value::Object(args.clone())).ok()?;
    let names: Vec<String> = a
        .entities
        .iter()
        .map(|p| {
            let fields = p.all_fields();
            let name = ["title", "name"].iter().find_map(|k| fields.get(*k).and_then(Value::as_str)).unwrap_or("?");
            format!("{} “{}”", p.kind.as_str(), name)
        })
        .collect();
    let links = match a.links.len() {
        0 => String::new(),
        1 => "; and 1 link".to_string(),
        n => format!("; and {n} links"),
    };
    Some(format!(
        "Create {} entit{}: {}{links}",
        names.len(),
        if names.len() == 1 { "y" } else { "ies" },
        names.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use crate::context::modes::testkit::{entity, project};
    use crate::entities::{EntityKind, EntityService, PageRequest};
    use crate::ids::{ProjectId, UserId};
    use crate::message::{FunctionCall, ToolCall};
    use crate::model_loop::{TurnScope, TurnTools};
    use crate::session::ContextType;
    use crate::tools::{ToolContext, ToolRegistry, ToolScope};
    use serde_json::{json, Value};

    fn call(name: &str, args: Value) -> ToolCall {
        ToolCall {
            id: "c1".into(),
            kind: "function".into(),
            function: FunctionCall { name: name.into(), arguments: args.to_string() },
        }
    }

    async fn count(svc: &EntityService, u: &UserId, p: &ProjectId) -> usize {
        let mut n = 0;
        for k in EntityKind::ALL {
            n += svc.list(u, p, k, PageRequest { limit: Some(100), cursor: None }).await.unwrap().items.len();
        }
        n + svc.edges(u, p, None).await.unwrap().len()
    }

    #[tokio::test]
    async fn an_approved_batch_creates_every_entity_and_link_a_bad_one_nothing() {
        let (svc, u, p) = project().await;
        let venue = entity(&svc, &u, &p, EntityKind::Task, json!({"title": "Book the venue"})).await;
        let reg = ToolRegistry::new(svc.clone());
        let ctx = ToolContext { user: u.clone(), scope: ToolScope::Project { project: p.clone() }, zone: None };
        let before = count(&svc, &u, &p).await;
        // One bad part (a task priority out of range) refuses the whole batch.
        let bad = json!({"entities": [
            {"ref": "g1", "kind": "goal", "fields": {"name": "A good party"}},
            {"ref": "t1", "kind": "task", "fields": {"title": "Call the caterer", "priority": 9}}]});
        let out = reg.execute(&ctx, &call("propose_entities", bad)).await;
        assert!(!out.ok && out.content.contains("entities[1] (t1)"), "{}", out.content);
        // Dates as the create tools take them: a made-up past date, or a number, is refused.
        for due in [json!("2023-04-15T12:00:00Z"), json!(1633072800000i64)] {
            let dated = json!({"entities": [{"ref": "t1", "kind": "task", "fields": {"title": "x", "due_at": due}}]});
            let out = reg.execute(&ctx, &call("propose_entities", dated)).await;
            assert!(!out.ok && out.content.contains("entities[0] (t1): due_at"), "{}", out.content);
        }
        let unknown = json!({"entities": [{"ref": "t1", "kind": "task", "fields": {"title": "x"}}],
            "links": [{"from": "t1", "relation": "supports", "to": "nobody"}]});
        let out = reg.execute(&ctx, &call("propose_entities", unknown)).await;
        assert!(!out.ok && out.content.contains("links[0]"), "{}", out.content);
        assert_eq!(count(&svc, &u, &p).await, before, "a refused batch writes nothing");
        let batch = json!({"entities": [
            {"ref": "g1", "kind": "goal", "title": "A good party"},
            {"ref": "t1", "kind": "task", "title": "Call the caterer", "due": "2099-06-01", "parent": p.to_string()},
            {"ref": "d1", "kind": "document", "fields": {"title": "Party notes"}, "content": "Music, food."},
            {"ref": "d2", "kind": "document", "fields": {"title": "Guest list"}, "parent": "d1"}],
            "links": [{"from": "t1", "relation": "supports", "to": "g1"},
                      {"from": venue.to_string(), "relation": "supports", "to": "g1"}]});
        let out = reg.execute(&ctx, &call("propose_entities", batch)).await;
        assert!(out.ok, "{}", out.content);
        let result: Value = serde_json::from_str(&out.content).unwrap();
        assert_eq!(result["linked"], 2);
        let id = |r: &str| {
            let made = result["created"].as_array().unwrap().iter().find(|c| c["ref"] == r).unwrap();
            crate::ids::EntityId::parse(made["id"].as_str().unwrap()).unwrap()
        };
        assert_eq!(count(&svc, &u, &p).await, before + 4 + 2);
        let task = svc.get(&u, &p, EntityKind::Task, &id("t1")).await.unwrap();
        let due = task.fields.to_object()["due_at"].as_i64();
        assert_eq!(due, Some(4_083_955_200_000), "2099-06-01 read as the day's start in the user's zone (UTC here)");
        let goal_edges = svc.edges(&u, &p, Some(&id("g1"))).await.unwrap();
        assert_eq!(goal_edges.len(), 2, "{goal_edges:?}");
        assert!(goal_edges.iter().any(|e| e.from.id == venue), "linked to what existed");
        let tree = svc.doc_structure(&u, &p).await.unwrap();
        let notes = tree.root.iter().find(|n| n.id == id("d1")).expect("d1 at the root");
        assert_eq!(notes.children.iter().map(|c| c.id.clone()).collect::<Vec<_>>(), [id("d2")]);
        assert_eq!(out.patches.len(), 6, "one patch per write");
    }

    /// The model writes a proposal's title, description and due date as their
    /// own fields; the free-form `fields` are not offered (a small model
    /// filled them with values nobody said).
    #[test]
    fn a_proposal_offers_its_said_fields_only() {
        let schema = crate::tools::ToolName::ProposeEntities.parameters();
        let item = &schema["properties"]["entities"]["items"]["properties"];
        for said in ["title", "description", "due", "kind", "ref"] {
            assert!(item.get(said).is_some(), "{said}: {item}");
        }
        assert!(item.get("fields").is_none(), "{item}");
    }

    #[tokio::test]
    async fn a_brain_dump_refuses_direct_writes() {
        let (svc, u, p) = project().await;
        let reg = ToolRegistry::new(svc.clone());
        let scope = |ct| TurnScope {
            context_type: ct,
            entity_id: None,
            focus: Some(json!({"projectId": p.to_string()})),
            timezone: None,
        };
        let before = count(&svc, &u, &p).await;
        let create = call("create_task", json!({"title": "Call the caterer"}));
        let run = reg.run(&u, &scope(ContextType::BrainDump), &create).await;
        assert!(!run.ok && run.content.contains("out_of_scope"), "{}", run.content);
        assert_eq!(count(&svc, &u, &p).await, before, "nothing written");
        let read = reg.run(&u, &scope(ContextType::BrainDump), &call("list_entities", json!({"kind": "task"}))).await;
        assert!(read.ok, "reads run: {}", read.content);
        assert!(reg.run(&u, &scope(ContextType::Project), &create).await.ok, "elsewhere it runs");
    }
}
