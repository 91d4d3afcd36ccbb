//! The command line: `serve` (the default), `admin bootstrap`, `doctor`, and the maintenance and
//! benchmark commands.
#![allow(clippy::print_stdout, reason = "the command line prints its results")]

mod data_dir;

use data_dir::{backup, migrate_store, newer_refusal, restore, verify};
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};

use crate::app::{App, Options};
use crate::config::{self, CliOverrides, Config, LogFormat};

const ABOUT: &str = "Steward: AI agents that answer your customers from your own documents, in one self-hosted binary.";
const LONG_ABOUT: &str =
    "Steward: AI agents that answer your customers from your own documents, in one self-hosted binary.

Run with no command to start the server (the same as `steward serve`). Settings come from, lowest to
highest precedence: built-in defaults, the TOML file named by --config, environment variables, and
flags. Every flag below also reads the environment variable shown beside it.

First steps:
  steward admin bootstrap --email you@example.com --password '...' --print-token
  steward admin test-email --to you@example.com
  steward serve --listen 127.0.0.1:8080
  steward doctor            # explains what is wrong with the data dir, database or models";

#[derive(Parser, Debug)]
#[command(name = "steward", version, about = ABOUT, long_about = LONG_ABOUT)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(flatten)]
    pub serve: ServeArgs,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Args, Debug, Clone, Default)]
pub struct GlobalArgs {
    /// TOML configuration file (keys: see docs/configuration.md).
    #[arg(long, env = "STEWARD_CONFIG", global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Where Steward keeps its database, uploaded files and search indexes
    /// [default: ~/.local/share/steward/data].
    #[arg(long, env = "STEWARD_DATA_DIR", global = true, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Directory holding the model files (minilm/, onnxruntime/, smollm2/); searched alone when set.
    #[arg(long, env = "STEWARD_MODELS_DIR", global = true, value_name = "DIR")]
    pub models_dir: Option<PathBuf>,
    /// Log format.
    #[arg(long, env = "STEWARD_LOG_FORMAT", global = true, value_enum)]
    pub log_format: Option<LogFormat>,
    /// Log filter, e.g. `info` or `steward=debug,tower_http=info`.
    #[arg(long, env = "STEWARD_LOG", global = true, value_name = "FILTER")]
    pub log_level: Option<String>,
}

#[derive(Args, Debug, Clone, Default)]
pub struct ServeArgs {
    /// Address to listen on [default: 127.0.0.1:8080]; port 0 picks a free port.
    #[arg(long, env = "STEWARD_LISTEN", value_name = "ADDR")]
    pub listen: Option<SocketAddr>,
    /// Background worker threads [default: the number of cores, 2 to 8].
    #[arg(long, env = "STEWARD_WORKERS", value_name = "N")]
    pub workers: Option<usize>,
    /// Keep the rows in this PostgreSQL database instead of SQLite in the data directory
    /// (postgres://user@host:5432/database; also STEWARD_DATABASE_URL). Preview: docs/scale-out.md.
    #[arg(long, value_name = "URL", value_parser = database_url)]
    pub database: Option<crate::config::Secret<String>>,
}

