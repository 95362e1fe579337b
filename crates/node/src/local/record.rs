//! Archive records: what clients send, what is stored, what is returned.

use base64::Engine;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::local::id::ArchiveId;

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
}

impl BulkLine {
    pub fn split(self) -> (String, RecordInput) {
        (
            self.id,
            RecordInput {
                title: self.title,
                metadata: self.metadata,
                content: self.content,
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
}

/// A record's fields as validated, before timestamps are known.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordBody {
    pub title: String,
    pub metadata: serde_json::Map<String, serde_json::Value>,
    pub content: Option<Vec<u8>>,
}

impl RecordInput {
    pub fn validate(self, max_content: usize) -> Result<RecordBody, InvalidRecord> {
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
        Ok(RecordBody {
            title: self.title,
            metadata: self.metadata.unwrap_or_default(),
            content,
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
}

/// First byte of every stored value.
const STORED_VERSION: u8 = 1;

/// Why a stored value could not be read back (a corrupt or foreign file).
#[derive(Debug, thiserror::Error)]
pub enum StoredRecordError {
    #[error("stored record has version {0}, this build reads {STORED_VERSION}")]
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
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![STORED_VERSION];
        // postcard cannot fail on these plain types writing to a Vec.
        out.extend(postcard::to_stdvec(self).unwrap_or_default());
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, StoredRecordError> {
        match bytes.split_first() {
            None => Err(StoredRecordError::Empty),
            Some((&STORED_VERSION, rest)) => {
                postcard::from_bytes(rest).map_err(|e| StoredRecordError::Malformed(e.to_string()))
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
        }
        .validate(100)
        .unwrap();
        let stored = StoredRecord::new(&body, 1, 2);
        assert_eq!(StoredRecord::decode(&stored.encode()).unwrap(), stored);
        assert!(StoredRecord::decode(&[]).is_err());
        assert!(StoredRecord::decode(&[9, 1, 2]).is_err());
        assert!(StoredRecord::decode(&[1, 0xff, 0xff, 0xff]).is_err());
    }

    #[test]
    fn content_limits_hold() {
        let input = |c: &str| RecordInput {
            title: "t".into(),
            metadata: None,
            content: Some(c.into()),
        };
        assert!(matches!(
            input("aGVsbG8=").validate(4),
            Err(InvalidRecord::ContentTooLarge { size: 5, limit: 4 })
        ));
        assert!(matches!(
            input("!!").validate(4),
            Err(InvalidRecord::ContentEncoding(_))
        ));
        assert_eq!(
            input("aGVsbG8=").validate(5).unwrap().content.unwrap(),
            b"hello"
        );
    }
}
