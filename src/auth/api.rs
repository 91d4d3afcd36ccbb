//! The wire shapes of accounts (owned by the HTTP edge; `accounts.rs` knows nothing of them).

use serde::Serialize;

use super::accounts::{InvitationView, Me, Member};
use super::{Organization, PermSet, Role, User, Via, Workspace};

/// `GET /auth/me`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MeJson {
    pub user: Option<User>,
    pub organization: Organization,
    pub role: Option<Role>,
    pub workspace: Workspace,
    pub workspaces: Vec<Workspace>,
    pub permissions: PermSet,
    #[serde(rename = "authenticatedVia")]
    pub via: Via,
}

impl From<Me> for MeJson {
    fn from(m: Me) -> Self {
        MeJson {
            user: m.user,
            organization: m.organization,
            role: m.role,
            workspace: m.workspace,
            workspaces: m.workspaces,
            permissions: m.permissions,
            via: m.via,
        }
    }
}

/// An invitation in `/account/invitations`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InvitationJson {
    pub id: String,
    pub email: Option<String>,
    pub role: Role,
    pub status: &'static str,
    pub created_at: String,
    pub expires_at: String,
    pub accepted_at: Option<String>,
}

impl From<InvitationView> for InvitationJson {
    fn from(i: InvitationView) -> Self {
        InvitationJson {
            id: i.id,
            email: i.email,
            role: i.role,
            status: i.status,
            created_at: i.created_at,
            expires_at: i.expires_at,
            accepted_at: i.accepted_at,
        }
    }
}

/// A member in `/account/members`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemberJson<'a> {
    pub user_id: &'a str,
    pub email: &'a str,
    pub name: Option<&'a str>,
    pub role: Role,
    pub joined_at: &'a str,
}

impl<'a> MemberJson<'a> {
    pub fn of(m: &'a Member) -> MemberJson<'a> {
        MemberJson {
            user_id: &m.user.id.0,
            email: &m.user.email,
            name: m.user.name.as_deref(),
            role: m.role,
            joined_at: &m.joined_at,
        }
    }
}