/// `--database`: a PostgreSQL URL, kept out of `Debug` output.
fn database_url(s: &str) -> Result<crate::config::Secret<String>, String> {
    if crate::storage::postgres::is_url(s) {
        Ok(crate::config::Secret::new(s.to_string()))
    } else {
        Err("must be a PostgreSQL URL (postgres://user@host:5432/database)".into())
    }
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the server (the default command).
    Serve(ServeArgs),
    /// Administration for headless and air-gapped installs.
    Admin {
        #[command(subcommand)]
        command: AdminCommand,
    },
    /// Check the data directory, database, migrations and model files, and say what is wrong.
    Doctor,
    /// Rebuild the search indexes from the database (stop the server first).
    Reindex,
    /// Back up the data directory into one archive (database, stored originals, manifest); safe
    /// while the server runs and takes writes.
    Backup {
        /// The archive to write (`.tar.zst`); replaced if it exists.
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
    },
    /// Restore a backup archive into the data directory (--data-dir). Everything is checked before
    /// anything is written; the search indexes are rebuilt at the next start.
    Restore {
        /// The archive `steward backup` (or `POST /api/v1/admin/backup`) made.
        #[arg(value_name = "FILE")]
        file: PathBuf,
        /// Replace the database, originals and indexes of a data directory that is not empty.
        #[arg(long)]
        force: bool,
    },
    /// Check the data directory with the server stopped: database integrity, stored originals,
    /// orphan files, and every document's chunks in both search indexes. Exit status 1 on a problem.
    Verify,
    /// Copy this install into an empty PostgreSQL database: every table and stored original, with
    /// row counts and checksums verified per table (stop the server first). Serving from
    /// PostgreSQL is not built yet: docs/scale-out.md.
    MigrateStore {
        /// The data directory to copy from [default: --data-dir].
        #[arg(long, value_name = "DATA_DIR")]
        from: Option<PathBuf>,
        /// The empty PostgreSQL database to copy into (postgres://user@host:port/database; the
        /// password may come from PGPASSWORD instead of the URL).
        #[arg(long, value_name = "URL")]
        to: String,
        /// Write text holding a NUL character (U+0000), which PostgreSQL cannot store, with U+FFFD
        /// instead (reported per column); without it such text stops the copy and is named.
        #[arg(long)]
        replace_nul: bool,
    },
    /// The model files this install has.
    Models {
        #[command(subcommand)]
        command: ModelsCommand,
    },
    /// Internal helpers the server runs as child processes.
    #[command(hide = true)]
    Internal {
        #[command(subcommand)]
        command: InternalCommand,
    },
    /// Evals against a running server (a CI gate: exits 1 on a regression or a low pass rate).
    Eval {
        #[command(subcommand)]
        command: EvalCommand,
    },
    /// Benchmarks (figures in docs/performance.md).
    Bench {
        #[command(subcommand)]
        command: crate::bench::command::BenchCommand,
    },
}

#[derive(Subcommand, Debug)]
pub enum EvalCommand {
    /// Run the eval suite (or a candidate revision against the published one) on a server and
    /// wait for it; print each case, write JUnit XML with --junit.
    Run(crate::evals::gate::GateArgs),
}

#[derive(Subcommand, Debug)]
pub enum ModelsCommand {
    /// List the embedding and chat models: where each file is, its size, whether its hash is the
    /// pinned release's, and which embedding models workspaces can choose.
    List,
}

#[derive(Subcommand, Debug)]
pub enum InternalCommand {
    /// Extract the text of an uploaded file (run in a child process with limits).
    Extract {
        #[arg(long)]
        format: String,
        path: PathBuf,
    },
}

#[derive(Subcommand, Debug)]
pub enum AdminCommand {
    /// Create the organization, its default workspace and the owner (if they do not exist yet).
    Bootstrap {
        /// The owner's email.
        #[arg(long)]
        email: String,
        /// The owner's password (at least 8 characters).
        #[arg(long, env = "STEWARD_BOOTSTRAP_PASSWORD", hide_env_values = true)]
        password: String,
        /// The owner's display name.
        #[arg(long)]
        name: Option<String>,
        /// Mint a personal access token with every permission and print it alone on stdout.
        #[arg(long)]
        print_token: bool,
    },
    /// Send a test message through the configured SMTP server (`STEWARD_SMTP_*` or `[smtp]`) and
    /// print what the server answered.
    TestEmail {
        /// The recipient.
        #[arg(long)]
        to: String,
    },
}

fn overrides(global: &GlobalArgs, serve: &ServeArgs) -> CliOverrides {
    CliOverrides {
        config_file: global.config.clone(),
        data_dir: global.data_dir.clone(),
        models_dir: global.models_dir.clone(),
        log_format: global.log_format,
        log_level: global.log_level.clone(),
        listen: serve.listen,
        workers: serve.workers,
        database: serve.database.clone(),
    }
}

