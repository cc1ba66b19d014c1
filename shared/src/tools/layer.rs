//! The registry as a tool layer of the model loop ([`crate::model_loop::TurnTools`]): the
//! turn's scope (context type, entity, focus) becomes a [`ToolScope`], and an
//! outcome becomes the tool message, the preview and the events to stream.
//! A call of a tool the turn did not offer (by its context type and focus,
//! as [`ToolScope::offered_in`] says) still runs where the scope allows it,
//! and is logged as a warning; a call of an offered tool logs nothing.
//! One exception: in a brain dump, a write other than `propose_entities`
//! is refused (`out_of_scope`): nothing is written there before the user
//! approves the batch.

use super::{ToolContext, ToolName, ToolRegistry, ToolScope};
use crate::ids::UserId;
use crate::message::ToolCall;
use crate::model_loop::{ToolRun, TurnScope, TurnTools};
use crate::session::ContextType;

fn scope(s: &TurnScope) -> ToolScope {
    ToolScope::from_focus(s.context_type, s.entity_id.as_deref(), s.focus.as_ref())
}

impl ToolRegistry {
    /// The tools a turn in `s` offers: its scope's, those this registry runs.
    fn offered_in_turn(&self, s: &TurnScope) -> Vec<ToolName> {
        scope(s).offered_in(s.context_type).into_iter().filter(|t| self.has(*t)).collect()
    }
}

/// A write a brain dump refuses: every tool that changes something but the batch.
fn writes_outside_batch(t: ToolName) -> bool {
    t != ToolName::ProposeEntities && crate::tools::ASKABLE.contains(&t)
}

#[async_trait::async_trait]
impl TurnTools for ToolRegistry {
    fn offered(&self, s: &TurnScope) -> Vec<serde_json::Value> {
        self.offered_in_turn(s).into_iter().map(ToolName::definition).collect()
    }

    fn per_turn_cap(&self, name: &str) -> Option<usize> {
        ToolRegistry::per_turn_cap(self, name)
    }

    async fn run(&self, user: &UserId, s: &TurnScope, call: &ToolCall) -> ToolRun {
        let ctx = ToolContext { user: user.clone(), scope: scope(s), zone: s.timezone };
        // Judged by the turn's own offer, not the focus alone: the context
        // type decides too (calendar, web, project creation tools).
        let name = call.function.name.as_str();
        if ToolName::parse(name).is_some_and(|t| !self.offered_in_turn(s).contains(&t)) {
            let (context, scope) = (s.context_type.as_str(), ctx.scope.kind());
            tracing::warn!(tool = name, call_id = %call.id, context, scope, "tool called outside the offered set");
        }
        let outcome = match ToolName::parse(name) {
            Some(t) if s.context_type == ContextType::BrainDump && writes_outside_batch(t) => super::outcome::failure(
                "out_of_scope",
                &format!("{name} does not run in a brain dump: propose the batch with propose_entities"),
            ),
            _ => self.execute(&ctx, call).await,
        };
        let events = outcome.events();
        ToolRun { ok: outcome.ok, content: outcome.content, preview: outcome.preview, events }
    }
}
