//! The house rules of docs/ARCHITECTURE.md, checked by reading src/ (in the style of
//! rust-analyzer's `tidy.rs`). A rule names where a thing may appear; a file that breaks it fails
//! this test. Files that broke a rule before the rule existed are listed by name below; the lists
//! only shrink: a listed file that no longer breaks its rule fails the test too, so the entry is
//! removed as the file is fixed.

use std::path::{Path, PathBuf};

/// One house rule over one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rule {
    /// SQL (rusqlite) only in `storage/` and a module's private `store.rs`.
    SqlOutsideStore,
    /// axum only in `http/`.
    AxumOutsideHttp,
    /// The search engines only in `search/`.
    SearchEngineOutsideSearch,
    /// Outbound HTTP clients only in `models/` (and later `delivery/`, `connectors/`); the bench
    /// harness and the eval gate (`evals/gate.rs`) are clients of a Steward server.
    HttpClientOutsideModels,
    /// camelCase wire shapes only at the edge: `http/` or a module's `api.rs`.
    CamelCaseOutsideEdge,
    /// Routes are added only through `http::openapi::Routes` (each with its OpenAPI operation):
    /// axum's `Router` and `routing` are named only in `http/openapi/` and `http/mod.rs`.
    RouteOutsideRoutes,
    /// Every file starts with a `//!` module doc.
    NoModuleDoc,
    /// No source file passes 800 lines.
    TooLong,
}

const MAX_LINES: usize = 800;

/// The rules `text` (the file at `path`, relative to the repository) breaks.
fn violations(path: &str, text: &str) -> Vec<Rule> {
    let code: String = text
        .lines()
        .filter(|l| {
            let t = l.trim_start();
            !t.starts_with("//")
        })
        .collect::<Vec<_>>()
        .join("\n");
    let under = |dir: &str| path.starts_with(dir);
    let mut out = Vec::new();
    if (code.contains("rusqlite") || has_sql(&code)) && !under("src/storage/") && !path.ends_with("/store.rs") {
        out.push(Rule::SqlOutsideStore);
    }
    if code.contains("axum::") && !under("src/http/") {
        out.push(Rule::AxumOutsideHttp);
    }
    if (code.contains("tantivy::") || code.contains("usearch::")) && !under("src/search/") {
        out.push(Rule::SearchEngineOutsideSearch);
    }
    let client = ["reqwest::Client", "reqwest::blocking", "Client::builder", "ClientBuilder"];
    let allowed_client = ["src/models/", "src/delivery/", "src/connectors/", "src/bench/", "src/evals/gate.rs"];
    if client.iter().any(|c| code.contains(c)) && !allowed_client.iter().any(|d| under(d)) {
        out.push(Rule::HttpClientOutsideModels);
    }
    if code.contains("rename_all = \"camelCase\"") && !under("src/http/") && !path.ends_with("/api.rs") {
        out.push(Rule::CamelCaseOutsideEdge);
    }
    let routing = ["Router::new", "Router<", "axum::routing", ".route(", ".nest_service(", "axum::Router"];
    if routing.iter().any(|r| code.contains(r)) && !under("src/http/openapi/") && path != "src/http/mod.rs" {
        out.push(Rule::RouteOutsideRoutes);
    }
    if !text.starts_with("//!") {
        out.push(Rule::NoModuleDoc);
    }
    if text.lines().count() > MAX_LINES {
        out.push(Rule::TooLong);
    }
    out
}

/// Whether `code` holds an SQL statement in a string literal (a file can reach SQL through
/// `storage`'s re-exports without naming rusqlite).
fn has_sql(code: &str) -> bool {
    const STARTS: [&str; 6] = ["SELECT ", "INSERT INTO ", "INSERT OR ", "UPDATE ", "DELETE FROM ", "WITH "];
    code.match_indices('"').any(|(i, _)| {
        let rest = code[i + 1..].trim_start();
        STARTS.iter().any(|s| rest.starts_with(s))
            && rest.split('"').next().is_some_and(|lit| {
                lit.contains(" FROM ") || lit.contains(" SET ") || lit.contains(" VALUES") || lit.starts_with("DELETE")
            })
    })
}

