//! Where a turn runs: the workspace, a project, or one entity of a project,
//! and how that reads in the stream request (`context_type`, `entity_id`,
//! `projectFocus`; docs/events.md, `shared::turn::request`). The stream
//! scopes its tools by `projectFocus.projectId`, so a project scope always
//! sends it, and an entity scope sends the entity's project too.

use crate::entities::Entities;
use clap::Args;
use shared::turn::TurnRequest;

/// The scope flags of `chat` and `prewarm`.
#[derive(Debug, Clone, Default, Args)]
pub struct ScopeArgs {
    /// Run in this project: its id or its name (looked up through the entities API).
    #[arg(long)]
    pub project: Option<String>,
    /// Focus one entity of the project, by id (needs --project).
    #[arg(long, visible_alias = "entity-id", requires = "project")]
    pub entity: Option<String>,
    /// The focused entity's kind (task, document, goal, …); narrows the tools offered.
    #[arg(long, requires = "entity")]
    pub entity_type: Option<String>,
    /// The request's `context_type` (global, project, entity, calendar, project_create, …);
    /// default: `entity` with --entity, `project` with --project, else `global`.
    #[arg(long, visible_alias = "context-type")]
    pub context: Option<String>,
}

/// A resolved scope.
#[derive(Debug, Clone, PartialEq)]
pub struct Scope {
    pub context_type: String,
    /// `(id, name)` of the project in focus.
    pub project: Option<(String, String)>,
    pub entity: Option<String>,
    pub entity_type: Option<String>,
    /// Whether the user named this scope (a flag, `/global`, `/project`, or
    /// the server moving the conversation). An unnamed scope is not sent
    /// when continuing a session: the stream keeps the session's stored
    /// scope (a `context_type` the request names always wins over it).
    pub named: bool,
}

impl Scope {
    /// The workspace, named (the REPL's `/global`).
    pub fn global() -> Scope {
        Scope { context_type: "global".into(), project: None, entity: None, entity_type: None, named: true }
    }

    /// The user's calendar, named (the REPL's `/calendar`): the calendar
    /// tools and the calendar block (docs/calendar.md).
    pub fn calendar() -> Scope {
        Scope { context_type: "calendar".into(), ..Scope::global() }
    }

    /// The scope the flags name; a project named by name is looked up (an
    /// unknown one is an error, never a quiet fall back to the workspace).
    pub async fn resolve(args: &ScopeArgs, api: Option<&Entities>) -> Result<Scope, String> {
        let project = match &args.project {
            None => None,
            Some(p) => {
                let api = api.ok_or("--project needs the entities API: set --entities-url or ENTITIES_URL")?;
                let found = api.find_project(p).await?;
                Some((found.id.to_string(), found.name))
            }
        };
        Ok(Scope::with(args, project))
    }

    /// The scope of the flags with the project already resolved.
    pub fn with(args: &ScopeArgs, project: Option<(String, String)>) -> Scope {
        let default = match (&args.entity, &project) {
            (Some(_), _) => "entity",
            (None, Some(_)) => "project",
            (None, None) => "global",
        };
        let named = args.context.is_some() || args.entity.is_some() || project.is_some();
        Scope {
            context_type: args.context.clone().unwrap_or_else(|| default.into()),
            project,
            entity: args.entity.clone(),
            entity_type: args.entity_type.clone(),
            named,
        }
    }

    /// For the REPL's prompt: `global`, `Launch`, `Launch/task 019a…`.
    pub fn label(&self) -> String {
        let base = match &self.project {
            Some((_, name)) => name.clone(),
            None => self.context_type.clone(),
        };
        match &self.entity {
            Some(e) => format!("{base}/{} {e}", self.entity_type.as_deref().unwrap_or("entity")),
            None => base,
        }
    }

    /// `{"projectId", "entityType"?}`, when a project is in focus.
    pub fn focus(&self) -> Option<serde_json::Value> {
        let (id, _) = self.project.as_ref()?;
        let mut f = serde_json::json!({ "projectId": id });
        if let Some(t) = &self.entity_type {
            f["entityType"] = serde_json::json!(t);
        }
        Some(f)
    }

