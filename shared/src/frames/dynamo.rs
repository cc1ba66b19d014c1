//! The frame log in the session's partition: one item per batch,
//! `sk = FRAMES#<turn id>#<first frame id, 10 digits>`, the frames
//! [packed](super::pack) in one binary attribute (`z`; items written before
//! the packing hold their JSON in `data`, still read), `written_at` (ms) and
//! `ttl` (s).

use super::{FrameBatch, FrameLog, LatestTurn, StoredFrame, FRAMES_TTL_SECS};
use crate::ids::{SessionId, TurnId, UserId};
use crate::store::attr::{backend, get_n, get_s, n, s, session_page, Item, DELETING};
use crate::store::keys::{self, FRAMES_END, FRAMES_PREFIX, SESSION_SK};
use crate::store::StoreError;
use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;
use tracing::Instrument;

/// Items per page of the descending read of the latest turn: most turns'
/// batches after a reconnect fit in one.
const LATEST_PAGE: usize = 25;

#[derive(Clone)]
pub struct DynamoFrameLog {
    client: Client,
    table: String,
}

impl DynamoFrameLog {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self { client, table: table.into() }
    }
}

fn corrupt(what: &str) -> StoreError {
    StoreError::Corrupt(format!("frame batch: {what}"))
}

/// The one decoding of a batch item.
fn batch_of(item: &Item) -> Result<FrameBatch, StoreError> {
    let sk = get_s(item, "sk").ok_or_else(|| corrupt("no sk"))?;
    let turn = sk
        .strip_prefix(FRAMES_PREFIX)
        .and_then(|rest| rest.rsplit_once('#'))
        .and_then(|(turn, _)| TurnId::parse(turn).ok())
        .ok_or_else(|| corrupt("bad sk"))?;
    let frames: Vec<StoredFrame> = match (item.get("z").and_then(|z| z.as_b().ok()), get_s(item, "data")) {
        (Some(z), _) => super::unpack(z.as_ref()).map_err(|e| corrupt(&e))?,
        (None, Some(json)) => serde_json::from_str(json).map_err(|e| corrupt(&e.to_string()))?,
        (None, None) => return Err(corrupt("no frames")),
    };
    if frames.is_empty() {
        return Err(corrupt("empty"));
    }
    Ok(FrameBatch { turn_id: turn, frames, written_at: get_n(item, "written_at").unwrap_or(0) })
}

#[async_trait::async_trait]
impl FrameLog for DynamoFrameLog {
    async fn append(&self, user: &UserId, session: &SessionId, batch: &FrameBatch) -> Result<(), StoreError> {
        let packed = AttributeValue::B(Blob::new(super::pack(&batch.frames)));
        self.client
            .put_item()
            .table_name(&self.table)
            .item("pk", s(keys::session_pk(user, session)))
            .item("sk", s(keys::frames_sk(&batch.turn_id, batch.first_id())))
            .item("z", packed)
            .item("written_at", n(batch.written_at))
            .item("ttl", n(batch.written_at / 1000 + FRAMES_TTL_SECS))
            .send()
            .instrument(tracing::debug_span!("ddb.put_item", what = "frames"))
            .await
            .map_err(backend)?;
        Ok(())
    }

    async fn latest(&self, user: &UserId, session: &SessionId, after: u64) -> Result<Option<LatestTurn>, StoreError> {
        let mut found: Option<LatestTurn> = None;
        let mut start = None;
        loop {
            let range = (FRAMES_PREFIX.to_string(), FRAMES_END.to_string());
            let pk = keys::session_pk(user, session);
            let (items, next) =
                session_page(&self.client, &self.table, pk, range, false, Some(LATEST_PAGE), start, "frames_latest")
                    .await?;
            // Newest first: the latest turn's batches, last one first, until
            // the batch holding `after + 1` or an earlier turn.
            for item in &items {
                let batch = batch_of(item)?;
                let latest = found.get_or_insert_with(|| LatestTurn {
                    turn_id: batch.turn_id.clone(),
                    batches: Vec::new(),
                    last_written_at: batch.written_at,
                    done: batch.ends_turn(),
                });
                if batch.turn_id != latest.turn_id {
                    return Ok(found.map(oldest_first));
                }
                // `after` may be anything a client sent: no `+ 1` on it.
                let reaches = batch.first_id().saturating_sub(1) <= after;
                latest.batches.push(batch);
                if reaches {
                    return Ok(found.map(oldest_first));
                }
            }
            match next {
                Some(k) => start = Some(k),
                None => return Ok(found.map(oldest_first)),
            }
        }
    }

    async fn batches_from(
        &self,
        user: &UserId,
        session: &SessionId,
        turn: &TurnId,
        from: u64,
    ) -> Result<Vec<FrameBatch>, StoreError> {
        let mut batches = Vec::new();
        let mut start = None;
        loop {
            let range = (keys::frames_sk(turn, from), keys::frames_sk(turn, super::MAX_FRAME_ID));
            let pk = keys::session_pk(user, session);
            let (items, next) =
                session_page(&self.client, &self.table, pk, range, true, None, start, "frames_from").await?;
            for item in &items {
                batches.push(batch_of(item)?);
            }
            match next {
                Some(k) => start = Some(k),
                None => return Ok(batches),
            }
        }
    }

    async fn lease_holder(&self, user: &UserId, session: &SessionId) -> Result<Option<TurnId>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("pk", s(keys::session_pk(user, session)))
            .key("sk", s(SESSION_SK))
            .projection_expression("lease_turn, lease_until, #st")
            .expression_attribute_names("#st", "status")
            .consistent_read(true)
            .send()
            .instrument(tracing::debug_span!("ddb.get_item", what = "frames_lease"))
            .await
            .map_err(backend)?;
        let Some(i) = out.item else { return Ok(None) };
        let live = get_s(&i, "status") != Some(DELETING)
            && get_n(&i, "lease_until").is_some_and(|until| until >= crate::now_ms());
        Ok(get_s(&i, "lease_turn").filter(|_| live).and_then(|t| TurnId::parse(t).ok()))
    }
}

fn oldest_first(mut latest: LatestTurn) -> LatestTurn {
    latest.batches.reverse();
    latest
}