pub fn init_tracing(config: &Config) {
    use tracing_subscriber::EnvFilter;
    // the MCP SDK logs what clients send (their info, notifications, unknown methods) at INFO and
    // WARN: client text never reaches our log, so it speaks only of errors unless asked by name
    let level = if config.log_level.contains("rmcp") {
        config.log_level.clone()
    } else {
        format!("{},rmcp=error", config.log_level)
    };
    let filter = EnvFilter::try_new(&level).unwrap_or_else(|_| EnvFilter::new("info,rmcp=error"));
    // colour only on a terminal: a file, a pipe or the journal gets plain text (and NO_COLOR is honoured)
    let ansi = colour_log(std::io::IsTerminal::is_terminal(&std::io::stderr()), std::env::var_os("NO_COLOR"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi);
    let _ = match config.log_format {
        LogFormat::Json => builder.json().flatten_event(true).with_current_span(true).try_init(),
        LogFormat::Text => builder.try_init(),
    };
}

/// Whether the text log is coloured: only when it goes to a terminal and `NO_COLOR` is unset or
/// empty (<https://no-color.org>).
fn colour_log(terminal: bool, no_color: Option<std::ffi::OsString>) -> bool {
    terminal && no_color.is_none_or(|v| v.is_empty())
}

/// Replaces the default panic output (which prints the panic's message, and a message can quote a
/// visitor's or a document's text, e.g. a slice error shows the string) with one log line: where
/// it happened and on which thread, inside the current span, so a request's or job's id is on it.
pub fn install_panic_hook() {
    std::panic::set_hook(Box::new(log_panic));
}

fn log_panic(info: &std::panic::PanicHookInfo<'_>) {
    let location = info.location().map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column()));
    let thread = std::thread::current().name().map(str::to_string);
    tracing::error!(
        location = location.as_deref().unwrap_or("unknown"),
        thread = thread.as_deref().unwrap_or("unnamed"),
        "panicked (the message is withheld: it may quote user or document text)"
    );
}

pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    install_panic_hook();
    match cli.command {
        None => serve(overrides(&cli.global, &cli.serve)),
        Some(Command::Serve(args)) => {
            let merged = ServeArgs {
                listen: args.listen.or(cli.serve.listen),
                workers: args.workers.or(cli.serve.workers),
                database: args.database.or(cli.serve.database),
            };
            serve(overrides(&cli.global, &merged))
        }
        Some(Command::Admin { command }) => {
            let config = config::load(&overrides(&cli.global, &cli.serve))?;
            init_tracing(&Config { log_level: "warn".into(), ..config.clone() });
            if let Some(code) = newer_refusal(&config) {
                return Ok(code);
            }
            admin(config, command)
        }
        Some(Command::Eval { command: EvalCommand::Run(args) }) => Ok(ExitCode::from(crate::evals::gate::run(&args))),
        Some(Command::Bench { command }) => {
            let config = config::load(&overrides(&cli.global, &cli.serve))?;
            init_tracing(&Config { log_level: "warn".into(), ..config.clone() });
            crate::bench::command::run(config, command)
        }
        Some(Command::Internal { command: InternalCommand::Extract { format, path } }) => {
            let code = crate::documents::extract::run_child(&format, &path);
            Ok(ExitCode::from(code as u8))
        }
        Some(Command::Reindex) => {
            let config = config::load(&overrides(&cli.global, &cli.serve))?;
            init_tracing(&config);
            if let Some(code) = newer_refusal(&config) {
                return Ok(code);
            }
            let started = std::time::Instant::now();
            let app = App::build(config, Options::default()).map_err(|e| anyhow::anyhow!("{e}"))?;
            let n = app.search().and_then(|s| s.rebuild(&app.db)).map_err(|e| anyhow::anyhow!("{e}"))?;
            println!(
                "rebuilt the search indexes from the database: {n} chunks in {:.1} s",
                started.elapsed().as_secs_f64()
            );
            app.shutdown();
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Backup { out }) => {
            let config = config::load(&overrides(&cli.global, &cli.serve))?;
            init_tracing(&Config { log_level: "warn".into(), ..config.clone() });
            if let Some(code) = newer_refusal(&config) {
                return Ok(code);
            }
            backup(&config, &out)
        }
        Some(Command::Restore { file, force }) => {
            let config = config::load(&overrides(&cli.global, &cli.serve))?;
            init_tracing(&Config { log_level: "warn".into(), ..config.clone() });
            restore(&config, &file, force)
        }
        Some(Command::Verify) => {
            let config = config::load(&overrides(&cli.global, &cli.serve))?;
            init_tracing(&Config { log_level: "warn".into(), ..config.clone() });
            if let Some(code) = newer_refusal(&config) {
                return Ok(code);
            }
            verify(&config)
        }
        Some(Command::MigrateStore { from, to, replace_nul }) => {
            let config = config::load(&overrides(&cli.global, &cli.serve))?;
            init_tracing(&Config { log_level: "warn".into(), ..config.clone() });
            migrate_store(&from.unwrap_or_else(|| config.data_dir.clone()), &to, replace_nul)
        }
        Some(Command::Doctor) => {
            let config = config::load(&overrides(&cli.global, &cli.serve))?;
            Ok(doctor(&config))
        }
        Some(Command::Models { command: ModelsCommand::List }) => {
            let config = config::load(&overrides(&cli.global, &cli.serve))?;
            models_list(&config);
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn models_list(config: &Config) {
    use crate::models::{embed, locate};
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "Embedding models (a workspace's knowledge settings choose one):");
    let models = crate::models::Models::new(config);
    for m in embed::MODELS {
        let space = models.space_of(m);
        let state = if models.installed(m) { "installed" } else { "not installed" };
        let _ = writeln!(out, "  {:<24} {:<46} up to {} tokens  {state}", m.id, m.name, space.max_tokens);
    }
    let _ = writeln!(out, "\nFiles:");
    for f in locate::inventory(config) {
        let size = f.bytes.map(|b| format!("{:.1} MB", b as f64 / 1e6)).unwrap_or_default();
        let state = match (&f.path, f.verified) {
            (None, _) if f.required => "MISSING (required)".to_string(),
            (None, _) => "not installed (optional)".to_string(),
            (Some(_), Some(true)) => "ok (hash verified)".to_string(),
            (Some(_), Some(false)) => "hash differs from the pinned release".to_string(),
            (Some(_), None) => "ok".to_string(),
        };
        let at = f.path.as_ref().map(|p| p.display().to_string()).unwrap_or_else(|| "-".into());
        let _ = writeln!(out, "  {:<42} {:>9}  {state}\n      {}\n      {at}", f.relative, size, f.what);
    }
    if locate::models_dir(config).is_none() {
        let _ = writeln!(out, "\nNo models directory found; {}", locate::FETCH_HINT);
    }
}

fn serve(ov: CliOverrides) -> anyhow::Result<ExitCode> {
    let config = config::load(&ov)?;
    init_tracing(&config);
    if let Some(code) = newer_refusal(&config) {
        return Ok(code);
    }
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().thread_name("steward-http").build()?;
    rt.block_on(async move {
        let listen = config.listen;
        let app = App::build(config, Options::default()).map_err(|e| anyhow::anyhow!("{e}"))?;
        app.start_background();
        let listener =
            tokio::net::TcpListener::bind(listen).await.with_context(|| format!("cannot listen on {listen}"))?;
        let addr = listener.local_addr()?;
        let places = Places::of(&app.config);
        tracing::info!(
            %addr,
            data_dir = %places.data,
            models_dir = %places.models,
            logs = %places.logs,
            "steward is listening"
        );
        // one write: the first line is what scripts and tests wait for; a closed stdout is no error
        let _ = std::io::stdout().lock().write_all(places.banner(addr).as_bytes());
        let _ = std::io::stdout().flush();
        crate::http::serve(app.clone(), listener, shutdown_signal()).await?;
        tracing::info!("stopped accepting requests; finishing background work");
        let app2 = app.clone();
        tokio::task::spawn_blocking(move || app2.shutdown()).await?;
        tracing::info!("bye");
        Ok::<_, anyhow::Error>(())
    })?;
    Ok(ExitCode::SUCCESS)
}

/// Where this server keeps its data, finds its models and writes its logs, as the start-up banner
/// names them.
struct Places {
    data: String,
    models: String,
    logs: String,
}

impl Places {
    fn of(config: &Config) -> Places {
        let data = std::path::absolute(&config.data_dir).unwrap_or_else(|_| config.data_dir.clone());
        let models = match crate::models::locate::embedding(config) {
            Ok(files) => files.dir.display().to_string(),
            Err(_) => "none found (steward doctor says where it looked)".to_string(),
        };
        let format = match config.log_format {
            LogFormat::Text => "text",
            LogFormat::Json => "json, one object per line",
        };
        let sink = if on_journal(std::env::var("JOURNAL_STREAM").ok().as_deref()) {
            "standard error, into the systemd journal (journalctl -u steward)"
        } else {
            "standard error"
        };
        Places {
            data: data.display().to_string(),
            models,
            logs: format!("{sink}; {format}; level {}", config.log_level),
        }
    }

    fn banner(&self, addr: SocketAddr) -> String {
        format!(
            "steward listening on http://{addr}\n  data:   {}\n  models: {}\n  logs:   {}\n",
            self.data, self.models, self.logs
        )
    }
}

/// Whether standard error is the systemd journal's stream: `JOURNAL_STREAM` (`device:inode`, set by
/// systemd) names the file standard error is.
fn on_journal(journal_stream: Option<&str>) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Some((dev, ino)) = journal_stream.and_then(|v| v.split_once(':')) else {
        return false;
    };
    std::fs::metadata("/proc/self/fd/2").is_ok_and(|m| dev.parse() == Ok(m.dev()) && ino.parse() == Ok(m.ino()))
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
    tracing::info!("shutdown signal received");
}

