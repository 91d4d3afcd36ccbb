//! Password hashing (argon2id, PHC strings) and the random secrets behind sessions, tokens and
//! invitations (stored only as SHA-256).

use std::time::Duration;

use argon2::password_hash::{Output, ParamsString, PasswordHash, SaltString};
use argon2::{Algorithm, Argon2, Block, Params, Version};
use base64::Engine;
use parking_lot::{Condvar, Mutex};
use rand::RngCore;
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

pub const MIN_PASSWORD_CHARS: usize = 8;
pub const MAX_PASSWORD_CHARS: usize = 256;

/// OWASP's argon2id baseline: 19 MiB, 2 passes, 1 lane.
#[allow(clippy::expect_used, reason = "constant parameters within argon2 bounds")]
fn params() -> Params {
    Params::new(19 * 1024, 2, 1, None).expect("argon2 params")
}

/// The largest memory cost a stored hash may ask for (KiB): a hash is only ever verified with
/// memory from the gate's pool, never more than this.
const MAX_MEMORY_KIB: u32 = 64 * 1024;

/// Argon2's working memory, allocated once per gate permit and reused: allocating 19 MiB per
/// check leaves the allocator holding far more than the permits use (a flood of 100 sign-ins kept
/// 1.3 GB resident), so the blocks never go back to it.
type Blocks = Vec<Block>;

fn blocks_for(blocks: &mut Blocks, params: &Params) -> usize {
    let n = params.block_count();
    if blocks.len() < n {
        blocks.resize(n, Block::default());
    }
    n
}

/// Hashes a new password in `blocks`; the PHC string.
fn hash_in(blocks: &mut Blocks, password: &str) -> Result<String> {
    let mut salt = [0u8; 16];
    rand::rng().fill_bytes(&mut salt);
    let salt = SaltString::encode_b64(&salt).map_err(|e| Error::internal_msg(e.to_string()))?;
    let params = params();
    let n = blocks_for(blocks, &params);
    let mut raw = [0u8; 64];
    let salt_bytes = salt.decode_b64(&mut raw).map_err(|e| Error::internal_msg(e.to_string()))?;
    let mut out = [0u8; Params::DEFAULT_OUTPUT_LEN];
    let failed = |e: &dyn std::fmt::Display| Error::internal_msg(format!("password hashing failed: {e}"));
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params.clone())
        .hash_password_into_with_memory(password.as_bytes(), salt_bytes, &mut out, &mut blocks[..n])
        .map_err(|e| failed(&e))?;
    let phc = PasswordHash {
        algorithm: Algorithm::Argon2id.ident(),
        version: Some(Version::V0x13.into()),
        params: ParamsString::try_from(&params).map_err(|e| failed(&e))?,
        salt: Some(salt.as_salt()),
        hash: Some(Output::new(&out).map_err(|e| failed(&e))?),
    };
    Ok(phc.to_string())
}

/// Checks `password` against a PHC string in `blocks` (false for anything malformed, or a memory
/// cost above [`MAX_MEMORY_KIB`]).
fn verify_in(blocks: &mut Blocks, password: &str, phc: &str) -> bool {
    let mut check = || -> Option<bool> {
        let parsed = PasswordHash::new(phc).ok()?;
        let algorithm = Algorithm::try_from(parsed.algorithm).ok()?;
        let version = match parsed.version {
            Some(v) => Version::try_from(v).ok()?,
            None => Version::default(),
        };
        let params = Params::try_from(&parsed).ok()?;
        if params.m_cost() > MAX_MEMORY_KIB {
            return None;
        }
        let expected = parsed.hash?;
        let mut raw = [0u8; 64];
        let salt = parsed.salt?.decode_b64(&mut raw).ok()?;
        let n = blocks_for(blocks, &params);
        let mut out = vec![0u8; expected.len()];
        Argon2::new(algorithm, version, params)
            .hash_password_into_with_memory(password.as_bytes(), salt, &mut out, &mut blocks[..n])
            .ok()?;
        // `Output`'s equality is constant-time
        Some(Output::new(&out).ok()? == expected)
    };
    check().unwrap_or(false)
}

pub fn check_password_rules(password: &str) -> Result<()> {
    let n = password.chars().count();
    if n < MIN_PASSWORD_CHARS {
        return Err(Error::invalid_field(
            "password",
            format!("the password must be at least {MIN_PASSWORD_CHARS} characters"),
        ));
    }
    if n > MAX_PASSWORD_CHARS {
        return Err(Error::invalid_field(
            "password",
            format!("the password must be at most {MAX_PASSWORD_CHARS} characters"),
        ));
    }
    Ok(())
}

