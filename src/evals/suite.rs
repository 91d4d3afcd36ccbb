//! Suites: cases run one after another by the `eval.suite` job, each `repeat` times with a
//! k-of-n rule (a case passes when at least `passThreshold` of its repeats pass; it is `flaky`
//! when its repeats disagree), progress saved after each case (a restarted job continues where it
//! stopped), and the workspace summary at the end. A comparison runs the same cases against a
//! candidate revision and the published one, side by side; regressions are cases that pass on
//! the baseline (the other side, or the previous suite) and not on this one.

use serde_json::{Value, json};

use super::api::{ComparisonBodyIn, Overrides, SuiteBodyIn};
use super::replay::{self, Plan};
use super::{Suite, check_mode, store};
use crate::app::App;
use crate::audit::{self, Actor, Event};
use crate::auth::{Perm, Principal};
use crate::clock::rfc3339;
use crate::error::{Error, Result};
use crate::ids::WorkspaceId;
use crate::jobs::{self, JobCtx, JobPayload, NewJob, Outcome};

pub const SUITE_JOB: &str = "eval.suite";
const MAX_CASES: usize = 500;
const MAX_REPEAT: u32 = 5;

/// 409 for a key that started another kind of eval run.
fn key_taken(what: &str) -> Error {
    Error::conflict(format!("this idempotencyKey already started {what}; use another key"))
}

pub fn jobs() -> Vec<(&'static str, jobs::Handler)> {
    vec![(SUITE_JOB, handle)]
}

/// A suite to start.
struct Request {
    mode: String,
    case_ids: Option<Vec<String>>,
    agent_id: Option<String>,
    repeat: u32,
    pass_threshold: u32,
    key: Option<String>,
}

fn request(
    mode: Option<String>,
    case_ids: Option<Vec<String>>,
    agent_id: Option<String>,
    repeat: Option<u32>,
    threshold: Option<u32>,
    key: Option<String>,
) -> Result<Request> {
    let mode = check_mode(mode.as_deref().unwrap_or("full_assistant"))?;
    let repeat = repeat.unwrap_or(1);
    if !(1..=MAX_REPEAT).contains(&repeat) {
        return Err(Error::invalid_field("repeat", format!("repeat must be 1 to {MAX_REPEAT}")));
    }
    let pass_threshold = threshold.unwrap_or(repeat / 2 + 1);
    if !(1..=repeat).contains(&pass_threshold) {
        return Err(Error::invalid_field("passThreshold", format!("passThreshold must be 1 to repeat ({repeat})")));
    }
    if let Some(ids) = &case_ids
        && (ids.is_empty() || ids.len() > MAX_CASES)
    {
        return Err(Error::invalid_field("caseIds", format!("caseIds takes 1 to {MAX_CASES} ids")));
    }
    if let Some(k) = &key
        && (k.trim().is_empty() || k.chars().count() > 200)
    {
        return Err(Error::invalid_field("idempotencyKey", "idempotencyKey must be 1 to 200 characters"));
    }
    Ok(Request { mode, case_ids, agent_id, repeat, pass_threshold, key })
}

/// The cases a suite runs (in the order given, else oldest first), and those it skips because
/// they have no assertions.
fn pick_cases(c: &crate::storage::Conn, ws: &str, r: &Request) -> Result<(Vec<String>, Vec<Value>)> {
    let cases = match &r.case_ids {
        Some(ids) => {
            let mut out = Vec::new();
            for id in ids {
                let case = store::case(c, ws, id)?
                    .ok_or_else(|| Error::not_found("eval case").with_details(json!({"caseId": id})))?;
                if r.agent_id.as_ref().is_some_and(|a| *a != case.agent_id) {
                    return Err(Error::invalid_field("caseIds", format!("case {id} belongs to another agent")));
                }
                if !out.iter().any(|x: &super::Case| x.id == case.id) {
                    out.push(case);
                }
            }
            out
        }
        None => store::cases(c, ws, r.agent_id.as_deref(), super::MAX_LIST * 10)?,
    };
    let (scored, unscored): (Vec<_>, Vec<_>) = cases.into_iter().partition(|c| !c.assertions.is_empty());
    let skipped = unscored
        .iter()
        .map(|c| json!({"caseId": c.id, "name": c.name, "status": "skipped", "reason": "The case has no assertions."}))
        .collect();
    if scored.len() > MAX_CASES {
        return Err(Error::invalid_field("caseIds", format!("a suite runs at most {MAX_CASES} cases")));
    }
    Ok((scored.into_iter().map(|c| c.id).collect(), skipped))
}

