//! What `/readyz` and `steward doctor` check.

use crate::app::App;

pub struct Check {
    pub name: &'static str,
    pub ok: bool,
    /// Working, but not fully: the server answers (search while its indexes are rebuilt).
    pub degraded: bool,
    pub message: String,
}

fn item(name: &'static str, r: Result<String, String>) -> Check {
    match r {
        Ok(message) => Check { name, ok: true, degraded: false, message },
        Err(message) => Check { name, ok: false, degraded: false, message },
    }
}

/// The search indexes: complete, or being rebuilt from the database (degraded: search answers
/// from the chunks rebuilt so far), or behind the database's change log by `lag` operations (on
/// PostgreSQL, while a node applies what the others wrote; degraded too).
fn search(app: &App, lag: Option<i64>) -> Check {
    match app.search() {
        Err(e) => item("search", Err(e.message)),
        Ok(s) => match (s.rebuild_status(), lag.unwrap_or(0)) {
            (None, 0) => item("search", Ok("the indexes are complete".into())),
            (None, lag) => Check {
                name: "search",
                ok: true,
                degraded: true,
                message: format!(
                    "the indexes are {lag} changes behind the database; search answers from what is applied"
                ),
            },
            (Some(r), _) => Check {
                name: "search",
                ok: true,
                degraded: true,
                message: format!("{}; search answers from what is rebuilt so far", r.describe()),
            },
        },
    }
}

/// Index operations this node has not applied yet (`None` without indexes or a database answer).
pub fn index_lag(app: &App) -> Option<i64> {
    app.search().ok()?.lag(&app.db).ok()
}

pub fn check(app: &App, lag: Option<i64>) -> Vec<Check> {
    let mut out = vec![
        item("database", app.db.ping().map(|_| "answering".to_string()).map_err(|e| e.to_string())),
        item(
            "migrations",
            match app.db.migration_status() {
                Ok(st) if st.is_current() => Ok(format!("{} applied", st.applied.len())),
                Ok(st) => {
                    Err(format!("pending {:?}, unknown {:?}, modified {:?}", st.pending, st.unknown, st.modified))
                }
                Err(e) => Err(e.to_string()),
            },
        ),
    ];
    let alive = app.jobs.workers_alive();
    out.push(item(
        "workers",
        if app.jobs.is_stopping() {
            Err("shutting down".into())
        } else if alive >= app.config.workers {
            Ok(format!("{alive} running, {} busy", app.jobs.busy()))
        } else {
            Err(format!("{alive} of {} worker threads running", app.config.workers))
        },
    ));
    out.push(search(app, lag));
    out.push(item(
        "models",
        match app.models.embedder_status() {
            Some(Ok(())) => Ok("embedding model loaded".into()),
            Some(Err(e)) => Err(e),
            None => crate::models::locate::embedding(&app.config)
                .map(|f| format!("embedding model found in {} (loads on first use)", f.dir.display()))
                .map_err(|m| m.to_string()),
        },
    ));
    out
}
