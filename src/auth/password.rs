//! Password hashing (argon2id, PHC strings) and the random secrets behind sessions, tokens and
//! invitations (stored only as SHA-256).

use std::time::Duration;

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};
use base64::Engine;
use parking_lot::{Condvar, Mutex};
use rand::RngCore;
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

pub const MIN_PASSWORD_CHARS: usize = 8;
pub const MAX_PASSWORD_CHARS: usize = 256;

fn argon() -> Argon2<'static> {
    // OWASP's argon2id baseline: 19 MiB, 2 passes, 1 lane.
    let params = Params::new(19 * 1024, 2, 1, None).expect("argon2 params");
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
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

pub fn hash_password(password: &str) -> Result<String> {
    let mut salt = [0u8; 16];
    rand::rng().fill_bytes(&mut salt);
    let salt = SaltString::encode_b64(&salt).map_err(|e| Error::internal_msg(e.to_string()))?;
    argon()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| Error::internal_msg(format!("password hashing failed: {e}")))
}

pub fn verify_password(password: &str, phc: &str) -> bool {
    match PasswordHash::new(phc) {
        Ok(parsed) => argon().verify_password(password.as_bytes(), &parsed).is_ok(),
        Err(_) => false,
    }
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

/// A running hash's place in the gate; dropping it lets the next one run.
struct Turn<'a>(&'a HashGate);

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.0.state.lock().running -= 1;
        self.0.turn.notify_one();
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
        }
    }

    fn enter(&self) -> Result<Turn<'_>> {
        self.runs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut st = self.state.lock();
        if st.running < self.permits {
            st.running += 1;
            return Ok(Turn(self));
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
        Ok(Turn(self))
    }

    /// Hashes a new password (waits for a turn, or 503).
    pub fn hash(&self, password: &str) -> Result<String> {
        let _turn = self.enter()?;
        hash_password(password)
    }

    /// Checks a password against a stored hash (waits for a turn, or 503).
    pub fn verify(&self, password: &str, phc: &str) -> Result<bool> {
        let _turn = self.enter()?;
        Ok(verify_password(password, phc))
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
