//! Approval ids: `apv1.<expires_at>.<hex HMAC-SHA256>` over the user, the
//! session, the call id, the tool, the SHA-256 of the stored arguments and
//! the expiry. The client holds the whole history (the AI SDK sends it
//! back), so an id it could make up would let it approve what it likes: the
//! key never leaves the server, and an id binds exactly one stored call.

use crate::config::Config;
use crate::ids::{SessionId, UserId};
use crate::message::ToolCall;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use std::sync::OnceLock;

const PREFIX: &str = "apv1";

/// Signs and checks approval ids with one key.
#[derive(Clone)]
pub struct Signer {
    key: Vec<u8>,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Signer(..)")
    }
}

impl Signer {
    pub fn new(key: impl Into<Vec<u8>>) -> Signer {
        Signer { key: key.into() }
    }

    /// `APPROVAL_SECRET`, else the JWT secret (HS256 deployments), else a
    /// key made at random for this process: approvals then hold only on the
    /// instance that asked (a JWKS deployment should set `APPROVAL_SECRET`).
    pub fn of(config: &Config) -> Signer {
        static RANDOM: OnceLock<Vec<u8>> = OnceLock::new();
        let key = config.approval_secret.as_ref().or(config.auth.jwt_secret.as_ref());
        match key {
            Some(k) => Signer::new(format!("approval:{k}").into_bytes()),
            None => Signer::new(RANDOM.get_or_init(|| uuid::Uuid::new_v4().as_bytes().repeat(2)).clone()),
        }
    }

    fn mac(&self, user: &UserId, session: &SessionId, call: &ToolCall, expires_at: i64) -> Hmac<Sha256> {
        let args = hex::encode(Sha256::digest(call.function.arguments.as_bytes()));
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).expect("HMAC takes any key length");
        for part in [PREFIX, user.as_str(), session.as_str(), &call.id, &call.function.name, &args] {
            // Length-prefixed: no two tuples give the same bytes.
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part.as_bytes());
        }
        mac.update(&expires_at.to_be_bytes());
        mac
    }

    /// The id for `call` as stored, in `session` of `user`, valid until `expires_at`.
    pub fn sign(&self, user: &UserId, session: &SessionId, call: &ToolCall, expires_at: i64) -> String {
        let tag = self.mac(user, session, call, expires_at).finalize().into_bytes();
        format!("{PREFIX}.{expires_at}.{}", hex::encode(tag))
    }

    /// Whether `id` was made by [`Signer::sign`] for exactly this call
    /// (compared in constant time); its expiry is not checked here.
    pub fn verify(&self, id: &str, user: &UserId, session: &SessionId, call: &ToolCall) -> bool {
        let Some((expires_at, tag)) = parse(id) else { return false };
        let Ok(tag) = hex::decode(tag) else { return false };
        self.mac(user, session, call, expires_at).verify_slice(&tag).is_ok()
    }
}

/// The expiry an id names (unverified).
pub fn expiry(id: &str) -> Option<i64> {
    parse(id).map(|(e, _)| e)
}

fn parse(id: &str) -> Option<(i64, &str)> {
    let mut parts = id.splitn(3, '.');
    (parts.next()? == PREFIX).then_some(())?;
    let expires_at = parts.next()?.parse().ok()?;
    let tag = parts.next()?;
    (tag.len() == 64).then_some((expires_at, tag))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::FunctionCall;

    fn call(id: &str, args: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            kind: "function".into(),
            function: FunctionCall { name: "delete_entity".into(), arguments: args.into() },
        }
    }

    #[test]
    fn an_id_binds_user_session_call_tool_arguments_and_expiry() {
        let signer = Signer::new(b"k".to_vec());
        let (alice, bob) = (UserId::parse("alice").unwrap(), UserId::parse("bob").unwrap());
        let (s1, s2) = (SessionId::new(), SessionId::new());
        let c = call("c1", r#"{"kind":"task","id":"t1"}"#);
        let id = signer.sign(&alice, &s1, &c, 1_000);
        assert!(signer.verify(&id, &alice, &s1, &c));
        assert_eq!(expiry(&id), Some(1_000));
        assert!(!signer.verify(&id, &bob, &s1, &c), "another user");
        assert!(!signer.verify(&id, &alice, &s2, &c), "another session");
        assert!(!signer.verify(&id, &alice, &s1, &call("c2", r#"{"kind":"task","id":"t1"}"#)), "another call");
        assert!(!signer.verify(&id, &alice, &s1, &call("c1", r#"{"kind":"task","id":"t2"}"#)), "other arguments");
        let later = id.replacen(".1000.", ".9000.", 1);
        assert!(!signer.verify(&later, &alice, &s1, &c), "a moved expiry");
        assert!(!Signer::new(b"other".to_vec()).verify(&id, &alice, &s1, &c), "another key");
        for forged in ["", "apv1", "apv1.1000.zz", "apv1.x.00", &id[..id.len() - 1]] {
            assert!(!signer.verify(forged, &alice, &s1, &c), "{forged}");
        }
    }
}
