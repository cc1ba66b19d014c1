//! `agentic-chat`: a small developer client for the stream function.
//!
//! - `agentic-chat token [--sub dev-user] [--ttl-secs 86400]` prints an HS256 dev
//!   token minted with `AUTH_JWT_SECRET` (adding `AUTH_ISSUER`/`AUTH_AUDIENCE` when set).
//! - `agentic-chat chat [options] MESSAGE` sends one turn and prints every SSE event
//!   as it arrives, with the milliseconds since the request was sent, then a
//!   timing summary. `--repl` reads one message per line from stdin instead, keeping
//!   the session across turns.
//!
//! Exit codes: 0 ok, 1 failure (bad arguments, transport, non-2xx answer, stream
//! cut before `done`), 2 the turn sent an `error` event.

mod chat;
mod sessions;

use clap::{Args, Parser, Subcommand};
use std::process::ExitCode;
use std::time::Duration;

pub const DEFAULT_STREAM_URL: &str = "http://127.0.0.1:9000/lambda-url/stream/";
/// The `sub` of tokens minted when none is given.
pub const DEV_USER: &str = "dev-user";

#[derive(Debug, Parser)]
#[command(name = "agentic-chat", version, about = "Developer client for the agentic-chat stream function")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print an HS256 dev token minted with AUTH_JWT_SECRET.
    Token {
        /// The token's `sub` (the user id).
        #[arg(long, default_value = DEV_USER)]
        sub: String,
        /// Lifetime in seconds.
        #[arg(long, default_value_t = 86_400)]
        ttl_secs: u64,
    },
    /// Send a message and print the event stream as it arrives.
    Chat(ChatArgs),
    /// List your sessions, most recently active first.
    Sessions {
        #[arg(long, env = "STREAM_URL", default_value = DEFAULT_STREAM_URL)]
        url: String,
        #[arg(long, env = "AUTH_TOKEN", hide_env_values = true)]
        token: Option<String>,
        #[arg(long, default_value_t = 20)]
        limit: u32,
        /// The `next_cursor` of a previous page.
        #[arg(long)]
        cursor: Option<String>,
    },
    /// Print a session's messages (the newest page, or the one before `--before`).
    History {
        #[arg(long, env = "STREAM_URL", default_value = DEFAULT_STREAM_URL)]
        url: String,
        #[arg(long, env = "AUTH_TOKEN", hide_env_values = true)]
        token: Option<String>,
        #[arg(long, default_value_t = 50)]
        limit: u32,
        #[arg(long)]
        before: Option<u64>,
        session: String,
    },
    /// Create the table (TABLE_NAME, default `agentic-chat`) at the configured
    /// DynamoDB endpoint, with the key scheme of `shared::store`, if it is missing.
    CreateTable,
}

#[derive(Debug, Clone, Args)]
pub struct ChatArgs {
    /// The stream function URL.
    #[arg(long, env = "STREAM_URL", default_value = DEFAULT_STREAM_URL)]
    pub url: String,
    /// Bearer token; default: AUTH_TOKEN, else minted from AUTH_JWT_SECRET for `dev-user`.
    #[arg(long, env = "AUTH_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Continue this session.
    #[arg(long)]
    pub session: Option<String>,
    #[arg(long, default_value = "global")]
    pub context_type: String,
    #[arg(long)]
    pub entity_id: Option<String>,
    /// The turn's `stream_run_id` (idempotency key).
    #[arg(long)]
    pub run_id: Option<String>,
    /// Print the raw SSE bytes as received (the summary goes to stderr).
    #[arg(long)]
    pub raw: bool,
    /// Read one message per line from stdin, keeping the session across turns.
    #[arg(long, conflicts_with = "message")]
    pub repl: bool,
    /// The message to send.
    #[arg(required_unless_present = "repl")]
    pub message: Option<String>,
}

fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// Mints a dev token from the environment's `AUTH_JWT_SECRET`, or says why not.
fn mint_from_env(sub: &str, ttl: Duration) -> Result<String, String> {
    let secret = env_var("AUTH_JWT_SECRET").ok_or("AUTH_JWT_SECRET is not set")?;
    let (iss, aud) = (env_var("AUTH_ISSUER"), env_var("AUTH_AUDIENCE"));
    shared::auth::mint_hs256_with(&secret, sub, ttl, iss.as_deref(), aud.as_deref())
        .map_err(|e| format!("cannot mint a token: {e}"))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Token { sub, ttl_secs } => match mint_from_env(&sub, Duration::from_secs(ttl_secs)) {
            Ok(t) => {
                println!("{t}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        },
        Command::Sessions { url, token, limit, cursor } => {
            let token = token.or_else(|| mint_from_env(DEV_USER, Duration::from_secs(3600)).ok());
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
            let mut q = format!("limit={limit}");
            if let Some(c) = cursor {
                q.push_str(&format!("&cursor={c}"));
            }
            ExitCode::from(rt.block_on(sessions::get(&url, token.as_deref(), &format!("sessions?{q}"))))
        }
        Command::History { url, token, limit, before, session } => {
            let token = token.or_else(|| mint_from_env(DEV_USER, Duration::from_secs(3600)).ok());
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
            let mut q = format!("limit={limit}");
            if let Some(b) = before {
                q.push_str(&format!("&before={b}"));
            }
            ExitCode::from(rt.block_on(sessions::history(&url, token.as_deref(), &session, &q)))
        }
        Command::CreateTable => {
            let table = env_var("TABLE_NAME").unwrap_or_else(|| "agentic-chat".into());
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
            rt.block_on(async {
                let sdk = aws_config::load_from_env().await;
                let client = aws_sdk_dynamodb::Client::new(&sdk);
                match shared::store::dynamo::DynamoStore::create_table_if_missing(&client, &table).await {
                    Ok(()) => {
                        println!("table {table} is ready");
                        ExitCode::SUCCESS
                    }
                    Err(e) => {
                        eprintln!("error: creating table {table}: {e}");
                        ExitCode::FAILURE
                    }
                }
            })
        }
        Command::Chat(mut args) => {
            if args.token.as_deref().is_none_or(|t| t.trim().is_empty()) {
                args.token = match mint_from_env(DEV_USER, Duration::from_secs(3600)) {
                    Ok(t) => Some(t),
                    Err(e) => {
                        eprintln!("note: sending no token ({e}; set --token or AUTH_TOKEN)");
                        None
                    }
                };
            }
            let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(rt) => rt,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::FAILURE;
                }
            };
            ExitCode::from(rt.block_on(chat::run(args)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("agentic-chat").chain(args.iter().copied()))
    }

    #[test]
    fn token_defaults_and_overrides() {
        match parse(&["token"]).unwrap().command {
            Command::Token { sub, ttl_secs } => assert_eq!((sub.as_str(), ttl_secs), (DEV_USER, 86_400)),
            c => panic!("{c:?}"),
        }
        match parse(&["token", "--sub", "alice", "--ttl-secs", "60"]).unwrap().command {
            Command::Token { sub, ttl_secs } => assert_eq!((sub.as_str(), ttl_secs), ("alice", 60)),
            c => panic!("{c:?}"),
        }
        assert!(parse(&["token", "--ttl-secs", "soon"]).is_err());
    }

    #[test]
    fn chat_args() {
        let Command::Chat(a) = parse(&[
            "chat",
            "--url",
            "http://x/",
            "--token",
            "t",
            "--session",
            "s1",
            "--context-type",
            "project",
            "--run-id",
            "r1",
            "--raw",
            "hello there",
        ])
        .unwrap()
        .command
        else {
            panic!()
        };
        assert_eq!(a.url, "http://x/");
        assert_eq!(a.token.as_deref(), Some("t"));
        assert_eq!(a.session.as_deref(), Some("s1"));
        assert_eq!(a.context_type, "project");
        assert_eq!(a.run_id.as_deref(), Some("r1"));
        assert!(a.raw && !a.repl);
        assert_eq!(a.message.as_deref(), Some("hello there"));

        let Command::Chat(a) = parse(&["chat", "--repl"]).unwrap().command else { panic!() };
        assert!(a.repl && a.message.is_none());
        assert_eq!(a.context_type, "global");

        // A message is required unless --repl, and not both.
        assert!(parse(&["chat"]).is_err());
        assert!(parse(&["chat", "--repl", "hi"]).is_err());
    }
}
