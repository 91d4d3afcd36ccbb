//! Parsing untrusted binary files in a child `steward` process (`steward internal extract`) with a
//! wall-clock timeout and CPU and memory limits. A crash, hang or memory blow-up in a parser fails
//! that one document with a reason; the server is untouched.
#![allow(clippy::print_stdout, reason = "the extraction child answers its parent on stdout")]

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{ExtractError, Extracted, Format, extract_in_process};

/// Memory the child may map (address space).
const CHILD_MEMORY_BYTES: u64 = 2 * 1024 * 1024 * 1024;

#[derive(serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
enum ChildResult {
    Ok(Extracted),
    Error(String),
}

/// Extracts `path` (of `format`) with `exe internal extract` when `exe` is given, else in this
/// process behind `catch_unwind`.
pub fn extract_isolated(
    exe: Option<&Path>,
    path: &Path,
    format: &Format,
    timeout: Duration,
) -> Result<Extracted, ExtractError> {
    let Some(exe) = exe else {
        let bytes = std::fs::read(path).map_err(|e| ExtractError(format!("the stored file cannot be read ({e})")))?;
        return std::panic::catch_unwind(|| extract_in_process(&bytes, format))
            .unwrap_or_else(|_| Err(ExtractError("the file could not be read (the reader crashed on it)".into())));
    };
    let mut child = Command::new(exe)
        .args(["internal", "extract", "--format", &format.name()])
        .arg(path)
        .env("STEWARD_LOG", "error")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| ExtractError(format!("the file reader could not start ({e})")))?;
    #[allow(clippy::expect_used, reason = "stdout is piped by the spawn above")]
    let mut stdout = child.stdout.take().expect("piped stdout");
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        let _ = stdout.read_to_end(&mut out);
        out
    });
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if started.elapsed() >= timeout => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(_) => break None,
        }
    };
    let out = reader.join().unwrap_or_default();
    let Some(status) = status else {
        return Err(ExtractError(format!("reading the file took longer than {} s and was stopped", timeout.as_secs())));
    };
    match serde_json::from_slice::<ChildResult>(&out) {
        Ok(ChildResult::Ok(x)) => Ok(x),
        Ok(ChildResult::Error(reason)) => Err(ExtractError(reason)),
        Err(_) if !status.success() => {
            Err(ExtractError("the file could not be read: the reader ran out of memory or crashed on it".into()))
        }
        Err(e) => Err(ExtractError(format!("the file reader answered nonsense ({e})"))),
    }
}

/// The child side: limits itself, extracts, prints one JSON result on stdout.
pub fn run_child(format: &str, path: &Path) -> i32 {
    limit_self();
    let result = match Format::parse(format) {
        None => ChildResult::Error(format!("unknown format {format}")),
        Some(f) => match std::fs::read(path) {
            Err(e) => ChildResult::Error(format!("the stored file cannot be read ({e})")),
            Ok(bytes) => match std::panic::catch_unwind(|| extract_in_process(&bytes, &f)) {
                Ok(Ok(x)) => ChildResult::Ok(x),
                Ok(Err(e)) => ChildResult::Error(e.0),
                Err(_) => ChildResult::Error("the file could not be read (the reader crashed on it)".into()),
            },
        },
    };
    match serde_json::to_string(&result) {
        Ok(s) => {
            println!("{s}");
            0
        }
        Err(_) => 1,
    }
}

fn limit_self() {
    #[cfg(unix)]
    unsafe {
        let mem = libc::rlimit { rlim_cur: CHILD_MEMORY_BYTES, rlim_max: CHILD_MEMORY_BYTES };
        libc::setrlimit(libc::RLIMIT_AS, &mem);
        let cpu = libc::rlimit { rlim_cur: 300, rlim_max: 300 };
        libc::setrlimit(libc::RLIMIT_CPU, &cpu);
    }
}
