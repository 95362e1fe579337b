//! The roles a client token may have, and what else asks a domain (another
//! archive, or nobody known): the vocabulary the authority grants by
//! (`security/auth.rs`) and the audit log records (`audit.rs`), so both
//! name them alike.

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Lookups, reads, filters, stats.
    Read,
    /// Also puts, deletes and bulk imports.
    Write,
    /// Read, and also searches by key (`POST /v1/search`): keys are
    /// personal data, so neither `read` nor `write` may search them.
    Search,
    /// Read, and also the log of searches (`GET /v1/audit`).
    Audit,
    /// Read, and also the domain's online backup (`GET /v1/backup`): the
    /// whole store, identity numbers and the search log included, so no
    /// other role may take it.
    Backup,
    /// Read, and also registering and following cross-archive requests
    /// (`/v1/requests`): a clerk at the counter of the receiving archive.
    Clerk,
    /// Read, and also deciding the requests other archives sent here
    /// that the release policy leaves to people (`/v1/reviews`).
    Reviewer,
}

impl Role {
    pub const ALL: [Role; 7] = [
        Role::Read,
        Role::Write,
        Role::Search,
        Role::Audit,
        Role::Backup,
        Role::Clerk,
        Role::Reviewer,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Read => "read",
            Role::Write => "write",
            Role::Search => "search",
            Role::Audit => "audit",
            Role::Backup => "backup",
            Role::Clerk => "clerk",
            Role::Reviewer => "reviewer",
        }
    }

    /// What a token of this role may do, in a few words, for people
    /// choosing one (`xarchive token create --help`).
    pub fn about(self) -> &'static str {
        match self {
            Role::Read => "lookups, reads, filters, stats",
            Role::Write => "also puts, deletes and imports",
            Role::Search => "also searches by key (identity numbers)",
            Role::Audit => "also the log of searches by private key",
            Role::Backup => "also the domain's online backup",
            Role::Clerk => "also cross-archive requests and their certificates",
            Role::Reviewer => "also deciding requests from other archives",
        }
    }
}

/// A name that is not a role.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a role (read, write, search, audit, backup, clerk or reviewer)")]
pub struct UnknownRole(pub String);

impl std::str::FromStr for Role {
    type Err = UnknownRole;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Role::ALL
            .into_iter()
            .find(|role| role.as_str() == s)
            .ok_or_else(|| UnknownRole(s.to_owned()))
    }
}

/// What a requester acted as: a client token of a role, another archive
/// (a member domain), or nobody known (where no token is required). Kept
/// in the audit log by its name (`search`, `member`, `none`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum Acting {
    Client(Role),
    Member,
    #[default]
    Nobody,
}

impl Acting {
    pub fn as_str(self) -> &'static str {
        match self {
            Acting::Client(role) => role.as_str(),
            Acting::Member => "member",
            Acting::Nobody => "none",
        }
    }
}

impl From<Acting> for String {
    fn from(acting: Acting) -> String {
        acting.as_str().to_owned()
    }
}

impl TryFrom<String> for Acting {
    type Error = UnknownRole;

    fn try_from(name: String) -> Result<Self, Self::Error> {
        match name.as_str() {
            "member" => Ok(Acting::Member),
            "none" => Ok(Acting::Nobody),
            role => role.parse().map(Acting::Client),
        }
    }
}

impl std::fmt::Display for Acting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_role_and_every_other_requester_reads_back_as_written() {
        let all = Role::ALL
            .map(Acting::Client)
            .into_iter()
            .chain([Acting::Member, Acting::Nobody]);
        for acting in all {
            let json = serde_json::to_string(&acting).unwrap();
            assert_eq!(json, format!("\"{}\"", acting.as_str()));
            assert_eq!(serde_json::from_str::<Acting>(&json).unwrap(), acting);
        }
        assert!(serde_json::from_str::<Acting>("\"admin\"").is_err());
        assert!("member".parse::<Role>().is_err());
    }
}