/// Hashes a new password outside any gate (tests, one-off commands).
pub fn hash_password(password: &str) -> Result<String> {
    hash_in(&mut Vec::new(), password)
}

/// Checks a password outside any gate (tests, one-off commands).
pub fn verify_password(password: &str, phc: &str) -> bool {
    verify_in(&mut Vec::new(), password, phc)
}

/// Bounds the argon2id work of the whole process: each hash or verification allocates 19 MiB and
/// takes ~100 ms of one core, so unbounded concurrency is a memory and CPU exhaustion. At most
/// `permits` run at once; up to [`MAX_WAITING`] more wait (at most [`MAX_WAIT`]) for a turn, and
/// beyond that the request answers 503 `service_unavailable` with `Retry-After` at once.
pub struct HashGate {
    permits: usize,
    /// Hashes and verifications run so far (tests and metrics).
    runs: std::sync::atomic::AtomicU64,
    state: Mutex<GateState>,
    turn: Condvar,
    /// The hash an unknown email is verified against (made once, through the gate).
    dummy: std::sync::OnceLock<String>,
    /// Argon2 memory of finished turns, for the next ones (at most `permits` buffers exist).
    pool: Mutex<Vec<Blocks>>,
}

#[derive(Default)]
struct GateState {
    running: usize,
    waiting: usize,
}

/// Requests that may wait for a hashing turn before others are refused.
pub const MAX_WAITING: usize = 64;
/// Longest wait for a hashing turn.
pub const MAX_WAIT: Duration = Duration::from_secs(10);

fn busy() -> Error {
    Error::unavailable("the server is busy checking passwords; try again in a moment")
        .with_details(serde_json::json!({"retryAfterSeconds": 1}))
}

/// A running hash's place in the gate, with its memory; dropping it returns the memory to the
/// pool and lets the next one run.
struct Turn<'a> {
    gate: &'a HashGate,
    blocks: Blocks,
}

impl Turn<'_> {
    fn new(gate: &HashGate) -> Turn<'_> {
        let blocks = gate.pool.lock().pop().unwrap_or_default();
        Turn { gate, blocks }
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.gate.pool.lock().push(std::mem::take(&mut self.blocks));
        self.gate.state.lock().running -= 1;
        self.gate.turn.notify_one();
    }
}

impl HashGate {
    pub fn new(permits: usize) -> Self {
        HashGate {
            permits: permits.max(1),
            runs: std::sync::atomic::AtomicU64::new(0),
            state: Mutex::new(GateState::default()),
            turn: Condvar::new(),
            dummy: std::sync::OnceLock::new(),
            pool: Mutex::new(Vec::new()),
        }
    }

    fn enter(&self) -> Result<Turn<'_>> {
        self.runs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut st = self.state.lock();
        if st.running < self.permits {
            st.running += 1;
            drop(st);
            return Ok(Turn::new(self));
        }
        if st.waiting >= MAX_WAITING {
            return Err(busy());
        }
        st.waiting += 1;
        let deadline = std::time::Instant::now() + MAX_WAIT;
        while st.running >= self.permits {
            if self.turn.wait_until(&mut st, deadline).timed_out() && st.running >= self.permits {
                st.waiting -= 1;
                return Err(busy());
            }
        }
        st.waiting -= 1;
        st.running += 1;
        drop(st);
        Ok(Turn::new(self))
    }

    /// Hashes a new password (waits for a turn, or 503).
    pub fn hash(&self, password: &str) -> Result<String> {
        let mut turn = self.enter()?;
        hash_in(&mut turn.blocks, password)
    }

    /// Checks a password against a stored hash (waits for a turn, or 503).
    pub fn verify(&self, password: &str, phc: &str) -> Result<bool> {
        let mut turn = self.enter()?;
        Ok(verify_in(&mut turn.blocks, password, phc))
    }

    /// Spends the time of a real check on a made-up hash, so a sign-in for an unknown email is
    /// not told apart by its timing.
    pub fn verify_nobody(&self, password: &str) -> Result<()> {
        let dummy = match self.dummy.get() {
            Some(d) => d,
            None => {
                let h = self.hash("not-a-real-password")?;
                self.dummy.get_or_init(|| h)
            }
        };
        self.verify(password, dummy).map(|_| ())
    }

    /// Hashes and verifications asked for so far.
    pub fn hashes_run(&self) -> u64 {
        self.runs.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Hashes running now (for tests and metrics).
    pub fn running(&self) -> usize {
        self.state.lock().running
    }
}