    /// The stream request for one message in this scope. Continuing a
    /// session in a scope nobody named sends no scope at all, so the
    /// session stays where it is (a project session is not moved back to
    /// the workspace).
    pub fn request(&self, message: &str, session: Option<&str>, run_id: Option<&str>) -> TurnRequest {
        let send_scope = self.named || session.is_none();
        TurnRequest {
            message: message.to_string(),
            session_id: session.map(str::to_string),
            context_type: send_scope.then(|| self.context_type.clone()),
            entity_id: self.entity.clone(),
            project_focus: self.focus(),
            stream_run_id: run_id.map(|r| serde_json::Value::String(r.to_string())),
            timezone: local_zone(),
            ..Default::default()
        }
    }

    /// The `chat` flags that name this scope (` --project … --entity …`), empty for the workspace.
    pub fn flags(&self) -> String {
        let mut f = String::new();
        if let Some((id, _)) = &self.project {
            f.push_str(&format!(" --project {id}"));
        }
        if let Some(e) = &self.entity {
            f.push_str(&format!(" --entity {e}"));
        }
        if let Some(t) = &self.entity_type {
            f.push_str(&format!(" --entity-type {t}"));
        }
        let default = if self.entity.is_some() {
            "entity"
        } else if self.project.is_some() {
            "project"
        } else {
            "global"
        };
        if self.context_type != default {
            f.push_str(&format!(" --context {}", self.context_type));
        }
        f
    }

    /// The prewarm function's body for this scope (docs/prewarm.md).
    pub fn prewarm_body(&self, session: Option<&str>) -> serde_json::Value {
        let mut b = serde_json::json!({ "context_type": self.context_type });
        if let Some((id, _)) = &self.project {
            b["project_id"] = serde_json::json!(id);
        }
        if let Some(e) = &self.entity {
            b["entity_id"] = serde_json::json!(e);
        }
        if let Some(t) = &self.entity_type {
            b["entity_type"] = serde_json::json!(t);
        }
        if let Some(s) = session {
            b["session_id"] = serde_json::json!(s);
        }
        b
    }
}

/// This machine's IANA zone, for the calendar's local times: `TZ` when it
/// names one, else `/etc/timezone`, else where `/etc/localtime` points
/// (`…/zoneinfo/Europe/Berlin`); `None` when none says (the server then uses
/// the user's stored zone).
fn local_zone() -> Option<String> {
    zone_from(std::env::var("TZ").ok())
}

