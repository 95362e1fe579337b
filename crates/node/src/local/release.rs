//! The holding archive's release policy (`[requests]`): which records it
//! answers another archive's request for by itself, and which its own
//! reviewers decide. The decision stays with the archive that holds the
//! record: nothing here is told by the asking archive but the applicant's
//! keyed digest.

use serde::{Deserialize, Serialize};

use crate::local::keys::KeyHasher;
use crate::local::record::Record;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReleasePolicy {
    /// The key type an applicant's identity number is (what a request
    /// without record IDs searches by, and what `applicant_must_be_key`
    /// compares).
    pub key_type: String,
    /// Record categories (the metadata field `category`) answered without
    /// review: the 民生档案 a person may ask for their own.
    pub categories: Vec<String>,
    /// Access states (the metadata field `access`; `unstated` when it has
    /// none) answered without review.
    pub access: Vec<String>,
    /// Answer by itself only when the applicant's identity number is one
    /// of the record's keys (their own record).
    pub applicant_must_be_key: bool,
    /// What a search from another archive gets of the records held here.
    pub remote_search: RemoteSearch,
}

/// What a plain search (a search token, not a request) from another
/// archive gets of a record held here.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RemoteSearch {
    /// The archive number, title, holding archive and dates: enough to
    /// know where to ask. Metadata, content and keys go out only by
    /// request, signed, by this archive's policy or its reviewers.
    #[default]
    Summary,
    /// The whole record, keys included, as a search here gets it.
    Full,
}

impl Default for ReleasePolicy {
    fn default() -> Self {
        ReleasePolicy {
            key_type: "id_card".into(),
            categories: [
                "marriage",
                "schooling",
                "work",
                "retirement",
                "property",
                "land",
            ]
            .map(String::from)
            .to_vec(),
            access: vec!["open".into()],
            applicant_must_be_key: true,
            remote_search: RemoteSearch::Summary,
        }
    }
}

impl ReleasePolicy {
    /// Why this archive does not give `record` out by itself to anyone of
    /// another archive, whoever the applicant: its category or its access
    /// state is released by review only. `None`: it may go out (to a
    /// request, if the applicant is among its persons when the policy
    /// says so). In English and Chinese: a reviewer's page shows it.
    fn withheld_whoever_asks(&self, record: &Record) -> Option<String> {
        let field = |name: &str| record.metadata.get(name).and_then(|v| v.as_str());
        let category = field("category").unwrap_or("unstated");
        if !self.categories.iter().any(|c| c == category) {
            return Some(format!(
                "{}: category {category:?} is released by review only (门类“{category}”须经审核方可提供)",
                record.id
            ));
        }
        let access = field("access").unwrap_or("unstated");
        if !self.access.iter().any(|a| a == access) {
            return Some(format!(
                "{}: access {access:?} is released by review only (开放状态“{access}”须经审核方可提供)",
                record.id
            ));
        }
        None
    }

    /// `record` as a reader of another archive gets it (a member domain's
    /// lookup, or another archive's token reading here): whole if this
    /// archive releases it by itself, else only its catalogue entry.
    pub fn for_remote_read(&self, record: Record) -> Record {
        if self.withheld_whoever_asks(&record).is_some() {
            record.catalogue_entry()
        } else {
            record
        }
    }

    /// `record` as a search from another archive gets it: its catalogue
    /// entry, or with `remote_search = "full"`, what a remote read gets.
    pub fn for_remote_search(&self, record: Record) -> Record {
        match self.remote_search {
            RemoteSearch::Summary => record.catalogue_entry(),
            RemoteSearch::Full => self.for_remote_read(record),
        }
    }

    /// Whether the applicant whose identity number has `applicant_digest`
    /// is among `record`'s persons (the number is one of its keys).
    pub fn names_applicant(
        &self,
        record: &Record,
        applicant_digest: &str,
        hasher: &KeyHasher,
    ) -> bool {
        record
            .keys
            .get(&self.key_type)
            .is_some_and(|value| hasher.audit_digest(&self.key_type, value) == applicant_digest)
    }

