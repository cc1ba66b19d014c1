//! The state as the model sees it: one compact internal block, never streamed.

use super::{AgentState, ExpectationStatus, ItemStatus};

/// The block never exceeds this many characters.
pub const RENDER_MAX_CHARS: usize = 1200;
const ENTRY_MAX_CHARS: usize = 80;

fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// The last `max` of `entries` (the most recent), with a count of the rest.
fn section(out: &mut String, title: &str, entries: Vec<String>, max: usize) {
    if entries.is_empty() {
        return;
    }
    let skipped = entries.len().saturating_sub(max);
    let shown: Vec<String> = entries.into_iter().skip(skipped).map(|e| clip(&e, ENTRY_MAX_CHARS)).collect();
    out.push('\n');
    out.push_str(title);
    out.push_str(": ");
    out.push_str(&shown.join("; "));
    if skipped > 0 {
        out.push_str(&format!(" (+{skipped} earlier)"));
    }
}

/// The internal block for the model: `AGENT_STATE (internal, do not show the
/// user):` then one line per non-empty section (the most recent entries of
/// each), at most [`RENDER_MAX_CHARS`]. Empty when the state holds nothing,
/// so the caller can leave the block out.
pub fn render(state: &AgentState) -> String {
    let cu = &state.current_understanding;
    let name_of = |id: &str| -> String {
        match state.entity(id).and_then(|e| e.name.as_deref()) {
            Some(n) => format!("\"{}\"", clip(n, 30)),
            None => id.to_string(),
        }
    };
    let mut body = String::new();
    section(
        &mut body,
        "entities",
        cu.entities
            .iter()
            .map(|e| match &e.name {
                Some(n) => format!("{} \"{}\" {}", e.kind, clip(n, 40), e.id),
                None => format!("{} {}", e.kind, e.id),
            })
            .collect(),
        10,
    );
    section(
        &mut body,
        "dependencies",
        cu.dependencies
            .iter()
            .map(|d| format!("{} -{}-> {}", name_of(&d.from), d.rel.as_deref().unwrap_or("related"), name_of(&d.to)))
            .collect(),
        8,
    );
    section(
        &mut body,
        "items",
        state
            .items
            .iter()
            .filter(|i| i.status == ItemStatus::Active)
            .map(|i| format!("{} \"{}\" ({})", i.kind.as_str(), i.title, i.id))
            .collect(),
        6,
    );
    section(
        &mut body,
        "assumptions",
        state
            .assumptions
            .iter()
            .filter(|a| a.confidence > 0.0)
            .map(|a| format!("{} ({:.1}, {})", a.hypothesis, a.confidence, a.id))
            .collect(),
        5,
    );
    section(
        &mut body,
        "expectations",
        state
            .expectations
            .iter()
            .filter(|e| e.status != ExpectationStatus::Confirmed)
            .map(|e| {
                let status = if e.status == ExpectationStatus::Failed { "failed" } else { "pending" };
                format!("{status} {}: {}", e.action, e.expected_outcome)
            })
            .collect(),
        5,
    );
    section(&mut body, "open hypotheses", state.tentative_hypotheses.iter().map(|h| h.hypothesis.clone()).collect(), 3);
    if body.is_empty() {
        return String::new();
    }
    clip(&format!("AGENT_STATE (internal, do not show the user):{body}"), RENDER_MAX_CHARS)
}
