//! Archive records: what clients send, what is stored, what is returned.

use std::collections::BTreeMap;

use base64::Engine;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::local::id::ArchiveId;
use crate::local::keys::{InvalidKey, KeyTypes};

/// Longest title, in bytes.
pub const MAX_TITLE_BYTES: usize = 4096;

/// The body of `PUT /v1/archives/{id}`, and of each `_bulk` line (with `id`).
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RecordInput {
    pub title: String,
    /// Any JSON object.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<serde_json::Map<String, serde_json::Value>>,
    /// Base64 (standard alphabet, padded).
    #[serde(default)]
    pub content: Option<String>,
    /// Exact keys besides the archive number, by declared key type
    /// (`{"id_card": "110101199003071234"}`); found by `POST /v1/search`.
    #[serde(default)]
    pub keys: Option<BTreeMap<String, String>>,
}

/// One line of a bulk import.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BulkLine {
    pub id: String,
    pub title: String,
    #[serde(default)]
    pub metadata: Option<serde_json::Map<String, serde_json::Value>>,
    #[serde(default)]
    pub content: Option<String>,
    #[serde(default)]
    pub keys: Option<BTreeMap<String, String>>,
}

impl BulkLine {
    pub fn split(self) -> (String, RecordInput) {
        (
            self.id,
            RecordInput {
                title: self.title,
                metadata: self.metadata,
                content: self.content,
                keys: self.keys,
            },
        )
    }
}

/// Why a record body is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidRecord {
    #[error("title is {0} bytes long; the limit is {MAX_TITLE_BYTES}")]
    TitleTooLong(usize),
    #[error("content is not valid base64: {0}")]
    ContentEncoding(String),
    #[error("content is {size} bytes; the limit is {limit}")]
    ContentTooLarge { size: usize, limit: usize },
    #[error(transparent)]
    Key(#[from] InvalidKey),
}

/// A record's fields as validated, before timestamps are known.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordBody {
    pub title: String,
    pub metadata: serde_json::Map<String, serde_json::Value>,
    pub content: Option<Vec<u8>>,
    /// Normalised by the declared key types.
    pub keys: BTreeMap<String, String>,
}

impl RecordInput {
    /// Checks sizes and encodings, and normalises the keys by `key_types`.
    pub fn validate(
        self,
        max_content: usize,
        key_types: &KeyTypes,
    ) -> Result<RecordBody, InvalidRecord> {
        if self.title.len() > MAX_TITLE_BYTES {
            return Err(InvalidRecord::TitleTooLong(self.title.len()));
        }
        let content = match self.content {
            None => None,
            Some(b64) => {
                // Base64 holds 3 bytes per 4 characters: refuse before decoding.
                let size = b64.len() / 4 * 3;
                if size > max_content + 2 {
                    return Err(InvalidRecord::ContentTooLarge {
                        size,
                        limit: max_content,
                    });
                }
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(b64.as_bytes())
                    .map_err(|e| InvalidRecord::ContentEncoding(e.to_string()))?;
                if bytes.len() > max_content {
                    return Err(InvalidRecord::ContentTooLarge {
                        size: bytes.len(),
                        limit: max_content,
                    });
                }
                Some(bytes)
            }
        };
        let keys = match &self.keys {
            Some(keys) => key_types.normalise_all(keys)?,
            None => BTreeMap::new(),
        };
        Ok(RecordBody {
            title: self.title,
            metadata: self.metadata.unwrap_or_default(),
            content,
            keys,
        })
    }
}

/// A record as kept in the store (the domain name is the store's own).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredRecord {
    pub title: String,
    /// The metadata object as JSON text: the binary encoding cannot carry
    /// self-describing values.
    pub metadata_json: String,
    pub content: Option<Vec<u8>>,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    pub keys: BTreeMap<String, String>,
}

/// First byte of every stored value written now.
const STORED_VERSION: u8 = 2;
/// Records written before keys existed: read as records without keys.
const STORED_VERSION_WITHOUT_KEYS: u8 = 1;

