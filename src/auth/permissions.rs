//! Permissions and the roles that grant them. The names are the API's (`workspace.agents.read`…);
//! docs/api.md lists them with the routes that need each.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

macro_rules! perms {
    ($($variant:ident = $bit:expr, $name:expr, $doc:expr;)*) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Perm { $(#[doc = $doc] $variant),* }

        impl Perm {
            pub const ALL: &'static [Perm] = &[$(Perm::$variant),*];
            pub fn name(self) -> &'static str {
                match self { $(Perm::$variant => $name),* }
            }
            fn bit(self) -> u32 {
                match self { $(Perm::$variant => 1 << $bit),* }
            }
            pub fn parse(s: &str) -> Option<Perm> {
                match s { $($name => Some(Perm::$variant),)* _ => None }
            }
            pub fn describe(self) -> &'static str {
                match self { $(Perm::$variant => $doc),* }
            }
        }
    };
}

perms! {
    AgentsRead = 0, "workspace.agents.read", "Read agents, their skills, directives, context variables and revisions.";
    AgentsManage = 1, "workspace.agents.manage", "Create and change agents, skills, directives, context variables; publish revisions; run test executions.";
    DocumentsRead = 2, "workspace.documents.read", "List and read documents and sources; read search history.";
    DocumentsManage = 3, "workspace.documents.manage", "Create, import, update, reprocess and delete documents and sources.";
    RetrievalQuery = 4, "workspace.retrieval.query", "Search documents and get retrieval-only answers.";
    Chat = 5, "workspace.chat", "Chat with the workspace's agents through the REST API.";
    ConversationsRead = 6, "workspace.conversations.read", "Read conversation history, traces and quality reports.";
    ConversationTakeover = 7, "workspace.conversation.takeover", "Take over, reply to, transfer and hand back conversations; decide approvals.";
    SettingsRead = 8, "workspace.settings.read", "Read workspace settings.";
    SettingsManage = 9, "workspace.settings.manage", "Change workspace settings, model preferences, document types and provider credentials.";
    MembersManage = 10, "organization.members.manage", "Invite people and revoke invitations.";
    WorkspacesManage = 11, "organization.workspaces.manage", "Create and rename workspaces.";
    ApiAccessManage = 12, "organization.api_access.manage", "Create and revoke workspace service credentials.";
    AuditRead = 13, "organization.audit.read", "Read the audit log.";
    UsageRead = 14, "organization.usage.read", "Read the organization's usage across all its workspaces.";
}

/// A set of permissions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PermSet(u32);

/// On the wire: the permissions' names.
impl schemars::JsonSchema for PermSet {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "PermSet".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let names: Vec<&str> = Perm::ALL.iter().map(|p| p.name()).collect();
        schemars::json_schema!({"type": "array", "items": {"type": "string", "enum": names}})
    }
}

impl PermSet {
    pub fn empty() -> PermSet {
        PermSet(0)
    }
    pub fn all() -> PermSet {
        Perm::ALL.iter().copied().collect()
    }
    pub fn contains(self, p: Perm) -> bool {
        self.0 & p.bit() != 0
    }
    pub fn insert(&mut self, p: Perm) {
        self.0 |= p.bit();
    }
    pub fn intersect(self, other: PermSet) -> PermSet {
        PermSet(self.0 & other.0)
    }
    pub fn is_subset_of(self, other: PermSet) -> bool {
        self.0 & !other.0 == 0
    }
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
    pub fn names(self) -> Vec<&'static str> {
        Perm::ALL.iter().filter(|p| self.contains(**p)).map(|p| p.name()).collect()
    }
    /// Parses a list of permission names; an unknown name is a 400 naming it.
    pub fn parse_list(names: &[String]) -> Result<PermSet> {
        let mut set = PermSet::empty();
        for n in names {
            match Perm::parse(n) {
                Some(p) => set.insert(p),
                None => {
                    return Err(Error::invalid_field("permissions", format!("unknown permission {n:?}"))
                        .with_details(serde_json::json!({"field": "permissions", "permission": n,
                            "known": Perm::ALL.iter().map(|p| p.name()).collect::<Vec<_>>()})));
                }
            }
        }
        Ok(set)
    }
    pub fn to_json(self) -> String {
        serde_json::to_string(&self.names()).unwrap_or_else(|_| "[]".into())
    }
    pub fn from_json(s: &str) -> PermSet {
        let names: Vec<String> = serde_json::from_str(s).unwrap_or_default();
        names.iter().filter_map(|n| Perm::parse(n)).collect()
    }
}

impl FromIterator<Perm> for PermSet {
    fn from_iter<I: IntoIterator<Item = Perm>>(iter: I) -> Self {
        let mut s = PermSet::empty();
        for p in iter {
            s.insert(p);
        }
        s
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Owner,
    Admin,
    Member,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Owner => "owner",
            Role::Admin => "admin",
            Role::Member => "member",
        }
    }
    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "owner" => Some(Role::Owner),
            "admin" => Some(Role::Admin),
            "member" => Some(Role::Member),
            _ => None,
        }
    }
    /// What the role grants in every workspace of its organization.
    pub fn permissions(self) -> PermSet {
        use Perm::*;
        match self {
            Role::Owner => PermSet::all(),
            Role::Admin => Perm::ALL.iter().copied().filter(|p| *p != AuditRead).collect(),
            Role::Member => [
                AgentsRead,
                DocumentsRead,
                DocumentsManage,
                RetrievalQuery,
                Chat,
                ConversationsRead,
                ConversationTakeover,
                SettingsRead,
            ]
            .into_iter()
            .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for p in Perm::ALL {
            assert_eq!(Perm::parse(p.name()), Some(*p));
            assert!(seen.insert(p.name()));
        }
        let all = PermSet::all();
        assert_eq!(PermSet::from_json(&all.to_json()), all);
    }

    #[test]
    fn roles_nest() {
        assert!(Role::Member.permissions().is_subset_of(Role::Admin.permissions()));
        assert!(Role::Admin.permissions().is_subset_of(Role::Owner.permissions()));
        assert!(!Role::Admin.permissions().contains(Perm::AuditRead));
        assert!(!Role::Member.permissions().contains(Perm::AgentsManage));
        assert!(Role::Member.permissions().contains(Perm::RetrievalQuery));
    }

    #[test]
    fn unknown_permission_names_are_rejected_by_name() {
        let err = PermSet::parse_list(&["workspace.agents.read".into(), "root".into()]).unwrap_err();
        assert!(err.message.contains("root"));
    }
}