/// [`local_zone`] with `TZ`'s value given.
fn zone_from(tz: Option<String>) -> Option<String> {
    let valid = |z: &str| z.parse::<chrono_tz::Tz>().ok().map(|_| z.to_string());
    let from_env = tz.map(|z| z.trim_start_matches(':').to_string());
    let from_file = || std::fs::read_to_string("/etc/timezone").ok().map(|z| z.trim().to_string());
    let from_link = || {
        let target = std::fs::read_link("/etc/localtime").ok()?;
        target.to_str()?.split("zoneinfo/").nth(1).map(str::to_string)
    };
    from_env
        .and_then(|z| valid(&z))
        .or_else(|| from_file().and_then(|z| valid(&z)))
        .or_else(|| from_link().and_then(|z| valid(&z)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use shared::turn::ValidTurn;

    fn args(project: Option<&str>, entity: Option<&str>, kind: Option<&str>, context: Option<&str>) -> ScopeArgs {
        ScopeArgs {
            project: project.map(Into::into),
            entity: entity.map(Into::into),
            entity_type: kind.map(Into::into),
            context: context.map(Into::into),
        }
    }

    /// The body as the stream function reads it (its own parser).
    fn on_the_wire(scope: &Scope) -> serde_json::Value {
        let body =
            serde_json::to_vec(&scope.request("hi", Some("019aa000-0000-7000-8000-000000000001"), Some("r1"))).unwrap();
        ValidTurn::parse(&body, 1024).expect("the stream accepts what the CLI sends");
        let mut v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        // The machine's zone, when it has one, rides along: checked on its own.
        let zone = v.as_object_mut().unwrap().remove("timezone");
        assert_eq!(zone.as_ref().and_then(|z| z.as_str()).map(str::to_string), local_zone());
        v
    }

    #[test]
    fn the_zone_is_tz_when_it_names_one() {
        assert_eq!(zone_from(Some("America/Los_Angeles".into())).as_deref(), Some("America/Los_Angeles"));
        assert_eq!(zone_from(Some(":Europe/Berlin".into())).as_deref(), Some("Europe/Berlin"));
        // Not a zone name: the machine's files decide (or nothing is sent).
        assert_eq!(zone_from(Some("nonsense".into())), zone_from(None));
    }

    #[test]
    fn no_flags_is_the_workspace_for_a_new_session() {
        let s = Scope::with(&ScopeArgs::default(), None);
        assert_eq!(s, Scope { named: false, ..Scope::global() });
        let body = serde_json::to_value(s.request("hi", None, None)).unwrap();
        assert_eq!(body["context_type"], "global");
        assert_eq!((s.label().as_str(), s.flags().as_str()), ("global", ""));
    }

    #[test]
    fn no_flags_keeps_a_continued_sessions_scope() {
        // `chat --session X hi`: no context_type, no focus, so the stream
        // keeps the session's stored scope (a project session stays in it).
        let s = Scope::with(&ScopeArgs::default(), None);
        assert_eq!(
            on_the_wire(&s),
            serde_json::json!({"message":"hi","session_id":"019aa000-0000-7000-8000-000000000001","stream_run_id":"r1"})
        );
        // `/global` in the REPL names the workspace: sent, moving the session.
        assert_eq!(on_the_wire(&Scope::global())["context_type"], "global");
    }

    #[test]
    fn a_project_is_sent_as_project_focus() {
        let s = Scope::with(&args(Some("Launch"), None, None, None), Some(("p-1".into(), "Launch".into())));
        let body = on_the_wire(&s);
        assert_eq!(body["context_type"], "project");
        assert_eq!(body["projectFocus"], serde_json::json!({"projectId": "p-1"}));
        assert!(body.get("entity_id").is_none());
        assert_eq!(s.label(), "Launch");
        assert_eq!(s.prewarm_body(None), serde_json::json!({"context_type":"project","project_id":"p-1"}));
    }

    #[test]
    fn an_entity_brings_its_project_and_kind() {
        let s = Scope::with(&args(Some("p-1"), Some("t-9"), Some("task"), None), Some(("p-1".into(), "Launch".into())));
        let body = on_the_wire(&s);
        assert_eq!(body["context_type"], "entity");
        assert_eq!(body["entity_id"], "t-9");
        assert_eq!(body["projectFocus"], serde_json::json!({"projectId": "p-1", "entityType": "task"}));
        assert_eq!(s.label(), "Launch/task t-9");
        assert_eq!(s.flags(), " --project p-1 --entity t-9 --entity-type task");
        assert_eq!(
            s.prewarm_body(Some("s-1")),
            serde_json::json!({"context_type":"entity","project_id":"p-1","entity_id":"t-9","entity_type":"task","session_id":"s-1"})
        );
    }

    #[test]
    fn an_explicit_context_wins() {
        let s = Scope::with(&args(Some("p-1"), None, None, Some("project_audit")), Some(("p-1".into(), "L".into())));
        assert_eq!(on_the_wire(&s)["context_type"], "project_audit");
        assert_eq!(s.flags(), " --project p-1 --context project_audit");
        let s = Scope::with(&args(None, None, None, Some("calendar")), None);
        assert_eq!(on_the_wire(&s)["context_type"], "calendar");
        // The REPL's `/calendar`: named, so sent even when continuing a session.
        let cal = Scope::calendar();
        assert_eq!((on_the_wire(&cal)["context_type"].as_str(), cal.label().as_str()), (Some("calendar"), "calendar"));
        assert!(cal.named);
    }
}
