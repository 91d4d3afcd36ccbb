//! The README's commands work as printed: every command it shows names something a fresh checkout
//! has, and the first-user, ask-a-question and backup blocks run against the real binary.

use std::path::Path;
use std::process::Command;

use crate::e2e::{BIN, Server};

/// The shell blocks of README.md, in order, with their nearest `## ` heading.
pub fn shell_blocks() -> Vec<(String, String)> {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let mut out = Vec::new();
    let (mut heading, mut block, mut inside) = (String::new(), String::new(), false);
    for line in readme.lines() {
        if let Some(h) = line.strip_prefix("## ") {
            heading = h.trim().to_string();
        }
        if inside {
            if line.starts_with("```") {
                out.push((heading.clone(), std::mem::take(&mut block)));
                inside = false;
            } else {
                block.push_str(line);
                block.push('\n');
            }
        } else if line.starts_with("```sh") {
            inside = true;
        }
    }
    out
}

/// The commands of a block (continuation lines joined).
fn commands(block: &str) -> Vec<String> {
    block
        .replace("\\\n", " ")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

#[test]
fn every_command_the_readme_shows_names_something_a_checkout_has() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let blocks = shell_blocks();
    assert!(blocks.len() >= 4, "{blocks:?}");
    for (heading, block) in &blocks {
        for cmd in commands(block) {
            let cmd = cmd.strip_prefix("sudo ").unwrap_or(&cmd).to_string();
            let program = cmd.strip_prefix("TOKEN=$(").unwrap_or(&cmd).split_whitespace().next().unwrap().to_string();
            if program == "curl" {
                continue;
            }
            // on the server a release is installed on: the system's tools and the unpacked release
            // (tests/it/release.rs runs that block as printed)
            if heading == "Release and install"
                && (["tar", "systemctl", "podman"].contains(&program.as_str())
                    || program.starts_with("steward-") && program.ends_with("-linux/install.sh"))
            {
                continue;
            }
            let path = root.join(&program);
            assert!(program.starts_with("scripts/"), "{cmd:?}: a newcomer has no {program:?} on PATH");
            let meta = std::fs::metadata(&path).unwrap_or_else(|_| panic!("{cmd:?}: {program} does not exist"));
            assert!(
                std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o111 != 0,
                "{program} is not executable"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_first_user_ask_a_question_and_backup_blocks_run_as_printed() {
    if crate::support::sqlite_mode_only("the README's blocks run the default SQLite mode, backup included") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let blocks = shell_blocks();
    let pick = |heading: &str| {
        blocks
            .iter()
            .find(|(h, _)| h == heading)
            .map(|(_, b)| b.clone())
            .unwrap_or_else(|| panic!("no block under {heading}"))
    };
    // the server must exist before the bootstrap's token is used; the data dir is shared
    let first = pick("First user");
    let ask = pick("Ask a question");
    // bootstrap needs no running server (it takes no lock), so run it first, then start serving
    let server = Server::start(&data, &[]);
    // and the backup commands, in a scratch directory: a backup of the running server, its
    // restore into a new directory and its verification, then the owner's download
    let backups: String = blocks
        .iter()
        .filter(|(h, _)| h == "Back up and restore")
        .map(|(_, b)| b.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(backups.contains("backup") && backups.contains("restore") && backups.contains("verify"), "{backups}");
    let script = format!("set -euo pipefail\n{first}\n{ask}\n{backups}")
        .replace("scripts/steward", BIN)
        .replace("http://127.0.0.1:8080", &server.base)
        .replace("curl ", "curl --fail-with-body -sS ");
    let out = Command::new("bash")
        .arg("-c")
        .arg(&script)
        .env("STEWARD_DATA_DIR", &data)
        .env("STEWARD_LOG", "warn")
        .current_dir(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "README commands failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("is consistent"), "verify of the restored copy: {stdout}");
    assert!(dir.path().join("restored/steward.db").is_file() && dir.path().join("steward-backup.tar.zst").is_file());
    assert!(stdout.contains("\"email\":\"you@example.com\""), "auth/me answered: {stdout}");
    assert!(stdout.contains("9:00"), "the answer quotes the document: {stdout}");
    server.terminate();
}
