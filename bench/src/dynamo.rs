//! DynamoDB Local's own latency, timed with the raw SDK and no product code:
//! the floor under every figure that includes persistence. The transaction
//! has the shape of the turn's last write (one new message put with
//! `attribute_not_exists`, a conditional update of the turn record, a
//! conditional update of the session that moves its GSI key), so "done after
//! the model's last token" can be read against it.

use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem, Update};
use aws_sdk_dynamodb::Client;
use std::time::Duration;
use tokio::time::Instant;

fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

fn n(v: u64) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

/// An SDK error with its causes (the SDK's `Display` alone says "service error").
fn err(e: impl std::error::Error) -> String {
    aws_sdk_dynamodb::error::DisplayErrorContext(e).to_string()
}

/// (operation, one duration per call) for GetItem, PutItem and the transaction.
pub async fn baseline(
    client: &Client,
    table: &str,
    calls: usize,
) -> Result<Vec<(&'static str, Vec<Duration>)>, String> {
    let pk = "U#bench#S#baseline";
    for (sk, extra) in [("SESSION", ("lease_turn", s("t"))), ("TURN#r", ("turn_id", s("t")))] {
        client
            .put_item()
            .table_name(table)
            .item("pk", s(pk))
            .item("sk", s(sk))
            .item("message_count", n(0))
            .item(extra.0, extra.1)
            .send()
            .await
            .map_err(err)?;
    }
    let mut get = Vec::with_capacity(calls);
    let mut put = Vec::with_capacity(calls);
    let mut transact = Vec::with_capacity(calls);
    // One unmeasured round of each first: connections and the SDK warm up.
    for i in 0..=calls {
        let t = Instant::now();
        client
            .get_item()
            .table_name(table)
            .key("pk", s(pk))
            .key("sk", s("SESSION"))
            .consistent_read(true)
            .send()
            .await
            .map_err(err)?;
        let get_t = t.elapsed();

        let t = Instant::now();
        client
            .put_item()
            .table_name(table)
            .item("pk", s(pk))
            .item("sk", s(format!("PUT#{i:010}")))
            .item("data", s("x".repeat(400)))
            .send()
            .await
            .map_err(err)?;
        let put_t = t.elapsed();

        let message = Put::builder()
            .table_name(table)
            .item("pk", s(pk))
            .item("sk", s(format!("MSG#{i:010}")))
            .item("data", s("x".repeat(400)))
            .condition_expression("attribute_not_exists(pk)")
            .build()
            .map_err(|e| e.to_string())?;
        let turn = Update::builder()
            .table_name(table)
            .key("pk", s(pk))
            .key("sk", s("TURN#r"))
            .update_expression("SET turn_status = :st, ended_at = :now")
            .condition_expression("attribute_exists(pk) AND turn_id = :t")
            .expression_attribute_values(":st", s("completed"))
            .expression_attribute_values(":now", n(i as u64))
            .expression_attribute_values(":t", s("t"))
            .build()
            .map_err(|e| e.to_string())?;
        let session = Update::builder()
            .table_name(table)
            .key("pk", s(pk))
            .key("sk", s("SESSION"))
            .update_expression("SET message_count = message_count + :one, gsi1pk = :gp, gsi1sk = :g")
            .condition_expression("lease_turn = :t")
            .expression_attribute_values(":one", n(1))
            .expression_attribute_values(":gp", s("U#bench"))
            .expression_attribute_values(":g", s(format!("{i:013}")))
            .expression_attribute_values(":t", s("t"))
            .build()
            .map_err(|e| e.to_string())?;
        let t = Instant::now();
        client
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().put(message).build())
            .transact_items(TransactWriteItem::builder().update(turn).build())
            .transact_items(TransactWriteItem::builder().update(session).build())
            .send()
            .await
            .map_err(err)?;
        let transact_t = t.elapsed();
        if i > 0 {
            get.push(get_t);
            put.push(put_t);
            transact.push(transact_t);
        }
    }
    Ok(vec![
        ("GetItem (consistent)", get),
        ("PutItem", put),
        ("TransactWriteItems (put + 2 conditional updates)", transact),
    ])
}
