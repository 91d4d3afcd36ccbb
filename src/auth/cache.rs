//! Authentication results kept in memory, so a request with a credential seen recently is
//! resolved without a database read or a blocking-thread hop.
//!
//! An entry is trusted only while the database's identity generation (see
//! [`crate::storage::Db::identity_generation`]) is the one read before the entry's rows were:
//! any committed change to organizations, users, memberships, workspaces, sessions or API tokens
//! (a revocation, a role change, a logout, a new workspace) makes every entry stale before the
//! request that made the change returns. Entries also end at the credential's own expiry. Only
//! successful authentications are kept: an unknown or refused credential always takes the full
//! path, with its error.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use parking_lot::Mutex;

use super::{Credentials, Principal};

/// At this many (credential, workspace header) pairs, an insert first drops the stale entries, and
/// starts the cache over if that is not enough.
const MAX_ENTRIES: usize = 4096;

/// Which credential of a request decides: the bearer when present (as in `authenticate`).
#[derive(Clone, PartialEq, Eq, Hash)]
pub(super) struct Key {
    bearer: bool,
    /// SHA-256 of the credential: the secret itself is not kept.
    hash: String,
    workspace_header: Option<String>,
}

impl Key {
    pub(super) fn of(creds: &Credentials, workspace_header: Option<&str>) -> Option<Key> {
        let (bearer, secret) = match (&creds.bearer, &creds.session) {
            (Some(b), _) => (true, b),
            (None, Some(s)) => (false, s),
            (None, None) => return None,
        };
        Some(Key {
            bearer,
            hash: super::password::sha256_hex(secret),
            workspace_header: workspace_header.filter(|h| !h.is_empty()).map(str::to_string),
        })
    }
}

struct Entry {
    principal: Principal,
    /// The credential's expiry, when it has one.
    valid_until: Option<DateTime<Utc>>,
    generation: u64,
}

#[derive(Default)]
pub struct AuthCache {
    entries: Mutex<HashMap<Key, Entry>>,
}

impl AuthCache {
    /// The principal for `key` if it was resolved at `generation` (the current one) and its
    /// credential has not expired by `now`.
    pub(super) fn get(&self, key: &Key, generation: u64, now: DateTime<Utc>) -> Option<Principal> {
        let entries = self.entries.lock();
        let e = entries.get(key)?;
        (e.generation == generation && e.valid_until.is_none_or(|until| now < until)).then(|| e.principal.clone())
    }

    /// Keeps a principal resolved from rows read at `generation` (read before the rows were).
    pub(super) fn insert(&self, key: Key, principal: Principal, valid_until: Option<DateTime<Utc>>, generation: u64) {
        let mut entries = self.entries.lock();
        if entries.len() >= MAX_ENTRIES && !entries.contains_key(&key) {
            entries.retain(|_, e| e.generation == generation);
            if entries.len() >= MAX_ENTRIES {
                entries.clear();
            }
        }
        entries.insert(key, Entry { principal, valid_until, generation });
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::{PermSet, Via};
    use crate::ids::{OrgId, WorkspaceId};

    fn principal(ws: &str) -> Principal {
        Principal {
            via: Via::ServiceCredential,
            org_id: OrgId("org".into()),
            user_id: None,
            role: None,
            credential_id: Some("tok".into()),
            session_hash: None,
            workspace_id: WorkspaceId(ws.into()),
            permissions: PermSet::default(),
        }
    }

    fn bearer(s: &str) -> Credentials {
        Credentials { bearer: Some(s.into()), session: None }
    }

    #[test]
    fn entries_hold_only_for_their_generation_and_until_expiry() {
        let cache = AuthCache::default();
        let now = Utc::now();
        let key = Key::of(&bearer("secret"), None).expect("key");
        cache.insert(key.clone(), principal("w1"), Some(now + chrono::Duration::seconds(10)), 7);
        assert_eq!(cache.get(&key, 7, now).map(|p| p.workspace_id.0), Some("w1".to_string()));
        assert!(cache.get(&key, 8, now).is_none(), "a newer generation makes the entry stale");
        assert!(cache.get(&key, 7, now + chrono::Duration::seconds(10)).is_none(), "expired");
        let other = Key::of(&bearer("other"), None).expect("key");
        assert!(cache.get(&other, 7, now).is_none());
    }

    #[test]
    fn key_separates_credential_kind_and_workspace_header_and_hides_the_secret() {
        let session = Credentials { bearer: None, session: Some("secret".into()) };
        let b = Key::of(&bearer("secret"), None).expect("key");
        assert!(b != Key::of(&session, None).expect("key"));
        assert!(b != Key::of(&bearer("secret"), Some("ws_1")).expect("key"));
        assert!(b == Key::of(&bearer("secret"), Some("")).expect("key"), "an empty header is no header");
        assert!(!b.hash.contains("secret"));
        assert!(Key::of(&Credentials::default(), None).is_none());
    }

    #[test]
    fn a_full_cache_drops_stale_entries_first() {
        let cache = AuthCache::default();
        let now = Utc::now();
        for i in 0..MAX_ENTRIES {
            cache.insert(Key::of(&bearer(&format!("t{i}")), None).expect("key"), principal("w"), None, 1);
        }
        let fresh = Key::of(&bearer("fresh"), None).expect("key");
        cache.insert(fresh.clone(), principal("w"), None, 2);
        assert_eq!(cache.len(), 1);
        assert!(cache.get(&fresh, 2, now).is_some());
    }
}
