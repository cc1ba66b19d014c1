//! `agentic-chat`: a small developer client for the stream, entities and
//! prewarm functions. Every command acts as one user: the token given
//! (`--token` / `AUTH_TOKEN`), else one minted from `AUTH_JWT_SECRET` for
//! [`DEV_USER`], the same user `scripts/stack.sh` prints a token for.
//!
//! - `token [--sub dev-user]` prints an HS256 dev token.
//! - `chat [scope] MESSAGE` sends one turn and prints it as it arrives: the
//!   answer inline, every other event as one short line (`render`), a progress
//!   line while waiting (on a terminal), then what the turn changed, read back
//!   through the entities API. `--repl` for a conversation, `--raw` for the
//!   SSE bytes as received.
//! - `projects` lists the user's projects; `prewarm [scope]` warms a scope's
//!   context before the first message; `sessions`, `history` read the sessions API.
//!
//! Exit codes: 0 ok, 1 failure (bad arguments, transport, non-2xx answer, stream
//! cut before `done`), 2 the turn sent an `error` event.

mod chat;
mod entities;
mod progress;
mod render;
mod scope;
mod sessions;

use clap::{Args, Parser, Subcommand};
use scope::ScopeArgs;
use std::process::ExitCode;
use std::time::Duration;

pub const DEFAULT_STREAM_URL: &str = "http://127.0.0.1:9000/lambda-url/stream/";
/// The `sub` of tokens minted when none is given: one local user for the CLI,
/// the token `scripts/stack.sh` prints and the README's curl lines.
pub const DEV_USER: &str = "dev-user";