/// Files that broke a rule when the rule was written (issue 16 works these lists down).
const KNOWN: &[(Rule, &[&str])] = &[
    (Rule::SqlOutsideStore, &[]),
    (
        Rule::CamelCaseOutsideEdge,
        &[
            "src/agents/context.rs",
            "src/agents/directives.rs",
            "src/agents/config.rs",
            "src/agents/revisions.rs",
            "src/agents/skills.rs",
            "src/auth/mod.rs",
            "src/auth/tokens.rs",
            "src/bench/cranfield.rs",
            "src/documents/extract/isolate.rs",
            "src/documents/mod.rs",
            "src/models/chat/mod.rs",
            "src/models/extractive.rs",
            "src/search/query.rs",
            "src/search/store.rs",
            "src/settings/ingestion.rs",
            "src/turn/answer.rs",
            "src/turn/test_exec.rs",
            "src/turn/trace.rs",
        ],
    ),
];

fn known(rule: Rule, path: &str) -> bool {
    KNOWN.iter().any(|(r, files)| *r == rule && files.contains(&path))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src/").flatten() {
        let p = entry.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn src_keeps_the_house_rules() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    files.sort();
    assert!(files.len() > 50, "src/ was not found");
    let mut problems = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
        let text = std::fs::read_to_string(f).unwrap();
        let found = violations(&rel, &text);
        for rule in &found {
            if !known(*rule, &rel) {
                problems.push(format!("{rel}: breaks {rule:?}"));
            }
        }
        for (rule, listed) in KNOWN {
            if listed.contains(&rel.as_str()) && !found.contains(rule) {
                problems.push(format!("{rel}: keeps {rule:?} now; remove it from KNOWN"));
            }
        }
    }
    for (rule, listed) in KNOWN {
        for l in *listed {
            if !root.join(l).exists() {
                problems.push(format!("{l}: listed for {rule:?} but gone; remove it from KNOWN"));
            }
        }
    }
    assert!(problems.is_empty(), "house rules (docs/ARCHITECTURE.md, Invariants):\n{}", problems.join("\n"));
}

#[test]
fn each_rule_catches_what_it_names() {
    let doc = "//! A module.\n";
    assert_eq!(violations("src/agents/mod.rs", &format!("{doc}use rusqlite::params;")), [Rule::SqlOutsideStore]);
    assert!(violations("src/agents/store.rs", &format!("{doc}use rusqlite::params;")).is_empty());
    let sql = format!("{doc}tx.execute(\"DELETE FROM agents WHERE id = ?1\", [id])?;");
    assert_eq!(violations("src/agents/mod.rs", &sql), [Rule::SqlOutsideStore]);
    assert!(violations("src/agents/mod.rs", &format!("{doc}let m = \"SELECT a reason\";")).is_empty());
    assert!(violations("src/storage/mod.rs", &format!("{doc}use rusqlite::params;")).is_empty());
    assert_eq!(violations("src/turn/mod.rs", &format!("{doc}use axum::Json;")), [Rule::AxumOutsideHttp]);
    assert!(violations("src/http/mod.rs", &format!("{doc}use axum::Json;")).is_empty());
    assert_eq!(violations("src/models/x.rs", &format!("{doc}use tantivy::Index;")), [Rule::SearchEngineOutsideSearch]);
    assert_eq!(
        violations("src/agents/x.rs", &format!("{doc}let c = reqwest::Client::new();")),
        [Rule::HttpClientOutsideModels]
    );
    assert!(violations("src/models/x.rs", &format!("{doc}let c = reqwest::Client::new();")).is_empty());
    let camel = format!("{doc}#[serde(rename_all = \"camelCase\")]\nstruct A;");
    assert_eq!(violations("src/agents/x.rs", &camel), [Rule::CamelCaseOutsideEdge]);
    assert!(violations("src/agents/api.rs", &camel).is_empty());
    let route = format!("{doc}fn r() -> axum::Router {{ axum::Router::new() }}");
    assert_eq!(violations("src/http/routes/x.rs", &route), [Rule::RouteOutsideRoutes]);
    assert!(violations("src/http/openapi/mod.rs", &route).is_empty());
    assert_eq!(violations("src/agents/x.rs", "fn f() {}"), [Rule::NoModuleDoc]);
    let long = format!("{doc}{}", "fn f() {}\n".repeat(MAX_LINES));
    assert_eq!(violations("src/agents/x.rs", &long), [Rule::TooLong]);
    // a rule named in a comment is not a use
    assert!(violations("src/error.rs", "//! Knows nothing about axum::Json or rusqlite.\n").is_empty());
}