fn new_suite(p: &Principal, r: &Request, case_ids: Vec<String>, skipped: Vec<Value>, now: &str) -> Suite {
    Suite {
        id: crate::ids::new_id(),
        workspace_id: p.workspace_id.0.clone(),
        agent_id: r.agent_id.clone(),
        comparison_id: None,
        side: None,
        revision_id: None,
        mode: r.mode.clone(),
        repeat: r.repeat,
        pass_threshold: r.pass_threshold,
        total: case_ids.len() as i64,
        case_ids,
        status: "queued".into(),
        done: 0,
        results: skipped,
        summary: None,
        error: None,
        created_at: now.to_string(),
        completed_at: None,
    }
}

fn enqueue(app: &App, tx: &crate::storage::Tx, p: &Principal, s: &Suite, key: Option<&str>) -> Result<()> {
    let by = p.user_id.as_ref().map(|u| u.0.as_str());
    store::insert_suite(tx, s, key, by)?;
    let job = NewJob::new(SUITE_JOB, json!({"suiteId": s.id, "workspaceId": s.workspace_id}))
        .dedupe(format!("eval-suite:{}", s.id));
    jobs::enqueue_tx(
        tx,
        app.clock.now_ms(),
        app.jobs.default_max_attempts(),
        &NewJob { workspace_id: Some(s.workspace_id.clone()), ..job },
    )?;
    Ok(())
}

/// `POST /evals/cases/run`: queues a suite (or returns the one a repeated key started: `false`).
pub fn start(app: &App, p: &Principal, actor: &Actor, b: SuiteBodyIn) -> Result<(bool, Suite)> {
    p.require(Perm::AgentsManage)?;
    let r = request(b.mode, b.case_ids, b.agent_id, b.repeat, b.pass_threshold, b.idempotency_key)?;
    if b.revision_id.is_some() && r.agent_id.is_none() {
        return Err(Error::invalid_field("revisionId", "revisionId needs agentId (a revision belongs to one agent)"));
    }
    let ws = p.workspace_id.clone();
    let now = rfc3339(app.clock.now());
    let out = app.db.write(|tx| {
        if let Some(k) = &r.key
            && let Some(s) = store::suites_by_key(tx, &ws.0, k)?.into_iter().next()
        {
            if s.comparison_id.is_some() {
                return Err(key_taken("a comparison"));
            }
            return Ok((false, s));
        }
        if let Some(a) = &r.agent_id {
            crate::agents::get_in(tx, &ws, a)?;
        }
        if let (Some(a), Some(rid)) = (&r.agent_id, &b.revision_id) {
            crate::agents::revisions::snapshot_with_version(tx, a, rid)?.ok_or_else(|| Error::not_found("revision"))?;
        }
        let (ids, skipped) = pick_cases(tx, &ws.0, &r)?;
        let mut s = new_suite(p, &r, ids, skipped, &now);
        s.revision_id = b.revision_id.clone();
        enqueue(app, tx, p, &s, r.key.as_deref())?;
        let meta = json!({"cases": s.total, "mode": s.mode, "repeat": s.repeat});
        audit::record(
            tx,
            &now,
            actor,
            Event::new("eval.suite.started").workspace(&ws).target("eval_suite", &s.id).meta(meta),
        )?;
        Ok((true, store::suite(tx, &ws.0, &s.id)?.unwrap_or(s)))
    })?;
    Ok(out)
}

pub fn get(app: &App, p: &Principal, id: &str) -> Result<Suite> {
    p.require(Perm::AgentsRead)?;
    app.db.read(|c| store::suite(c, &p.workspace_id.0, id)?.ok_or_else(|| Error::not_found("eval suite")))
}

/// `GET /evals/suites`: newest first.
pub fn list(app: &App, p: &Principal, agent_id: Option<&str>, limit: usize) -> Result<Vec<Suite>> {
    p.require(Perm::AgentsRead)?;
    app.db.read(|c| store::suites(c, &p.workspace_id.0, agent_id, limit.clamp(1, 200)))
}

