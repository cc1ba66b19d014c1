//! `brain_dump`: loose text turned into proposed entities, reviewed as one
//! batch (issue 44).
//!
//! The block gives the model what a proposal needs: the focused project and
//! what already exists in it (to link to, and not to propose twice), and
//! the notes of the turn's voice-note group (`voice_note_group_id`: the
//! user's earlier messages of the same group, oldest first, filled in at
//! turn time by [`with_notes`]). The proposals themselves go through the
//! `propose_entities` tool, which always waits for the user's yes: nothing
//! is written before it (`tools::proposals`).

use super::{all_of, named, Lines, Sources};
use crate::entities::EntityKind;
use crate::ids::{ProjectId, UserId};
use crate::message::{Role, StoredMessage};
use serde::{Deserialize, Serialize};

/// Characters of one note kept in the block.
pub const NOTE_CHARS: usize = 2_000;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DumpBlock {
    /// `“Launch”: id …`; absent in the workspace (no proposals can be made there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// What the project already has, one line per entity.
    pub existing: Vec<String>,
    /// The voice-note group's notes, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    #[serde(default)]
    pub left_out: usize,
}

impl Lines for DumpBlock {
    fn lists(&mut self) -> Vec<&mut Vec<String>> {
        vec![&mut self.existing, &mut self.notes]
    }
    fn left_out(&mut self) -> &mut usize {
        &mut self.left_out
    }
}

pub async fn build(src: &Sources<'_>, user: &UserId, project: Option<&ProjectId>) -> DumpBlock {
    let Some(project) = project else { return DumpBlock::default() };
    let svc = src.entities;
    let (p, lists) = tokio::join!(
        svc.get_project(user, project),
        futures::future::join_all(EntityKind::ALL.map(|k| all_of(svc, user, project, k)))
    );
    let Ok(p) = p else { return DumpBlock::default() };
    DumpBlock {
        project: Some(format!("“{}”: id {}", p.name, p.id)),
        existing: lists.iter().flatten().map(named).collect(),
        notes: vec![],
        left_out: 0,
    }
}

/// The block with the notes of `current`'s voice-note group: the user
/// messages of `history` in the same group, then `current`'s own text.
/// Without a group, the block is unchanged (the message is the dump).
pub fn with_notes(mut block: DumpBlock, history: &[StoredMessage], current: &StoredMessage) -> DumpBlock {
    let Some(group) = current.voice_note_group_id.as_deref() else { return block };
    let same = |m: &&StoredMessage| m.role == Role::User && m.voice_note_group_id.as_deref() == Some(group);
    block.notes = history
        .iter()
        .filter(|m| m.seq < current.seq)
        .chain(std::iter::once(current))
        .filter(same)
        .filter_map(|m| m.content.as_deref())
        .map(|c| c.chars().take(NOTE_CHARS).collect())
        .collect();
    block
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{entity, project, sources};
    use super::*;
    use crate::context::modes::{build_block, Mode, ModeBlock};
    use crate::ids::{SessionId, TurnId};
    use crate::tools::ToolScope;
    use serde_json::json;

    #[tokio::test]
    async fn the_dump_names_what_exists_and_gathers_the_voice_notes() {
        let (svc, u, p) = project().await;
        let t = entity(&svc, &u, &p, EntityKind::Task, json!({"title": "Book the venue"})).await;
        let src = sources(&svc, chrono::Utc::now());
        let Some(ModeBlock::Dump(b)) =
            build_block(&src, &u, Mode::Dump, &ToolScope::Project { project: p.clone() }).await
        else {
            panic!("a dump block")
        };
        assert_eq!(b.project, Some(format!("“Launch”: id {p}")));
        assert!(b.existing.contains(&format!("task “Book the venue”: id {t}")), "{:?}", b.existing);
        let session = SessionId::parse("019a0000-0000-7000-8000-000000000000").unwrap();
        let msg = |seq, text: &str, group: Option<&str>| {
            let mut m = StoredMessage::new(session.clone(), seq, TurnId::new(), Role::User, Some(text.into()));
            m.voice_note_group_id = group.map(str::to_string);
            m
        };
        let history =
            [msg(1, "first note: call the caterer", Some("vg")), msg(2, "unrelated", None), msg(3, "other", Some("x"))];
        let b = with_notes(b, &history, &msg(4, "and order flyers", Some("vg")));
        assert_eq!(b.notes, ["first note: call the caterer", "and order flyers"]);
        let g = build_block(&src, &u, Mode::Dump, &ToolScope::Global).await;
        assert_eq!(g, Some(ModeBlock::Dump(DumpBlock::default())), "no project: nothing to propose into");
    }
}
