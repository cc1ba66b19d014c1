//! The scheduled refresh: keep the caches of active sessions exact.
//!
//! Each run walks the sparse index `gsi1pk = CACHE#ACTIVE` (one entry per
//! cache item, sorted by last use) over the active window, oldest first, in
//! pages — never a table scan. For each entry it reads the project (one
//! `GetItem`): same version → nothing to do; newer → rebuild and store
//! (keeping `last_used`, so a refresh never makes a cache look active);
//! project gone → the cache is deleted. Global caches have no project version:
//! they are rebuilt (one query) and stored only if their digest changed.
//!
//! Bounded: at most `PREWARM_MAX_PER_RUN` entries per run, and it stops
//! `PREWARM_DEADLINE_MARGIN_MS` before the deadline. When it stops early it
//! saves the last entry it finished as a checkpoint (`PREWARM#SWEEP`); the
//! next run resumes after it (or at the window's start, if the window moved
//! past it). A run that reaches the end of the window clears the checkpoint,
//! so the next one starts a new sweep. Caches used during a sweep move to the
//! end of the index and are seen by the same sweep; they were just built.

use super::PrewarmConfig;
use crate::context::cache::{digest, ActiveEntry, DynamoContextCache};
use crate::context::pack::build_pack;
use crate::entities::{EntityError, EntityService};
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// Entries refreshed at once.
const CONCURRENCY: usize = 8;
/// Index entries read per query.
const PAGE: usize = 50;

/// What one run did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefreshReport {
    /// Index entries looked at.
    pub checked: usize,
    /// Caches rebuilt and stored (their project moved on).
    pub refreshed: usize,
    /// Caches already exact.
    pub unchanged: usize,
    /// Caches deleted (their project is gone).
    pub removed: usize,
    pub failed: usize,
    /// The whole window was covered (no checkpoint left).
    pub finished: bool,
    /// Why it stopped early: `budget`, `deadline` or `error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
    /// Where this run started, when it resumed a checkpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumed_from: Option<String>,
}

impl RefreshReport {
    fn count(&mut self, outcome: Outcome) {
        self.checked += 1;
        match outcome {
            Outcome::Refreshed => self.refreshed += 1,
            Outcome::Unchanged => self.unchanged += 1,
            Outcome::Removed => self.removed += 1,
            Outcome::Failed => self.failed += 1,
        }
    }
}

enum Outcome {
    Refreshed,
    Unchanged,
    Removed,
    Failed,
}

/// One run of the refresh, over caches used in the last
/// `config.active_window`, stopping `config.deadline_margin` before `deadline`.
pub async fn refresh_active(
    cache: &DynamoContextCache,
    service: &EntityService,
    config: &PrewarmConfig,
    deadline: Instant,
) -> RefreshReport {
    let mut report = RefreshReport::default();
    let now = crate::now_ms();
    let window_start = format!("{:013}", (now - config.active_window.as_millis() as i64).max(0));
    // Entries used after the run began were just built: not this run's work.
    let before = format!("{:013}", now + 1);
    let checkpoint = match cache.sweep_checkpoint().await {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "prewarm refresh: checkpoint not readable");
            report.stopped = Some("error".into());
            return report;
        }
    };
    let mut after = match checkpoint {
        Some(c) if c > window_start => {
            report.resumed_from = Some(c.clone());
            c
        }
        _ => window_start,
    };
    let out_of_time = || Instant::now() + config.deadline_margin >= deadline;
    'sweep: loop {
        let budget = config.max_per_run - report.checked;
        if budget == 0 {
            report.stopped = Some("budget".into());
            break;
        }
        if out_of_time() {
            report.stopped = Some("deadline".into());
            break;
        }
        let page = match cache.active_page(&after, &before, budget.min(PAGE)).await {
            Ok(p) => p,
            Err(e) => {
                tracing::error!(error = %e, "prewarm refresh: index not readable");
                report.stopped = Some("error".into());
                break;
            }
        };
        for chunk in page.entries.chunks(CONCURRENCY) {
            if out_of_time() {
                report.stopped = Some("deadline".into());
                break 'sweep;
            }
            let outcomes = futures::future::join_all(chunk.iter().map(|e| refresh_one(cache, service, e))).await;
            outcomes.into_iter().for_each(|o| report.count(o));
            after = chunk.last().map(|e| e.position.clone()).unwrap_or(after);
        }
        if let Some(last) = page.last {
            after = last;
        }
        if !page.more {
            report.finished = true;
            break;
        }
    }
    let saved = if report.finished {
        cache.set_sweep_checkpoint(None).await
    } else {
        cache.set_sweep_checkpoint(Some(&after)).await
    };
    if let Err(e) = saved {
        tracing::warn!(error = %e, "prewarm refresh: checkpoint not saved (the next run starts over)");
    }
    tracing::info!(?report, "prewarm refresh");
    report
}

async fn refresh_one(cache: &DynamoContextCache, service: &EntityService, e: &ActiveEntry) -> Outcome {
    if e.mode.is_some() {
        // A mode's pack is served only minutes after its build (it reads
        // the clock and the calendar): the turn rebuilds it, not the sweep.
        return Outcome::Unchanged;
    }
    let rebuild = || async {
        let started = Instant::now();
        let pack = build_pack(service, &e.user, &e.scope).await;
        (pack, started.elapsed().as_millis() as u64)
    };
    let (pack, build_ms) = match e.scope.project() {
        None => {
            let (pack, ms) = rebuild().await;
            let data = serde_json::to_string(&pack).unwrap_or_default();
            if digest(&data) == e.digest {
                return Outcome::Unchanged;
            }
            (pack, ms)
        }
        Some(project) => match service.get_project(&e.user, project).await {
            Ok(p) if p.version == e.version => return Outcome::Unchanged,
            Ok(_) => {
                let (pack, ms) = rebuild().await;
                if pack.version.is_none() {
                    return Outcome::Failed;
                }
                (pack, ms)
            }
            Err(EntityError::NotFound(_)) => {
                return match cache.delete(&e.user, &e.scope).await {
                    Ok(()) => Outcome::Removed,
                    Err(_) => Outcome::Failed,
                };
            }
            Err(err) => {
                tracing::warn!(error = %err, "prewarm refresh: project not readable");
                return Outcome::Failed;
            }
        },
    };
    match cache.put_pack_used_at(&e.user, &e.scope, &pack, build_ms, e.last_used).await {
        Ok(_) => Outcome::Refreshed,
        Err(err) => {
            tracing::warn!(error = %err, "prewarm refresh: cache not stored");
            Outcome::Failed
        }
    }
}
