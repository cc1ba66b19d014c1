//! The entities API (`docs/entities.md`) and the prewarm function from the
//! command line: list projects, find one by id or name, read back what a turn
//! touched, prewarm a scope. Answers are read into `shared`'s own types.

use crate::render::{record_kind, shorten};
use shared::entities::{Change, Entity, EntityKind, EntityPatch, Page, Project, RecordKind};
use shared::prewarm::PrewarmResponse;

/// A client of one user's entities API.
pub struct Entities {
    pub http: reqwest::Client,
    /// The function URL, e.g. `http://127.0.0.1:9000/lambda-url/entities/`.
    pub url: String,
    pub token: Option<String>,
}

/// Most projects read by one listing (pages of 100).
const MAX_PROJECTS: usize = 1000;

impl Entities {
    /// `Ok(None)` for a 404 (the thing is not there, or not this user's).
    async fn get<T: serde::de::DeserializeOwned>(&self, rest: &str) -> Result<Option<T>, String> {
        let url = format!("{}/{rest}", self.url.trim_end_matches('/'));
        let mut req = self.http.get(&url);
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        let resp = req.send().await.map_err(|e| format!("entities API at {url}: {e}"))?;
        let status = resp.status();
        let body = resp.text().await.unwrap_or_default();
        if status == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !status.is_success() {
            return Err(format!("entities API answered HTTP {status} for {rest}: {body}"));
        }
        serde_json::from_str(&body).map(Some).map_err(|e| format!("entities API {rest}: unexpected answer: {e}"))
    }

    /// The user's projects, oldest first.
    pub async fn projects(&self) -> Result<Vec<Project>, String> {
        let mut all = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let rest = match &cursor {
                Some(c) => format!("projects?limit=100&cursor={c}"),
                None => "projects?limit=100".to_string(),
            };
            let page: Page<Project> = self.get(&rest).await?.ok_or("entities API: no /projects route (wrong URL?)")?;
            all.extend(page.items);
            match page.next_cursor {
                Some(c) if all.len() < MAX_PROJECTS => cursor = Some(c),
                _ => return Ok(all),
            }
        }
    }

    /// The project named by `id_or_name`: an id first, else a name (case
    /// ignored). Two projects of that name are an error naming both ids.
    pub async fn find_project(&self, id_or_name: &str) -> Result<Project, String> {
        let projects = self.projects().await?;
        if let Some(p) = projects.iter().find(|p| p.id.to_string() == id_or_name) {
            return Ok(p.clone());
        }
        let wanted = id_or_name.trim().to_lowercase();
        let named: Vec<&Project> = projects.iter().filter(|p| p.name.trim().to_lowercase() == wanted).collect();
        match named.as_slice() {
            [p] => Ok((*p).clone()),
            [] => Err(format!("no project has the id or name {id_or_name:?} (`agentic-chat projects` lists them)")),
            many => {
                let ids: Vec<String> = many.iter().map(|p| p.id.to_string()).collect();
                Err(format!("{} projects are named {id_or_name:?}; pick one by id: {}", many.len(), ids.join(", ")))
            }
        }
    }

    async fn entity(&self, project: &str, kind: EntityKind, id: &str) -> Result<Option<Entity>, String> {
        self.get(&format!("projects/{project}/{}/{id}", kind.plural())).await
    }
}

/// One line per project: `Launch  019a…  v3  active`.
pub fn project_line(p: &Project) -> String {
    let state = serde_json::to_value(p.state).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
    format!("{:<24} {}  v{}  {state}", shorten(&p.name, 24), p.id, p.version)
}

/// What a turn's `entity_patch`es touched, in order: projects, and the
/// entities created, updated or deleted in them.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Touched {
    /// `(project id, kind, id)`; a project itself appears as `(p, Project, p)`.
    pub records: Vec<(String, RecordKind, String)>,
}