/// A comparison of two suites: the cases that passed on `baseline` and do not on `candidate`
/// (regressed), and the reverse (fixed).
pub fn compare(baseline: &Suite, candidate: &Suite) -> Value {
    let status = |s: &Suite, id: &str| -> Option<String> {
        s.results.iter().find(|r| r["caseId"] == id).and_then(|r| r["status"].as_str().map(str::to_string))
    };
    let mut regressed = Vec::new();
    let mut fixed = Vec::new();
    for r in &candidate.results {
        let Some(id) = r["caseId"].as_str() else { continue };
        let (Some(before), Some(after)) = (status(baseline, id), r["status"].as_str()) else { continue };
        let entry = json!({"caseId": id, "name": r["name"], "before": before, "after": after, "reason": r["reason"]});
        if before == "pass" && (after == "fail" || after == "error") {
            regressed.push(entry);
        } else if (before == "fail" || before == "error") && after == "pass" {
            fixed.push(entry);
        }
    }
    json!({"baselineSuiteId": baseline.id, "candidateSuiteId": candidate.id, "regressed": regressed, "fixed": fixed})
}

/// `GET /evals/suites/{id}/regressions`: against `baseline` (a suite id), else the other side of
/// its comparison, else the previous completed suite of the same agent scope and mode.
pub fn regressions(app: &App, p: &Principal, id: &str, baseline: Option<&str>) -> Result<Option<Value>> {
    p.require(Perm::AgentsRead)?;
    let ws = &p.workspace_id.0;
    app.db.read(|c| {
        let s = store::suite(c, ws, id)?.ok_or_else(|| Error::not_found("eval suite"))?;
        let base = match (baseline, &s.comparison_id) {
            (Some(b), _) => Some(store::suite(c, ws, b)?.ok_or_else(|| Error::not_found("eval suite"))?),
            (None, Some(cid)) => store::comparison(c, ws, cid)?.into_iter().find(|x| x.id != s.id),
            (None, None) => store::previous_suite(c, &s)?,
        };
        Ok(base.map(|b| compare(&b, &s)))
    })
}

/// A candidate against the published revision: both sides, and the regressions once both ended.
#[derive(Debug, Clone)]
pub struct Comparison {
    pub id: String,
    pub agent_id: String,
    pub sides: Vec<Suite>,
}

impl Comparison {
    pub fn status(&self) -> &'static str {
        if self.sides.iter().any(Suite::active) {
            "running"
        } else if self.sides.iter().any(|s| s.status == "failed") {
            "failed"
        } else {
            "completed"
        }
    }

    /// Regressions of the candidate against the baseline, once both sides completed.
    pub fn regressions(&self) -> Option<Value> {
        let side = |n: &str| self.sides.iter().find(|s| s.side.as_deref() == Some(n));
        let (c, b) = (side("candidate")?, side("baseline")?);
        (c.status == "completed" && b.status == "completed").then(|| compare(b, c))
    }
}

