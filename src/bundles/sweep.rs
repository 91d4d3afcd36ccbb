//! The cleanup of interrupted imports. An import job still `queued` or `applying` past the
//! orphan age (`AGENT_BUNDLE_IMPORT_ORPHAN_AGE_MS`, default 15 minutes) is fenced: in one
//! transaction it becomes `compensated` (its key free again, the id of the agent it was building
//! kept on the row) and that agent is deleted with everything under it. A fenced job that is in
//! fact still running writes nothing more: each of its steps checks, in its own transaction, that
//! it is still applying.
//!
//! It runs at start-up (imports run within their request, so every job still active then belonged
//! to a process that is gone: all of them are fenced, whatever their age), at each import's orphan
//! deadline (the `bundle.import_sweep` job queued with it: it fences every job past the age), and
//! when a request repeats the key of a job past the age (then answering the retryable 409).

use serde_json::json;

use super::{ImportState, store};
use crate::app::App;
use crate::audit::{self, Actor, Event};
use crate::clock::rfc3339;
use crate::error::Result;
use crate::ids::WorkspaceId;
use crate::jobs::{JobCtx, JobPayload, Outcome};

/// Why a job is fenced (recorded on the audit event).
#[derive(Debug, Clone, Copy)]
pub(super) enum Reason {
    /// Past the orphan age in a running server.
    OrphanAge,
    /// Left active by a process that is gone.
    Restart,
}

impl Reason {
    fn as_str(self) -> &'static str {
        match self {
            Reason::OrphanAge => "orphan_age",
            Reason::Restart => "restart",
        }
    }
}

/// Fences one job if it is still active: compensated, its agent deleted, audited. Whether it was.
pub(super) fn fence(app: &App, id: &str, reason: Reason) -> Result<bool> {
    let now = rfc3339(app.clock.now());
    let fenced = app.db.write(|tx| {
        let Some(job) = store::get(tx, id)? else { return Ok(false) };
        let message = match reason {
            Reason::OrphanAge => "the import was still active past the orphan age; its agent was removed",
            Reason::Restart => "the import was interrupted by a restart; its agent was removed",
        };
        let code = "agent_bundle_import_fenced";
        if !store::finish_inactive(tx, id, ImportState::Compensated, code, message, &now)? {
            return Ok(false);
        }
        let ws = WorkspaceId(job.workspace_id.clone());
        let removed = match &job.agent_id {
            Some(agent) => crate::agents::imported::delete_agent(tx, &ws, agent)?,
            None => false,
        };
        let ev = Event::new("agent.bundle.import_compensated").workspace(&ws).target("agent_bundle_import", id);
        let meta = json!({"agentId": job.agent_id, "agentRemoved": removed, "reason": reason.as_str()});
        audit::record(tx, &now, &Actor::system(), ev.meta(meta))?;
        Ok(true)
    })?;
    if fenced {
        tracing::warn!(
            import = id,
            reason = reason.as_str(),
            "fenced an interrupted bundle import and removed its agent"
        );
    }
    Ok(fenced)
}

fn fence_all(app: &App, cutoff_ms: i64, reason: Reason) -> Result<usize> {
    let ids = app.db.read(|c| store::active_before(c, cutoff_ms))?;
    let mut n = 0;
    for id in ids {
        if fence(app, &id, reason)? {
            n += 1;
        }
    }
    Ok(n)
}

/// Every job past the orphan age.
pub(super) fn sweep(app: &App) -> Result<usize> {
    let age = app.config.bundle_import_orphan_age.as_millis() as i64;
    fence_all(app, app.clock.now_ms() - age, Reason::OrphanAge)
}

/// At start-up: every active job.
pub(super) fn recover(app: &App) -> Result<usize> {
    fence_all(app, i64::MAX, Reason::Restart)
}

/// The `bundle.import_sweep` job.
pub(super) fn job(app: &App, _ctx: &JobCtx, _payload: &JobPayload) -> Outcome {
    match sweep(app) {
        Ok(_) => Outcome::Done,
        Err(e) => Outcome::retry(e.to_string()),
    }
}
