//! The first frame of a resumed stream (issue 19): a client reads a turn until
//! its third `text_delta`, drops the connection, waits `pause`, and asks
//! `GET /sessions/{id}/stream` with `Last-Event-ID`. Timed: from sending that
//! request to the first byte of its body. With no pause, the frames after the
//! client's last one may not be stored yet (the writer batches for up to
//! `FRAME_FLUSH_MS`; the follower polls every 100 ms); after a pause they are, and the
//! figure is the read of the log.

use shared::sse::{SseDecoder, StreamEvent};
use std::time::Duration;
use tokio::time::Instant;

/// `n` reconnects to the stream function at `url` (its root), each in a new
/// session, pausing `pause` between the drop and the reconnect.
pub async fn first_frame_after_reconnect(
    url: &str,
    user: &str,
    n: usize,
    pause: Duration,
) -> Result<Vec<Duration>, String> {
    let client = reqwest::Client::builder().no_proxy().tcp_nodelay(true).build().map_err(|e| e.to_string())?;
    let token = tests::token(user);
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let resp = client
            .post(url)
            .bearer_auth(&token)
            .body(r#"{"message":"resume me"}"#)
            .send()
            .await
            .map_err(|e| format!("turn: {e}"))?;
        let (sid, last) = read_until_text(resp, 3).await?;
        tokio::time::sleep(pause).await;
        let t0 = Instant::now();
        let mut resumed = client
            .get(format!("{}sessions/{sid}/stream", url))
            .bearer_auth(&token)
            .header("last-event-id", last.to_string())
            .send()
            .await
            .map_err(|e| format!("resume: {e}"))?;
        if resumed.status() != 200 {
            return Err(format!("resume answered {}", resumed.status()));
        }
        resumed.chunk().await.map_err(|e| e.to_string())?.ok_or("an empty resumed stream")?;
        out.push(t0.elapsed());
        // The rest, so the turn has ended before the next one starts.
        while resumed.chunk().await.map_err(|e| e.to_string())?.is_some() {}
    }
    Ok(out)
}

/// Reads the stream until `texts` text deltas; returns the session and the
/// last frame id read. Dropping the response then closes the connection.
async fn read_until_text(mut resp: reqwest::Response, texts: usize) -> Result<(String, u64), String> {
    let mut dec = SseDecoder::new();
    let (mut sid, mut last, mut seen) = (None, 0, 0);
    while seen < texts || sid.is_none() {
        let chunk = resp.chunk().await.map_err(|e| e.to_string())?.ok_or("the turn ended early")?;
        for f in dec.feed(&chunk).map_err(|e| e.to_string())? {
            last = f.id.as_deref().and_then(|i| i.parse().ok()).unwrap_or(last);
            match serde_json::from_str::<StreamEvent>(&f.data).map_err(|e| e.to_string())? {
                StreamEvent::Session { session } => sid = Some(session.id.to_string()),
                StreamEvent::TextDelta { .. } => seen += 1,
                _ => {}
            }
        }
    }
    Ok((sid.expect("a session"), last))
}