/// `POST /agents/{agentId}/eval-runs`: selected cases (all of the agent's when none are given)
/// against `revisionIds[0]` (the candidate) and `revisionIds[1]` (else the published revision).
/// Both are immutable revisions, so a draft edit during the run moves nothing.
pub fn start_comparison(
    app: &App,
    p: &Principal,
    actor: &Actor,
    agent_id: &str,
    b: ComparisonBodyIn,
) -> Result<(bool, Comparison)> {
    p.require(Perm::AgentsManage)?;
    if b.revision_ids.is_empty() || b.revision_ids.len() > 2 {
        return Err(Error::invalid_field("revisionIds", "revisionIds takes 1 or 2 revision ids"));
    }
    if let Some(pol) = b.execution_policy.as_deref().filter(|p| *p != "safe_test") {
        return Err(Error::invalid_field("executionPolicy", format!("executionPolicy is safe_test, not {pol:?}")));
    }
    let r = request(b.mode, b.case_ids, Some(agent_id.to_string()), b.repeat, b.pass_threshold, b.idempotency_key)?;
    let ws = p.workspace_id.clone();
    let now = rfc3339(app.clock.now());
    let out = app.db.write(|tx| {
        if let Some(k) = &r.key {
            let sides = store::suites_by_key(tx, &ws.0, k)?;
            if let Some(cid) = sides.first().and_then(|s| s.comparison_id.clone()) {
                return Ok((false, Comparison { id: cid, agent_id: agent_id.to_string(), sides }));
            }
            if !sides.is_empty() {
                return Err(key_taken("a suite"));
            }
        }
        let agent = crate::agents::get_in(tx, &ws, agent_id)?;
        let baseline = match b.revision_ids.get(1) {
            Some(r) => r.clone(),
            None => agent.published_revision_id.clone().ok_or_else(|| {
                Error::invalid_field("revisionIds", "the agent has no published revision to compare with")
            })?,
        };
        for rid in [&b.revision_ids[0], &baseline] {
            crate::agents::revisions::snapshot_with_version(tx, agent_id, rid)?
                .ok_or_else(|| Error::not_found("revision"))?;
        }
        let (ids, skipped) = pick_cases(tx, &ws.0, &r)?;
        let cid = crate::ids::new_id();
        let mut sides = Vec::new();
        for (side, rid) in [("candidate", b.revision_ids[0].clone()), ("baseline", baseline)] {
            let mut s = new_suite(p, &r, ids.clone(), skipped.clone(), &now);
            s.comparison_id = Some(cid.clone());
            s.side = Some(side.into());
            s.revision_id = Some(rid);
            enqueue(app, tx, p, &s, r.key.as_deref())?;
            sides.push(store::suite(tx, &ws.0, &s.id)?.unwrap_or(s));
        }
        let meta = json!({"agentId": agent_id, "cases": ids.len(), "mode": r.mode});
        let ev = Event::new("eval.comparison.started").workspace(&ws).target("eval_comparison", &cid);
        audit::record(tx, &now, actor, ev.meta(meta))?;
        Ok((true, Comparison { id: cid, agent_id: agent_id.to_string(), sides }))
    })?;
    Ok(out)
}

pub fn get_comparison(app: &App, p: &Principal, agent_id: &str, id: &str) -> Result<Comparison> {
    p.require(Perm::AgentsRead)?;
    app.db.read(|c| {
        crate::agents::get_in(c, &p.workspace_id, agent_id)?;
        let sides = store::comparison(c, &p.workspace_id.0, id)?;
        if sides.is_empty() || sides.iter().any(|s| s.agent_id.as_deref() != Some(agent_id)) {
            return Err(Error::not_found("eval comparison"));
        }
        Ok(Comparison { id: id.to_string(), agent_id: agent_id.to_string(), sides })
    })
}

/// One case's result over its repeats.
fn case_result(case: &super::Case, runs: &[super::Run], threshold: u32) -> Value {
    let passes = runs.iter().filter(|r| r.status == "pass").count() as u32;
    let status = if passes >= threshold {
        "pass"
    } else if runs.iter().any(|r| r.status == "fail") {
        "fail"
    } else {
        "error"
    };
    let mut kinds: Vec<&str> = runs.iter().map(|r| r.status.as_str()).collect();
    kinds.dedup();
    let flaky = runs.windows(2).any(|w| w[0].status != w[1].status) || kinds.len() > 1 && runs.len() > 1;
    let reason = runs.iter().find(|r| r.status != "pass").or(runs.first()).and_then(|r| r.outcome_reason.clone());
    json!({"caseId": case.id, "name": case.name, "status": status, "runIds": runs.iter().map(|r| &r.id).collect::<Vec<_>>(),
        "passes": passes, "repeats": runs.len(), "flaky": flaky, "reason": reason})
}

/// The `eval.suite` job: the suite's remaining cases, one after another.
pub fn handle(app: &App, ctx: &JobCtx, payload: &JobPayload) -> Outcome {
    let (Some(id), Some(ws)) = (payload["suiteId"].as_str(), payload["workspaceId"].as_str()) else {
        return Outcome::Fail("no suiteId".into());
    };
    match run(app, ctx, &WorkspaceId(ws.to_string()), id) {
        Ok(Outcome::Retry { error, .. }) if ctx.attempt >= ctx.max_attempts => {
            let now = rfc3339(app.clock.now());
            let r = app.db.write(|tx| store::finish_suite(tx, id, "failed", None, Some(&error), &now));
            if let Err(e) = r {
                tracing::warn!(error = %e, "could not mark an eval suite failed");
            }
            Outcome::Done
        }
        Ok(o) => o,
        Err(e) => {
            let now = rfc3339(app.clock.now());
            let r = app.db.write(|tx| store::finish_suite(tx, id, "failed", None, Some(&e.message), &now));
            if let Err(e) = r {
                tracing::warn!(error = %e, "could not mark an eval suite failed");
            }
            Outcome::Done
        }
    }
}

