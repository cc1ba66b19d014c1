//! Long conversations off the hot path (AGENTIC_CHAT_V2_SPEC §5.3–5.4,
//! AGENT_STATE_SPEC §5, §10): the turn-end event, its publisher, and the
//! summarizer's per-session logic and SQS batch handler.
//!
//! Contract:
//! - after a turn's persistence the stream publishes [`TurnCompleted`] to an
//!   SQS FIFO queue (group = session, dedup id = turn) without waiting more
//!   than a few milliseconds ([`publish_bounded`]); a failed send is logged and
//!   the turn still succeeds: the summarizer works from watermarks, so the next
//!   turn's event covers the missed work;
//! - the summarizer ([`summarize_session`]) reads the current summary and the
//!   messages after its watermark, decides by the triggers, asks the
//!   summarizer model for the spec's JSON, validates it (accepting the
//!   unambiguous near misses small models write, see `parse`; rejecting and
//!   retrying otherwise, with the reason) and commits with compare-and-set on
//!   the summary version. A redelivered or already-covered event is a no-op,
//!   a concurrent run never overwrites a newer summary, and a failed run
//!   changes nothing: the stored log is never modified, the context window
//!   just stays longer;
//! - rejected answers are bounded: at most `SUMMARY_MAX_ATTEMPTS` per backlog
//!   (the messages the run would send), counted in the table across runs and
//!   deliveries; then the run ends [`Outcome::Rejected`], the record is done
//!   (not redelivered: the same input would be refused alike), and the
//!   session's next turn, a new backlog, is asked about again;
//! - the summarizer never holds the model while a chat turn waits for it
//!   (`SUMMARY_YIELD_TO_TURNS`: `session` by default, `user` on the local
//!   stack's one model server): no model call starts while a turn of the
//!   session (or of its user) holds a session lease, a call running when
//!   one starts is dropped (checked every `SUMMARY_YIELD_POLL_MS`), and the
//!   run ends [`Outcome::Deferred`] with its record done: a turn's end
//!   publishes a newer event (docs/summarizer.md);
//! - agent state: the model's `agent_state_item_updates` / `agent_state_updates`
//!   are parsed and validated (typed, no deletions per §5.4) and committed
//!   inside the summary version that proposed them, under the same
//!   compare-and-set, marked pending. A second write
//!   ([`settle_state_deltas`]) applies them to the session's agent state and
//!   clears the mark in one transaction; a run that dies between the two
//!   leaves them pending, and the next run of the session (the redelivery)
//!   applies them first. So they apply exactly once;
//! - the batch handler ([`handle_batch`]) reports partial failures per record
//!   (`batchItemFailures`): one failing session fails only its own records.
//!   A record that is not a [`TurnCompleted`] is reported too, on every
//!   delivery, so the queue's redrive policy parks it in the dead-letter
//!   queue; the records after it in its FIFO group are reported unprocessed.

mod batch;
mod config;
mod parse;
mod publish;
mod run;
pub mod store;

pub use batch::handle_batch;
pub use config::{SummaryConfig, YieldScope};
pub use publish::{publish_bounded, NoTurnEvents, PublishError, SqsTurnEvents, TurnEvents};
pub use run::{
    commit_summary, settle_state_deltas, summarize_session, validate_output, Outcome, Settled, SummarizeError,
    SummarizerDeps, SummarizerOutput,
};

use crate::ids::{SessionId, TurnId, UserId};
use serde::{Deserialize, Serialize};

/// Sent once per persisted turn: "session `session_id` has messages up to
/// `last_message_seq`". The body of one SQS message, as JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnCompleted {
    pub user_id: UserId,
    pub session_id: SessionId,
    pub turn_id: TurnId,
    pub last_message_seq: u64,
}