fn admin(config: Config, cmd: AdminCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        AdminCommand::Bootstrap { email, password, name, print_token } => {
            let app = App::build(config, Options { lock_data_dir: false, ..Default::default() })
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            let b = crate::auth::accounts::bootstrap(&app, &email, &password, name, print_token)
                .map_err(|e| anyhow::anyhow!("{}", e.message))?;
            if b.created_organization {
                eprintln!(
                    "created organization {:?} with workspace {:?} and owner {}",
                    b.organization.name, b.workspace.name, b.user.email
                );
            } else {
                eprintln!("already set up: organization {:?}, owner {}", b.organization.name, b.user.email);
            }
            if let Some(t) = b.token {
                eprintln!("personal access token (shown once; send it as Authorization: Bearer <token>):");
                println!("{t}");
            }
            Ok(ExitCode::SUCCESS)
        }
        AdminCommand::TestEmail { to } => {
            if config.smtp.is_none() {
                anyhow::bail!("{}", crate::delivery::email_not_configured());
            }
            let app = App::build(config, Options { lock_data_dir: false, ..Default::default() })
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            let a = crate::delivery::send_test_email(&app, &to).map_err(|e| anyhow::anyhow!("{}", e.message))?;
            let code = a.code.map(|c| c.to_string()).unwrap_or_else(|| "no answer".into());
            println!("{} {code} {} ({} ms)", if a.ok { "sent:" } else { "failed:" }, a.message, a.duration.as_millis());
            Ok(if a.ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
    }
}

/// `steward doctor`: plain-words checks; exit code 1 when something required is wrong.
pub fn doctor(config: &Config) -> ExitCode {
    let mut r = Doctor::default();
    r.data_dir(config);
    r.database(config);
    r.models(config);
    if r.problems == 0 {
        println!("everything Steward needs is in place");
        ExitCode::SUCCESS
    } else {
        println!("{} problem(s) found", r.problems);
        ExitCode::FAILURE
    }
}

/// The doctor's findings so far.
#[derive(Default)]
struct Doctor {
    problems: usize,
}

impl Doctor {
    fn say(&mut self, ok: bool, required: bool, what: String) {
        let mark = if ok {
            "ok  "
        } else if required {
            "FAIL"
        } else {
            "note"
        };
        println!("[{mark}] {what}");
        if !ok && required {
            self.problems += 1;
        }
    }

    fn data_dir(&mut self, config: &Config) {
        let dir = &config.data_dir;
        match std::fs::create_dir_all(dir).and_then(|_| {
            let probe = dir.join(".doctor-probe");
            std::fs::write(&probe, b"ok")?;
            std::fs::remove_file(&probe)
        }) {
            Ok(()) => self.say(true, true, format!("data directory {} is writable", dir.display())),
            Err(e) => self.say(false, true, format!("data directory {} is not writable: {e}", dir.display())),
        }
    }

    fn database(&mut self, config: &Config) {
        let db_path = config.db_path();
        if !db_path.exists() {
            self.say(true, false, format!("no database yet at {} (it is created on first start)", db_path.display()));
            return;
        }
        match crate::storage::Db::open_without_migrating(&db_path, 1) {
            Err(e) => self.say(false, true, format!("the database {} cannot be opened: {e}", db_path.display())),
            Ok(db) => {
                let integrity: crate::Result<String> =
                    db.read(|c| Ok(c.query_row("PRAGMA quick_check", [], |r| r.get(0))?));
                match integrity {
                    Ok(s) if s == "ok" => self.say(true, true, "the database passes SQLite's quick check".into()),
                    Ok(s) => self.say(false, true, format!("the database is damaged: {s}; restore a backup")),
                    Err(e) => self.say(false, true, format!("the database check failed: {e}")),
                }
                self.migrations(&db);
            }
        }
    }

    fn migrations(&mut self, db: &crate::storage::Db) {
        match db.migration_status() {
            Ok(st) if st.is_current() => {
                self.say(true, true, format!("all {} migrations are applied", st.applied.len()))
            }
            Ok(st) if !st.unknown.is_empty() => self.say(
                false,
                true,
                format!(
                    "the database has migrations {:?} that this steward does not know; it was used by a newer version",
                    st.unknown
                ),
            ),
            Ok(st) if !st.modified.is_empty() => {
                self.say(false, true, format!("migrations {:?} changed after they were applied", st.modified))
            }
            Ok(st) => self.say(
                true,
                false,
                format!("migrations {:?} are pending; they are applied at the next start", st.pending),
            ),
            Err(e) => self.say(false, true, format!("cannot read the migration status: {e}")),
        }
    }

    fn models(&mut self, config: &Config) {
        let dirs = crate::models::locate::candidate_dirs(config);
        match crate::models::locate::models_dir(config) {
            None => self.say(
                false,
                true,
                format!(
                    "no model files found (looked in {}); {}",
                    dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", "),
                    crate::models::locate::FETCH_HINT
                ),
            ),
            Some(mdir) => {
                self.say(true, true, format!("models directory {}", mdir.display()));
                for e in crate::models::locate::EXPECTED {
                    let p = mdir.join(e.relative);
                    if !p.is_file() {
                        self.say(false, e.required, format!("{} is missing: {}", e.what, p.display()));
                        continue;
                    }
                    match crate::models::locate::file_sha256(&p) {
                        Ok(h) if h == e.sha256 => {
                            self.say(true, e.required, format!("{} present and verified", e.what))
                        }
                        Ok(_) => self.say(
                            false,
                            e.required,
                            format!(
                                "{} at {} does not match the pinned file (corrupt or replaced); fetch it again",
                                e.what,
                                p.display()
                            ),
                        ),
                        Err(err) => self.say(false, e.required, format!("{} cannot be read: {err}", e.what)),
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod panic_tests {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);

    impl Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_panic_logs_where_it_happened_and_never_its_message() {
        let buf = Buf::default();
        let writer = buf.clone();
        let subscriber = tracing_subscriber::fmt().with_writer(move || writer.clone()).with_ansi(false).finish();
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(super::log_panic));
        let r = tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!("request", request_id = "req-42");
            let _e = span.enter();
            std::panic::catch_unwind(|| {
                let visitor = String::from("İ my card number is 4111");
                let _ = &visitor[..1]; // not a char boundary: the std message quotes the text
            })
        });
        std::panic::set_hook(previous);
        assert!(r.is_err());
        let out = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        assert!(out.contains("panicked"), "{out}");
        assert!(out.contains("src/cli/mod.rs:"), "the location is logged: {out}");
        assert!(out.contains("req-42"), "inside the request's span: {out}");
        assert!(!out.contains("4111") && !out.contains("card"), "the message is withheld: {out}");
    }
}

#[cfg(test)]
mod log_tests {
    #[test]
    fn the_text_log_is_coloured_only_on_a_terminal_without_no_color() {
        assert!(super::colour_log(true, None));
        assert!(!super::colour_log(false, None), "a file, a pipe or the journal");
        assert!(!super::colour_log(true, Some("1".into())));
        assert!(super::colour_log(true, Some("".into())), "an empty NO_COLOR is unset");
    }

    #[test]
    fn the_banner_names_the_data_models_and_logs_and_starts_with_the_address() {
        let places = super::Places { data: "/d".into(), models: "/m".into(), logs: "standard error".into() };
        let b = places.banner("127.0.0.1:9".parse().unwrap());
        let lines: Vec<&str> = b.lines().collect();
        assert_eq!(lines[0], "steward listening on http://127.0.0.1:9");
        assert_eq!(&lines[1..], ["  data:   /d", "  models: /m", "  logs:   standard error"]);
        assert!(!super::on_journal(None));
        assert!(!super::on_journal(Some("nonsense")));
        assert!(!super::on_journal(Some("1:1")), "not the file standard error is");
    }
}