    /// Why `record` goes to a reviewer rather than out by itself, for an
    /// applicant whose identity number has `applicant_digest` (the audit
    /// digest under `hasher`); `None`: it may go out. In English and
    /// Chinese: the reviewer's page shows it as it is.
    pub fn review_reason(
        &self,
        record: &Record,
        applicant_digest: &str,
        hasher: &KeyHasher,
    ) -> Option<String> {
        if let Some(why) = self.withheld_whoever_asks(record) {
            return Some(why);
        }
        if self.applicant_must_be_key && !self.names_applicant(record, applicant_digest, hasher) {
            return Some(format!(
                "{}: the applicant is not among the record's persons (申请人不是该档案所涉人员)",
                record.id
            ));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local::id::ArchiveId;

    fn record(category: &str, access: Option<&str>, id_card: &str) -> Record {
        let mut metadata = serde_json::Map::new();
        metadata.insert("category".into(), category.into());
        if let Some(access) = access {
            metadata.insert("access".into(), access.into());
        }
        Record {
            id: ArchiveId::parse("A-1").unwrap(),
            title: "t".into(),
            metadata,
            content: None,
            created_at: time::OffsetDateTime::UNIX_EPOCH,
            updated_at: time::OffsetDateTime::UNIX_EPOCH,
            domain: "d".into(),
            keys: [("id_card".to_owned(), id_card.to_owned())].into(),
            keys_withheld: Vec::new(),
            catalogue_only: false,
        }
    }

    #[test]
    fn an_open_marriage_record_of_the_applicant_goes_out_and_anything_else_to_review() {
        let hasher = KeyHasher::new(Some("secret of the cluster"));
        let policy = ReleasePolicy::default();
        let me = hasher.audit_digest("id_card", "11010519491231002X");
        let mine = record("marriage", Some("open"), "11010519491231002X");
        assert_eq!(policy.review_reason(&mine, &me, &hasher), None);
        let someone_else = hasher.audit_digest("id_card", "110105194912310021");
        assert!(policy
            .review_reason(&mine, &someone_else, &hasher)
            .is_some_and(|r| r.contains("not among") && !r.contains("1101")));
        let closed = record("marriage", Some("closed"), "11010519491231002X");
        assert!(policy.review_reason(&closed, &me, &hasher).is_some());
        let unstated = record("marriage", None, "11010519491231002X");
        assert!(policy.review_reason(&unstated, &me, &hasher).is_some());
        let court = record("court", Some("open"), "11010519491231002X");
        assert!(policy.review_reason(&court, &me, &hasher).is_some());
    }

    #[test]
    fn a_search_from_elsewhere_gets_a_catalogue_entry_unless_the_policy_says_full() {
        let mut full = record("marriage", Some("open"), "11010519491231002X");
        full.content = Some(b"content".to_vec());
        let summary = ReleasePolicy::default().for_remote_search(full.clone());
        assert_eq!(
            (
                summary.id.as_str(),
                summary.title.as_str(),
                summary.domain.as_str()
            ),
            ("A-1", "t", "d")
        );
        assert!(summary.catalogue_only);
        assert!(summary.metadata.is_empty() && summary.content.is_none());
        assert!(summary.keys.is_empty() && summary.keys_withheld.is_empty());
        let open = ReleasePolicy {
            remote_search: RemoteSearch::Full,
            ..ReleasePolicy::default()
        };
        assert_eq!(open.for_remote_search(full.clone()), full);
        // Full or not, a record kept for review is only its entry.
        let kept = record("court", Some("open"), "11010519491231002X");
        assert!(open.for_remote_search(kept).catalogue_only);
    }

    #[test]
    fn a_reader_of_another_archive_gets_what_the_policy_releases_by_itself_and_of_the_rest_the_catalogue_entry(
    ) {
        let policy = ReleasePolicy::default();
        let mut released = record("marriage", Some("open"), "11010519491231002X");
        released.content = Some(b"content".to_vec());
        assert_eq!(policy.for_remote_read(released.clone()), released);
        for (category, access) in [
            ("court", Some("open")),
            ("marriage", Some("closed")),
            ("marriage", None),
        ] {
            let mut kept = record(category, access, "11010519491231002X");
            kept.content = Some(b"a spouse's name".to_vec());
            let read = policy.for_remote_read(kept.clone());
            assert!(read.catalogue_only, "{category} {access:?}");
            assert_eq!((read.id, read.title), (kept.id, kept.title));
            assert!(read.metadata.is_empty() && read.content.is_none() && read.keys.is_empty());
        }
    }
}
