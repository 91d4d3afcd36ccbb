//! A real PostgreSQL server for the tests (Debian's `postgresql` package, which
//! `scripts/install-deps.sh test` installs): one per test process, started on first use in a
//! temporary directory with `initdb` and `postgres` as the `nobody` user when the tests run as root
//! (PostgreSQL refuses root), listening on a Unix socket (trusted: its directory is the server
//! user's) and on 127.0.0.1 (TLS with a test CA's certificate, a password). Each test gets its own
//! database.
//!
//! The server is a child of a thread that lives as long as the process; readiness is read from its
//! log, not waited for. At exit a hook shuts it down (fast shutdown, waited for) and removes its
//! directory; a parent-death signal ends it if the process is killed before the hook runs.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

pub struct PgServer {
    /// The socket directory (the URL's host).
    socket_dir: PathBuf,
    bin: PathBuf,
    /// The port of its socket, and of its TCP listener on 127.0.0.1 (TLS on, for the tests of
    /// encrypted connections).
    port: u16,
    /// The PEM file of the certificate authority that signed its certificate (and the client
    /// certificates it takes).
    ca: PathBuf,
    /// The password of its `steward` user over TCP (its Unix socket trusts).
    password: String,
}

static SERVER: OnceLock<Result<PgServer, String>> = OnceLock::new();
static NEXT_DB: AtomicU32 = AtomicU32::new(0);

/// The directory holding `initdb`, `postgres`, `pg_dump` and `pg_restore`.
fn bin_dir() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|p| p.join("initdb").is_file())
        .collect();
    dirs.sort();
    dirs.pop()
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// `program` run as the server's user (`nobody` under root), dying with its parent thread.
fn as_server_user(program: &Path) -> Command {
    if is_root() {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", "--pdeathsig=KILL"]).arg(program);
        c
    } else {
        let mut c = Command::new("setpriv");
        c.arg("--pdeathsig=KILL").arg(program);
        c
    }
}