/// A record as version 1 stored it.
#[derive(Deserialize)]
struct StoredRecordWithoutKeys {
    title: String,
    metadata_json: String,
    content: Option<Vec<u8>>,
    created_at_ms: i64,
    updated_at_ms: i64,
}

/// Why a stored value could not be read back (a corrupt or foreign file).
#[derive(Debug, thiserror::Error)]
pub enum StoredRecordError {
    #[error("stored record has version {0}, this build reads {STORED_VERSION_WITHOUT_KEYS} and {STORED_VERSION}")]
    Version(u8),
    #[error("stored record is empty")]
    Empty,
    #[error("stored record is malformed: {0}")]
    Malformed(String),
}

impl StoredRecord {
    pub fn new(body: &RecordBody, created_at_ms: i64, updated_at_ms: i64) -> Self {
        StoredRecord {
            title: body.title.clone(),
            metadata_json: serde_json::Value::Object(body.metadata.clone()).to_string(),
            content: body.content.clone(),
            created_at_ms,
            updated_at_ms,
            keys: body.keys.clone(),
        }
    }

    /// A client-side record back in stored form (for caching it).
    pub fn from_record(r: &Record) -> Self {
        let ms = |t: OffsetDateTime| (t.unix_timestamp_nanos() / 1_000_000) as i64;
        StoredRecord {
            title: r.title.clone(),
            metadata_json: serde_json::Value::Object(r.metadata.clone()).to_string(),
            content: r.content.clone(),
            created_at_ms: ms(r.created_at),
            updated_at_ms: ms(r.updated_at),
            keys: r.keys.clone(),
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![STORED_VERSION];
        // postcard cannot fail on these plain types writing to a Vec.
        out.extend(postcard::to_stdvec(self).unwrap_or_default());
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, StoredRecordError> {
        let malformed = |e: postcard::Error| StoredRecordError::Malformed(e.to_string());
        match bytes.split_first() {
            None => Err(StoredRecordError::Empty),
            Some((&STORED_VERSION, rest)) => postcard::from_bytes(rest).map_err(malformed),
            Some((&STORED_VERSION_WITHOUT_KEYS, rest)) => {
                let old: StoredRecordWithoutKeys = postcard::from_bytes(rest).map_err(malformed)?;
                Ok(StoredRecord {
                    title: old.title,
                    metadata_json: old.metadata_json,
                    content: old.content,
                    created_at_ms: old.created_at_ms,
                    updated_at_ms: old.updated_at_ms,
                    keys: BTreeMap::new(),
                })
            }
            Some((&v, _)) => Err(StoredRecordError::Version(v)),
        }
    }

    pub fn into_record(self, id: ArchiveId, domain: &str) -> Record {
        let metadata = match serde_json::from_str(&self.metadata_json) {
            Ok(serde_json::Value::Object(map)) => map,
            _ => serde_json::Map::new(),
        };
        Record {
            id,
            title: self.title,
            metadata,
            content: self.content,
            created_at: from_ms(self.created_at_ms),
            updated_at: from_ms(self.updated_at_ms),
            domain: domain.to_owned(),
            keys: self.keys,
        }
    }
}

/// A record as clients see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Record {
    #[schema(value_type = String)]
    pub id: ArchiveId,
    pub title: String,
    #[schema(value_type = Object)]
    pub metadata: serde_json::Map<String, serde_json::Value>,
    /// Base64 (standard alphabet, padded).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "base64_option"
    )]
    #[schema(value_type = Option<String>)]
    pub content: Option<Vec<u8>>,
    /// RFC 3339 in UTC, to the millisecond.
    #[serde(with = "millis")]
    #[schema(value_type = String, format = DateTime)]
    pub created_at: OffsetDateTime,
    #[serde(with = "millis")]
    #[schema(value_type = String, format = DateTime)]
    pub updated_at: OffsetDateTime,
    /// The domain that holds the record.
    pub domain: String,
    /// The record's keys, normalised (absent when it has none).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub keys: BTreeMap<String, String>,
}