impl Touched {
    pub fn observe(&mut self, patch: &EntityPatch) {
        let project = patch.project_id.to_string();
        for change in &patch.changes {
            let (kind, id) = match change {
                Change::Created { kind, id, .. } | Change::Updated { kind, id, .. } | Change::Deleted { kind, id } => {
                    (*kind, id.clone())
                }
                Change::Linked { .. } | Change::Unlinked { .. } => (RecordKind::Project, project.clone()),
            };
            let record = (project.clone(), kind, id);
            if !self.records.contains(&record) {
                self.records.push(record);
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    fn projects(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for (p, _, _) in &self.records {
            if !out.contains(&p.as_str()) {
                out.push(p);
            }
        }
        out
    }
}

/// What the user has after a turn, read back through the entities API (never
/// from the events or the model's words): every project, and under each one
/// the turn touched, those of its entities the turn created or changed as
/// they are now (or `gone` when they no longer read).
pub async fn read_back(api: &Entities, touched: &Touched) -> Result<String, String> {
    let projects = api.projects().await?;
    let mut out = String::from("Your projects now (read back through the entities API):\n");
    if projects.is_empty() {
        out.push_str("  (none)\n");
    }
    for p in &projects {
        out.push_str(&format!("  {}\n", project_line(p)));
        let pid = p.id.to_string();
        if !touched.projects().contains(&pid.as_str()) {
            continue;
        }
        for (_, kind, id) in touched.records.iter().filter(|(tp, k, _)| *tp == pid && *k != RecordKind::Project) {
            let Some(k) = EntityKind::parse(&record_kind(*kind)) else { continue };
            let line = match api.entity(&pid, k, id).await? {
                Some(e) => format!("{} “{}”  {}", k.as_str(), e.fields.name(), e.id),
                None => format!("{} {id}  gone", k.as_str()),
            };
            out.push_str(&format!("      {line}\n"));
        }
    }
    // A touched project that no longer lists was deleted.
    for pid in touched.projects() {
        if !projects.iter().any(|p| p.id.to_string() == pid) {
            out.push_str(&format!("  project {pid}  gone\n"));
        }
    }
    Ok(out)
}

/// `POST` to the prewarm function: `{context_type, project_id?, entity_id?,
/// entity_type?, session_id?}` (docs/prewarm.md). Returns a one-line report.
/// `scope_flags` are the `chat` flags of the same scope, for the hint (a turn
/// sends its scope, so continuing the session without them would leave it).
pub async fn prewarm(
    http: &reqwest::Client,
    url: &str,
    token: Option<&str>,
    body: &serde_json::Value,
    scope_flags: &str,
) -> Result<String, String> {
    let mut req = http.post(url).json(body);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.map_err(|e| format!("prewarm at {url}: {e}"))?;
    let status = resp.status();
    let text = resp.text().await.unwrap_or_default();
    if !status.is_success() {
        return Err(format!("prewarm answered HTTP {status}: {text}"));
    }
    let a: PrewarmResponse =
        serde_json::from_str(&text).map_err(|e| format!("prewarm: unexpected answer: {e}: {text}"))?;
    let c = &a.cached;
    Ok(format!(
        "session {} ({}) is warm: context pack {} bytes at version {}, built in {} ms{}\n  chat in it: agentic-chat chat --session {}{scope_flags} …",
        a.session.id,
        c.scope,
        c.bytes,
        c.version,
        c.build_ms,
        if c.stored { "" } else { " (too large to cache)" },
        a.session.id
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn touched_keeps_each_record_once_in_order() {
        let patch: EntityPatch = serde_json::from_str(
            r#"{"project_id":"p1","version":2,"changes":[
            {"op":"created","kind":"project","id":"p1","entity":{"id":"p1","name":"Launch","state":"active","context_document_id":"d1","version":1,"created_at":1,"updated_at":1}},
            {"op":"created","kind":"task","id":"t1","entity":{"id":"t1","project_id":"p1","kind":"task","fields":{"title":"Write"},"version":1,"created_at":1,"updated_at":1}},
            {"op":"deleted","kind":"risk","id":"r1"}]}"#,
        )
        .unwrap();
        let mut t = Touched::default();
        t.observe(&patch);
        t.observe(&patch);
        assert_eq!(
            t.records,
            vec![
                ("p1".into(), RecordKind::Project, "p1".into()),
                ("p1".into(), RecordKind::Task, "t1".into()),
                ("p1".into(), RecordKind::Risk, "r1".into()),
            ]
        );
        assert_eq!(t.projects(), vec!["p1"]);
    }
}