/// Removes the directories of earlier test processes that are gone (`run-<pid>-…`; a process
/// killed before its exit hook leaves its own).
fn sweep_stale(root: &Path) {
    for e in std::fs::read_dir(root).into_iter().flatten().flatten() {
        let pid: Option<u32> =
            e.file_name().to_str().and_then(|n| n.strip_prefix("run-")?.split('-').next()?.parse().ok());
        if let Some(pid) = pid
            && !Path::new(&format!("/proc/{pid}")).exists()
        {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// Where the statements PostgreSQL refused as malformed are written (`scripts/test` fails the
/// run when this file is not empty after the PostgreSQL pass).
const SQL_FAULTS: &str = concat!(env!("CARGO_TARGET_TMPDIR"), "/pg-sql-faults.log");

/// Reads the server's log (each line prefixed with its SQLSTATE) for errors of class 42 (syntax
/// errors, unknown tables, columns or functions, a subquery without an alias): a statement that
/// SQLite accepts and PostgreSQL does not, which a caller that tolerates failures (a worker's
/// wait, a best-effort read) would otherwise hide. Each is written to [`SQL_FAULTS`] with its
/// statement's first line. Not counted: a parameter whose type PostgreSQL cannot tell from the
/// text (42P08, 42P18), which the store seam answers by preparing the statement again with the
/// types of the values given, and errors naming [`EXPECTED_FAULT`], provoked on purpose.
/// A table no schema has: a test that needs a statement PostgreSQL refuses names it (not counted
/// by [`SqlFaults`]).
pub const EXPECTED_FAULT: &str = "steward_expected_fault";

#[derive(Default)]
struct SqlFaults {
    pending: Option<String>,
}

impl SqlFaults {
    fn read(&mut self, line: &str) {
        let retyped = line.starts_with("42P08") || line.starts_with("42P18");
        let expected = line.contains(EXPECTED_FAULT);
        if line.starts_with("42") && !retyped && !expected && line.contains(" ERROR: ") {
            // one logged without its statement is written as it is
            if let Some(error) = self.pending.replace(line.to_string()) {
                write_fault(&error, "");
            }
        } else if let Some(error) = self.pending.take_if(|_| line.contains(" STATEMENT: ")) {
            write_fault(&error, line.trim());
        }
    }
}

fn write_fault(error: &str, statement: &str) {
    use std::io::Write;
    let file = std::fs::OpenOptions::new().create(true).append(true).open(SQL_FAULTS);
    if let Ok(mut file) = file {
        let _ = writeln!(file, "{error}\n    {statement}");
    }
}

/// The running server's process id and directory, for the exit hook.
static RUNNING: OnceLock<(i32, PathBuf)> = OnceLock::new();

/// Told by the thread reading the server's log once it has read it to the end.
static LOG_READ: OnceLock<std::sync::Mutex<std::sync::mpsc::Sender<()>>> = OnceLock::new();
static LOG_READ_WAIT: OnceLock<std::sync::Mutex<std::sync::mpsc::Receiver<()>>> = OnceLock::new();

/// At process exit: a fast shutdown (SIGINT), waited for, so the server releases its shared
/// memory; then the rest of its log is read (its last errors included), and its directory is
/// removed.
extern "C" fn stop_at_exit() {
    if let Some((pid, dir)) = RUNNING.get() {
        // SAFETY: plain system calls on the server's process id, a child of this process.
        unsafe {
            libc::kill(*pid, libc::SIGINT);
            libc::waitpid(*pid, std::ptr::null_mut(), 0);
        }
        if let Some(Ok(done)) = LOG_READ_WAIT.get().map(|d| d.lock()) {
            let _ = done.recv_timeout(std::time::Duration::from_secs(10));
        }
        let _ = std::fs::remove_dir_all(dir);
    }
}

fn start() -> Result<PgServer, String> {
    let bin = bin_dir().ok_or("PostgreSQL is not installed (scripts/install-deps.sh test installs it)")?;
    let root = std::env::temp_dir().join("steward-pg-tests");
    std::fs::create_dir_all(&root).map_err(|e| e.to_string())?;
    // the server's user must reach its directory whatever the umask was
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).map_err(|e| e.to_string())?;
    sweep_stale(&root);
    // a new directory of our own (mkdtemp), handed to the server's user
    let dir = tempfile::Builder::new()
        .prefix(&format!("run-{}-", std::process::id()))
        .tempdir_in(&root)
        .map_err(|e| e.to_string())?
        .keep();
    if is_root() {
        let status =
            Command::new("chown").args(["-h", "nobody:nogroup"]).arg(&dir).status().map_err(|e| e.to_string())?;
        if !status.success() {
            return Err("cannot hand the PostgreSQL directory to nobody".into());
        }
    }
    let data = dir.join("data");
    // TLS on its TCP listener, with a certificate for 127.0.0.1 and localhost from a test CA; a
    // password there (a Unix socket in a directory only its user enters stays `trust`)
    let pki = crate::receiver::test_pki(&[]);
    let password = steward::ids::new_id();
    let (ca, cert, key, pwfile) = (dir.join("ca.pem"), dir.join("server.crt"), dir.join("server.key"), dir.join("pw"));
    let (client_cert, client_key) = (dir.join("client.crt"), dir.join("client.key"));
    for (path, text) in [
        (&ca, &pki.ca_pem),
        (&cert, &pki.cert_pem),
        (&key, &pki.key_pem),
        (&pwfile, &password),
        (&client_cert, &pki.client_cert_pem),
        (&client_key, &pki.client_key_pem),
    ] {
        std::fs::write(path, text).map_err(|e| e.to_string())?;
    }
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).map_err(|e| e.to_string())?;
    if is_root() {
        let status = Command::new("chown")
            .args(["-h", "nobody:nogroup"])
            .args([&cert, &key, &pwfile])
            .status()
            .map_err(|e| e.to_string())?;
        if !status.success() {
            return Err("cannot hand the certificate to nobody".into());
        }
    }
    let out = as_server_user(&bin.join("initdb"))
        .args(["-D"])
        .arg(&data)
        .args(["-U", "steward", "--auth-local=trust", "--auth-host=scram-sha-256", "--pwfile"])
        .arg(&pwfile)
        .args(["-E", "UTF8", "--locale=C.UTF-8", "--no-sync"])
        .output()
        .map_err(|e| format!("initdb: {e}"))?;
    if !out.status.success() {
        return Err(format!("initdb failed: {}", String::from_utf8_lossy(&out.stderr)));
    }
    let _ = std::fs::remove_file(&pwfile);
    // the role named by the test client certificate signs in over TCP with it alone
    let hba = data.join("pg_hba.conf");
    let rules = std::fs::read_to_string(&hba).map_err(|e| format!("pg_hba.conf: {e}"))?;
    let cert_rule = format!("hostssl all {} 127.0.0.1/32 cert\n", crate::receiver::CLIENT_NAME);
    std::fs::write(&hba, cert_rule + &rules).map_err(|e| format!("pg_hba.conf: {e}"))?;
    let (read_tx, read_rx) = std::sync::mpsc::channel();
    let _ = LOG_READ.set(std::sync::Mutex::new(read_tx));
    let _ = LOG_READ_WAIT.set(std::sync::Mutex::new(read_rx));
    // a free port is picked, then taken by the server: another process may take it in between,
    // so a start that fails is tried again on another
    let mut last = String::new();
    for _ in 0..3 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("no free port: {e}"))?
            .port();
        match launch(&bin, &data, &dir, port, [&cert, &key, &ca]) {
            Ok(pid) => {
                if RUNNING.set((pid, dir.clone())).is_ok() {
                    // SAFETY: registers a function with no preconditions, run once at exit.
                    unsafe { libc::atexit(stop_at_exit) };
                }
                return Ok(PgServer { socket_dir: dir, bin, port, ca, password });
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Starts the server on `port` (its socket in `dir`, TLS with `cert_key`: its certificate, its
/// key and the authority of the client certificates it takes); returns its process
/// id once it is ready to accept connections. A thread reads its log for as long as it runs.
fn launch(bin: &Path, data: &Path, dir: &Path, port: u16, cert_key: [&PathBuf; 3]) -> Result<i32, String> {
    let (tx, rx) = std::sync::mpsc::channel::<Result<i32, String>>();
    let (bin2, data2, sock) = (bin.to_path_buf(), data.to_path_buf(), dir.to_path_buf());
    let tls_args = [
        "-p".to_string(),
        port.to_string(),
        "-c".into(),
        "listen_addresses=127.0.0.1".into(),
        "-c".into(),
        "ssl=on".into(),
        "-c".into(),
        format!("ssl_cert_file={}", cert_key[0].display()),
        "-c".into(),
        format!("ssl_key_file={}", cert_key[1].display()),
        "-c".into(),
        format!("ssl_ca_file={}", cert_key[2].display()),
    ];
    std::thread::spawn(move || {
        let child = as_server_user(&bin2.join("postgres"))
            .arg("-D")
            .arg(&data2)
            .arg("-k")
            .arg(&sock)
            .args(&tls_args)
            .args(["-c", "fsync=off", "-c", "max_connections=200"])
            .args(["-c", "logging_collector=off", "-c", "log_min_messages=error", "-c", "log_line_prefix=%e "])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn();
        let mut child = match child {
            Ok(c) => c,
            Err(e) => {
                let _ = tx.send(Err(format!("postgres: {e}")));
                return;
            }
        };
        let pid = child.id() as i32;
        let Some(stderr) = child.stderr.take() else {
            let _ = tx.send(Err("postgres: no log".into()));
            return;
        };
        let mut ready = Some(tx);
        let mut log = String::new();
        let mut faults = SqlFaults::default();
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if let Some(tx) = ready.take_if(|_| line.contains("ready to accept connections")) {
                let _ = tx.send(Ok(pid));
            } else if ready.is_some() {
                log.push_str(&line);
                log.push('\n');
            } else {
                faults.read(&line);
            }
        }
        let _ = child.wait();
        match ready {
            Some(tx) => {
                let _ = tx.send(Err(format!("postgres stopped before it was ready:\n{log}")));
            }
            // the whole log of the server that ran is read: the exit hook may go on
            None => {
                if let Some(done) = LOG_READ.get() {
                    let _ = done.lock().map(|d| d.send(()));
                }
            }
        }
    });
    rx.recv().map_err(|e| e.to_string())?
}

impl PgServer {
    /// The shared server (started on first use); panics with the reason when it cannot start.
    pub fn get() -> &'static PgServer {
        match SERVER.get_or_init(start) {
            Ok(s) => s,
            Err(e) => panic!("cannot start the test PostgreSQL server: {e}"),
        }
    }

    /// The URL of database `name` on this server.
    pub fn url(&self, name: &str) -> String {
        let host: String = url::form_urlencoded::byte_serialize(self.socket_dir.to_string_lossy().as_bytes()).collect();
        format!("postgres://steward@{host}:{}/{name}", self.port)
    }

    /// The URL of database `name` over TCP on 127.0.0.1 (where the server speaks TLS), with
    /// `query` (`sslmode=…`).
    pub fn tcp_url(&self, name: &str, query: &str) -> String {
        self.tcp_url_at("127.0.0.1", name, query)
    }

    /// [`PgServer::tcp_url`] naming `host` (with `hostaddr=127.0.0.1` in `query` to reach it).
    pub fn tcp_url_at(&self, host: &str, name: &str, query: &str) -> String {
        format!("postgres://steward:{}@{host}:{}/{name}?{query}", self.password, self.port)
    }

    /// The server's Unix socket (`<dir>/.s.PGSQL.<port>`).
    pub fn socket(&self) -> PathBuf {
        self.socket_dir.join(format!(".s.PGSQL.{}", self.port))
    }

    /// The URL's host and port of the server's Unix socket (`%2Fdir:port`), to list after
    /// another host.
    pub fn socket_host_port(&self) -> String {
        let host: String = url::form_urlencoded::byte_serialize(self.socket_dir.to_string_lossy().as_bytes()).collect();
        format!("{host}:{}", self.port)
    }

    /// The server's TCP port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The test client certificate and its key (PEM files), for the role
    /// [`crate::receiver::CLIENT_NAME`], which signs in over TCP with it alone.
    pub fn client_cert(&self) -> (PathBuf, PathBuf) {
        (self.socket_dir.join("client.crt"), self.socket_dir.join("client.key"))
    }

    /// The PEM file of the certificate authority that signed the server's certificate.
    pub fn ca_file(&self) -> &Path {
        &self.ca
    }

    /// A new, empty database; returns its URL.
    pub fn fresh_db(&self) -> String {
        let name = format!("t{}_{}", std::process::id(), NEXT_DB.fetch_add(1, Ordering::SeqCst));
        steward::storage::postgres::create_database(&self.url("postgres"), &name).unwrap()
    }

    /// A PostgreSQL client program (`pg_dump`, `pg_restore`, `psql`…) of the server's version,
    /// pointed at this server (`-h`, `-U`).
    pub fn tool(&self, name: &str) -> Command {
        let mut c = Command::new(self.bin.join(name));
        c.arg("-h").arg(&self.socket_dir).args(["-p", &self.port.to_string(), "-U", "steward"]);
        c
    }

    /// The database name of a URL this server made.
    pub fn db_name(url: &str) -> &str {
        url.rsplit('/').next().unwrap_or_default()
    }
}