#[derive(Debug, Parser)]
#[command(name = "agentic-chat", version, about = "Developer client for the agentic-chat functions")]
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
    /// Send a message and print the turn as it arrives.
    Chat(ChatArgs),
    /// List your projects (through the entities API).
    Projects {
        #[command(flatten)]
        conn: Conn,
    },
    /// Build and cache a scope's context before the first message (the prewarm function).
    Prewarm {
        #[command(flatten)]
        conn: Conn,
        #[command(flatten)]
        scope: ScopeArgs,
        /// Record the focus on this session instead of creating one.
        #[arg(long)]
        session: Option<String>,
    },
    /// List your sessions, most recently active first.
    Sessions {
        #[command(flatten)]
        conn: Conn,
        #[arg(long, default_value_t = 20)]
        limit: u32,
        /// The `next_cursor` of a previous page.
        #[arg(long)]
        cursor: Option<String>,
    },
    /// Print a session's messages (the newest page, or the one before `--before`).
    History {
        #[command(flatten)]
        conn: Conn,
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

/// Where the functions are and who is asking.
#[derive(Debug, Clone, Args)]
pub struct Conn {
    /// The stream function URL.
    #[arg(long, env = "STREAM_URL", default_value = DEFAULT_STREAM_URL)]
    pub url: String,
    /// The entities function URL; default: the stream URL with `/lambda-url/stream` → `/lambda-url/entities`.
    #[arg(long, env = "ENTITIES_URL")]
    pub entities_url: Option<String>,
    /// The prewarm function URL; default: derived from the stream URL like --entities-url.
    #[arg(long, env = "PREWARM_URL")]
    pub prewarm_url: Option<String>,
    /// Bearer token; default: AUTH_TOKEN, else minted from AUTH_JWT_SECRET for `dev-user`.
    #[arg(long, env = "AUTH_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
}

impl Conn {
    /// The URL of a sibling function (`entities`, `prewarm`): the one given,
    /// else the stream URL's `cargo lambda watch` path with the name swapped.
    pub fn function_url(&self, name: &str) -> Option<String> {
        let given = if name == "entities" { &self.entities_url } else { &self.prewarm_url };
        if let Some(u) = given.as_ref().filter(|u| !u.trim().is_empty()) {
            return Some(u.clone());
        }
        let marker = "/lambda-url/stream";
        self.url.contains(marker).then(|| self.url.replacen(marker, &format!("/lambda-url/{name}"), 1))
    }

    /// The token given, else one minted for [`DEV_USER`]; says on stderr when
    /// there is none (the functions will answer 401).
    pub fn resolve_token(&mut self) {
        if self.token.as_deref().is_some_and(|t| !t.trim().is_empty()) {
            return;
        }
        self.token = match mint_from_env(DEV_USER, Duration::from_secs(3600)) {
            Ok(t) => Some(t),
            Err(e) => {
                eprintln!("note: sending no token ({e}; set --token or AUTH_TOKEN)");
                None
            }
        };
    }

    pub fn entities(&self, http: &reqwest::Client) -> Option<entities::Entities> {
        self.function_url("entities").map(|url| entities::Entities {
            http: http.clone(),
            url,
            token: self.token.clone(),
        })
    }
}

#[derive(Debug, Clone, Args)]
pub struct ChatArgs {
    #[command(flatten)]
    pub conn: Conn,
    #[command(flatten)]
    pub scope: ScopeArgs,
    /// Continue this session.
    #[arg(long)]
    pub session: Option<String>,
    /// The turn's `stream_run_id` (idempotency key).
    #[arg(long)]
    pub run_id: Option<String>,
    /// Print the raw SSE bytes as received (the timing summary goes to stderr).
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

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime")
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
        Command::Projects { mut conn } => {
            conn.resolve_token();
            ExitCode::from(runtime().block_on(chat::list_projects(&conn)))
        }
        Command::Prewarm { mut conn, scope, session } => {
            conn.resolve_token();
            ExitCode::from(runtime().block_on(chat::prewarm(&conn, &scope, session.as_deref())))
        }
        Command::Sessions { mut conn, limit, cursor } => {
            conn.resolve_token();
            let mut q = format!("limit={limit}");
            if let Some(c) = cursor {
                q.push_str(&format!("&cursor={c}"));
            }
            ExitCode::from(runtime().block_on(sessions::get(
                &conn.url,
                conn.token.as_deref(),
                &format!("sessions?{q}"),
            )))
        }
        Command::History { mut conn, limit, before, session } => {
            conn.resolve_token();
            let mut q = format!("limit={limit}");
            if let Some(b) = before {
                q.push_str(&format!("&before={b}"));
            }
            ExitCode::from(runtime().block_on(sessions::history(&conn.url, conn.token.as_deref(), &session, &q)))
        }
        Command::CreateTable => {
            let table = env_var("TABLE_NAME").unwrap_or_else(|| "agentic-chat".into());
            runtime().block_on(async {
                let sdk = shared::store::aws::load_from_env().await;
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
            args.conn.resolve_token();
            ExitCode::from(runtime().block_on(chat::run(args)))
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
        assert_eq!(a.conn.url, "http://x/");
        assert_eq!(a.conn.token.as_deref(), Some("t"));
        assert_eq!(a.session.as_deref(), Some("s1"));
        assert_eq!(a.scope.context.as_deref(), Some("project"));
        assert_eq!(a.run_id.as_deref(), Some("r1"));
        assert!(a.raw && !a.repl);
        assert_eq!(a.message.as_deref(), Some("hello there"));

        let Command::Chat(a) = parse(&["chat", "--repl"]).unwrap().command else { panic!() };
        assert!(a.repl && a.message.is_none());
        assert_eq!(a.scope.context, None);

        // A message is required unless --repl, and not both.
        assert!(parse(&["chat"]).is_err());
        assert!(parse(&["chat", "--repl", "hi"]).is_err());
    }

    #[test]
    fn scope_flags() {
        let Command::Chat(a) =
            parse(&["chat", "--project", "Launch", "--entity", "t-1", "--entity-type", "task", "hi"]).unwrap().command
        else {
            panic!()
        };
        assert_eq!(
            (a.scope.project.as_deref(), a.scope.entity.as_deref(), a.scope.entity_type.as_deref()),
            (Some("Launch"), Some("t-1"), Some("task"))
        );
        // The old spellings still work.
        let Command::Chat(a) = parse(&["chat", "--project", "p", "--entity-id", "t-1", "hi"]).unwrap().command else {
            panic!()
        };
        assert_eq!(a.scope.entity.as_deref(), Some("t-1"));
        // An entity is always inside a project; a kind belongs to an entity.
        assert!(parse(&["chat", "--entity", "t-1", "hi"]).is_err());
        assert!(parse(&["chat", "--project", "p", "--entity-type", "task", "hi"]).is_err());

        let Command::Prewarm { scope, session, .. } =
            parse(&["prewarm", "--project", "Launch", "--session", "s1"]).unwrap().command
        else {
            panic!()
        };
        assert_eq!((scope.project.as_deref(), session.as_deref()), (Some("Launch"), Some("s1")));
        assert!(matches!(parse(&["projects", "--url", "http://h/"]).unwrap().command, Command::Projects { .. }));
    }

    #[test]
    fn sibling_function_urls() {
        let Command::Projects { conn } = parse(&["projects"]).unwrap().command else { panic!() };
        assert_eq!(conn.function_url("entities").as_deref(), Some("http://127.0.0.1:9000/lambda-url/entities/"));
        assert_eq!(conn.function_url("prewarm").as_deref(), Some("http://127.0.0.1:9000/lambda-url/prewarm/"));
        let Command::Projects { conn } =
            parse(&["projects", "--url", "https://abc.lambda-url.aws/", "--entities-url", "https://e.aws/"])
                .unwrap()
                .command
        else {
            panic!()
        };
        assert_eq!(conn.function_url("entities").as_deref(), Some("https://e.aws/"));
        // A deployed stream URL says nothing about where prewarm is.
        assert_eq!(conn.function_url("prewarm"), None);
    }
}
