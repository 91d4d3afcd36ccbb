//! Identifiers. Every record id is a UUIDv7 string (time-ordered, so ids sort by creation), and the
//! main tenancy ids are newtypes so a workspace id cannot be passed where a user id is expected.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A fresh UUIDv7 string.
pub fn new_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// True when `s` is a UUID in its canonical hyphenated form (ids arriving in paths are checked with
/// this so malformed ids answer 404 without touching the database).
pub fn is_uuid(s: &str) -> bool {
    s.len() == 36 && uuid::Uuid::parse_str(s).is_ok()
}

macro_rules! id_newtype {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema)]
        #[serde(transparent)]
        pub struct $name(pub String);

        impl $name {
            pub fn new() -> Self {
                Self(new_id())
            }
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({})", stringify!($name), self.0)
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> Self {
                Self(s)
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                Self(s.to_string())
            }
        }
    };
}

id_newtype!(
    /// The organization (account). Open-source deployments have exactly one.
    OrgId
);
id_newtype!(
    /// A workspace: the tenancy boundary for documents, agents, settings and conversations.
    WorkspaceId
);
id_newtype!(
    /// A person who signs in.
    UserId
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_uuids_and_sort_by_creation() {
        let a = new_id();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = new_id();
        assert!(is_uuid(&a) && is_uuid(&b));
        assert!(a < b);
        assert!(!is_uuid("not-a-uuid"));
        assert!(!is_uuid("0191ee1e-0000-7000-8000-00000000000")); // one char short
    }
}
