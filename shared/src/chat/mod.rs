//! The AI SDK's chat protocol (`docs/chat-protocol.md`), without routing
//! (the routes are the edge's, `crate::edge::chat`):
//!
//! - `POST /chat`: a turn whose body is `useChat`'s ([`request`]) and whose
//!   answer is the UI message stream ([`ui_stream`], the encoder the edge
//!   hands the turn's sink); the assistant message's id (`start.messageId`)
//!   is the turn id;
//! - `GET /chat/{id}/stream`: what `useChat({resume: true})` calls on load:
//!   nothing when the session has no running (or just finished) turn, else
//!   that turn replayed from its first event, re-encoded with the same
//!   `messageId`, then followed live to its end, from the frame log
//!   ([`resume`]).

pub mod request;
pub mod resume;
pub mod ui_stream;