/// Whether a run of this case in `mode` speaks for the case: a `retrieval_only` run scores
/// answer assertions as errors, so it moves the case only when every assertion is a retrieval one.
pub fn moves_case(mode: &str, case: &super::Case) -> bool {
    mode == "full_assistant" || case.assertions.iter().all(|a| !a.needs_answer())
}

/// One case of a suite: its missing repeats (a resumed suite keeps the runs it already made), then
/// the k-of-n result.
fn run_case(app: &App, ctx: &JobCtx, ws: &WorkspaceId, suite: &Suite, case_id: &str) -> Result<Value> {
    let found = app.db.read(|c| {
        let Some(case) = store::case(c, &ws.0, case_id)? else { return Ok(None) };
        let runs = store::suite_case_runs(c, &suite.id, case_id)?;
        Ok(store::snapshot(c, &ws.0, &case.snapshot_id)?.map(|s| (case, s, runs)))
    })?;
    let Some((case, snap, mut runs)) = found else {
        return Ok(
            json!({"caseId": case_id, "status": "error", "reason": "The case was deleted.", "runIds": [], "flaky": false}),
        );
    };
    let plan = Plan {
        mode: suite.mode.clone(),
        overrides: Overrides::default(),
        revision_id: suite.revision_id.clone(),
        suite_id: Some(suite.id.clone()),
    };
    while runs.len() < suite.repeat as usize {
        ctx.heartbeat();
        runs.push(replay::execute(app, ws, None, Some(&case), &snap, &plan)?);
    }
    let result = case_result(&case, &runs, suite.pass_threshold);
    // a plain suite of the published revision moves the case's status
    if suite.comparison_id.is_none()
        && suite.revision_id.is_none()
        && moves_case(&suite.mode, &case)
        && let Some(last) = runs.last()
    {
        let status = match result["status"].as_str() {
            Some("pass") => "passing",
            Some("fail") => "failing",
            _ => "error",
        };
        let now = rfc3339(app.clock.now());
        app.db
            .write(|tx| store::set_case_result(tx, &case.id, &last.assertions.to_string(), status, &last.id, &now))?;
    }
    Ok(result)
}

fn run(app: &App, ctx: &JobCtx, ws: &WorkspaceId, id: &str) -> Result<Outcome> {
    let Some(suite) = app.db.read(|c| store::suite(c, &ws.0, id))? else { return Ok(Outcome::Done) };
    if !suite.active() || !app.db.write(|tx| store::start_suite(tx, id))? {
        return Ok(Outcome::Done);
    }
    let mut results = suite.results.clone();
    let mut done = suite.done;
    for case_id in &suite.case_ids {
        if results.iter().any(|r| r["caseId"] == case_id.as_str()) {
            continue;
        }
        if ctx.stopping() {
            return Ok(Outcome::Release);
        }
        // one case that breaks (an error, a panic) is that case's error, not the suite's end
        let outcome =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_case(app, ctx, ws, &suite, case_id)));
        let result = match outcome {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => {
                json!({"caseId": case_id, "status": "error", "reason": format!("The case could not run: {}", e.message), "runIds": [], "flaky": false})
            }
            Err(_) => {
                json!({"caseId": case_id, "status": "error", "reason": "The case's run stopped unexpectedly.", "runIds": [], "flaky": false})
            }
        };
        results.push(result);
        // another worker that took the suite over (an expired lease) keeps it; this one stops
        if !app.db.write(|tx| store::suite_progress(tx, id, done, done + 1, &results))? {
            return Ok(Outcome::Done);
        }
        done += 1;
    }
    let now = rfc3339(app.clock.now());
    app.db.write(|tx| {
        let summary = super::api::summary(&store::summary(tx, &ws.0, None)?);
        store::finish_suite(tx, id, "completed", Some(&summary), None, &now)
    })?;
    Ok(Outcome::Done)
}