/// A new random secret: `prefix` + 32 random bytes in base64url.
pub fn new_secret(prefix: &str) -> String {
    let mut b = [0u8; 32];
    rand::rng().fill_bytes(&mut b);
    format!("{prefix}{}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b))
}

pub fn sha256_hex(s: &str) -> String {
    hex::encode(Sha256::digest(s.as_bytes()))
}

/// Normalizes an email address (trimmed, lowercased) and checks its shape.
pub fn normalize_email(email: &str) -> Result<String> {
    let e = email.trim().to_lowercase();
    let valid = e.len() <= 254
        && !e.chars().any(|c| c.is_whitespace() || c.is_control())
        && match e.split_once('@') {
            Some((local, domain)) => {
                !local.is_empty()
                    && !domain.is_empty()
                    && !domain.contains('@')
                    && domain.contains('.')
                    && !domain.starts_with('.')
                    && !domain.ends_with('.')
            }
            None => false,
        };
    if !valid {
        return Err(Error::invalid_field("email", "enter a valid email address, like name@example.com"));
    }
    Ok(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_verify_and_differ() {
        let a = hash_password("correct horse").unwrap();
        let b = hash_password("correct horse").unwrap();
        assert_ne!(a, b);
        assert!(a.starts_with("$argon2id$"));
        assert!(verify_password("correct horse", &a));
        assert!(!verify_password("wrong horse", &a));
        assert!(!verify_password("x", "garbage"));
    }

    #[test]
    fn hashes_made_by_the_argon2_crate_verify_and_a_huge_memory_cost_is_refused() {
        use argon2::password_hash::PasswordHasher;
        let salt = SaltString::encode_b64(b"sixteen byte sal").unwrap();
        let theirs = Argon2::new(Algorithm::Argon2id, Version::V0x13, params())
            .hash_password(b"correct horse", &salt)
            .unwrap()
            .to_string();
        assert!(verify_password("correct horse", &theirs));
        assert!(!verify_password("wrong horse", &theirs));
        let huge = theirs.replace("m=19456", "m=4194304");
        assert!(!verify_password("correct horse", &huge));
        // the gate's hashes are the same format, made in reused memory
        let gate = HashGate::new(1);
        let ours = gate.hash("correct horse").unwrap();
        assert!(gate.verify("correct horse", &ours).unwrap() && gate.verify("correct horse", &theirs).unwrap());
        assert_eq!(gate.pool.lock().len(), 1, "one permit, one buffer, reused");
    }

    #[test]
    fn the_gate_bounds_concurrent_hashing_and_refuses_beyond_the_queue() {
        let gate = std::sync::Arc::new(HashGate::new(1));
        // hold the only turn, fill the queue, then one more is refused at once
        let held = gate.enter().unwrap();
        let waiters: Vec<_> = (0..MAX_WAITING)
            .map(|_| {
                let g = gate.clone();
                std::thread::spawn(move || g.enter().map(|_| ()).is_ok())
            })
            .collect();
        while gate.state.lock().waiting < MAX_WAITING {
            std::thread::yield_now();
        }
        let refused = gate.enter().err().expect("a full queue refuses");
        assert_eq!(refused.code, crate::error::ErrorCode::ServiceUnavailable);
        assert_eq!(refused.details.unwrap()["retryAfterSeconds"], 1);
        assert_eq!(gate.running(), 1);
        drop(held);
        // the waiters each get their turn, one at a time
        assert!(waiters.into_iter().all(|w| w.join().unwrap()));
        assert_eq!(gate.running(), 0);
    }

    #[test]
    fn emails_are_normalized() {
        assert_eq!(normalize_email("  Ada@Example.COM ").unwrap(), "ada@example.com");
        for bad in ["", "ada", "ada@", "@x.com", "a b@x.com", "a@b", "a@@b.com"] {
            assert!(normalize_email(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn password_rules() {
        assert!(check_password_rules("short").is_err());
        assert!(check_password_rules("long enough").is_ok());
        assert!(check_password_rules(&"x".repeat(300)).is_err());
    }
}