/// Microseconds since the Unix epoch (0 before it).
pub fn now_us() -> u64 {
    u64::try_from(OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000).unwrap_or(0)
}

pub fn now_ms() -> i64 {
    (OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000) as i64
}

fn from_ms(ms: i64) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .unwrap_or(OffsetDateTime::UNIX_EPOCH)
}

/// RFC 3339 in UTC with exactly three fractional digits, so timestamps
/// sort as text too (`2024-05-01T08:00:00.120Z`).
mod millis {
    use serde::{Deserialize, Deserializer, Serializer};
    use time::format_description::well_known::Rfc3339;
    use time::macros::format_description;
    use time::{OffsetDateTime, UtcOffset};

    pub fn serialize<S: Serializer>(t: &OffsetDateTime, s: S) -> Result<S::Ok, S::Error> {
        let format = format_description!(
            "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
        );
        let text = t
            .to_offset(UtcOffset::UTC)
            .format(&format)
            .map_err(serde::ser::Error::custom)?;
        s.serialize_str(&text)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<OffsetDateTime, D::Error> {
        let text = String::deserialize(d)?;
        OffsetDateTime::parse(&text, &Rfc3339).map_err(serde::de::Error::custom)
    }
}

mod base64_option {
    use base64::Engine;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &Option<Vec<u8>>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(bytes) => {
                s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(bytes))
            }
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<u8>>, D::Error> {
        Option::<String>::deserialize(d)?
            .map(|s| {
                base64::engine::general_purpose::STANDARD
                    .decode(s.as_bytes())
                    .map_err(serde::de::Error::custom)
            })
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_records_round_trip_and_refuse_garbage() {
        let body = RecordInput {
            title: "会议纪要".into(),
            metadata: Some(
                serde_json::json!({"year": 2023, "tags": ["a"]})
                    .as_object()
                    .cloned()
                    .unwrap(),
            ),
            content: Some("aGVsbG8=".into()),
            keys: None,
        }
        .validate(100, &KeyTypes::default())
        .unwrap();
        let stored = StoredRecord::new(&body, 1, 2);
        assert_eq!(StoredRecord::decode(&stored.encode()).unwrap(), stored);
        assert!(StoredRecord::decode(&[]).is_err());
        assert!(StoredRecord::decode(&[9, 1, 2]).is_err());
        assert!(StoredRecord::decode(&[1, 0xff, 0xff, 0xff]).is_err());
    }

    #[test]
    fn records_stored_before_keys_existed_read_back_without_keys() {
        #[derive(Serialize)]
        struct Old<'a>(&'a str, &'a str, Option<Vec<u8>>, i64, i64);
        let mut bytes = vec![STORED_VERSION_WITHOUT_KEYS];
        bytes.extend(postcard::to_stdvec(&Old("t", "{}", Some(vec![1]), 5, 6)).unwrap());
        let r = StoredRecord::decode(&bytes).unwrap();
        assert_eq!(
            (
                r.title.as_str(),
                r.content,
                r.created_at_ms,
                r.updated_at_ms
            ),
            ("t", Some(vec![1]), 5, 6)
        );
        assert!(r.keys.is_empty());
    }

    #[test]
    fn content_limits_hold() {
        let input = |c: &str| RecordInput {
            title: "t".into(),
            metadata: None,
            content: Some(c.into()),
            keys: None,
        };
        assert!(matches!(
            input("aGVsbG8=").validate(4, &KeyTypes::default()),
            Err(InvalidRecord::ContentTooLarge { size: 5, limit: 4 })
        ));
        assert!(matches!(
            input("!!").validate(4, &KeyTypes::default()),
            Err(InvalidRecord::ContentEncoding(_))
        ));
        assert_eq!(
            input("aGVsbG8=")
                .validate(5, &KeyTypes::default())
                .unwrap()
                .content
                .unwrap(),
            b"hello"
        );
    }
}
