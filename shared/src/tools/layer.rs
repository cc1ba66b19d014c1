//! The registry as a tool layer of the model loop ([`crate::model_loop::TurnTools`]): the
//! turn's scope (context type, entity, focus) becomes a [`ToolScope`], and an
//! outcome becomes the tool message, the preview and the events to stream.

use super::{ToolContext, ToolRegistry, ToolScope};
use crate::ids::UserId;
use crate::message::ToolCall;
use crate::model_loop::{ToolRun, TurnScope, TurnTools};

fn scope(s: &TurnScope) -> ToolScope {
    ToolScope::from_focus(s.context_type, s.entity_id.as_deref(), s.focus.as_ref())
}

#[async_trait::async_trait]
impl TurnTools for ToolRegistry {
    fn offered(&self, s: &TurnScope) -> Vec<serde_json::Value> {
        let offered = scope(s).offered_in(s.context_type).into_iter();
        offered.filter(|t| self.has(*t)).map(super::ToolName::definition).collect()
    }

    fn per_turn_cap(&self, name: &str) -> Option<usize> {
        ToolRegistry::per_turn_cap(self, name)
    }

    async fn run(&self, user: &UserId, s: &TurnScope, call: &ToolCall) -> ToolRun {
        let ctx = ToolContext { user: user.clone(), scope: scope(s), zone: s.timezone };
        let outcome = self.execute(&ctx, call).await;
        let events = outcome.events();
        ToolRun { ok: outcome.ok, content: outcome.content, preview: outcome.preview, events }
    }
}
