//! Archive records: what clients send, what is stored, what is returned.

use std::collections::BTreeMap;

use base64::Engine;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::local::id::ArchiveId;
use crate::local::keys::{InvalidKey, KeyTypes, Visibility};

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
    /// (`{"id_card": "110101199003071234"}`), each given once, as a
    /// string; found by `POST /v1/search`.
    #[serde(default)]
    #[schema(value_type = Option<BTreeMap<String, String>>)]
    pub keys: Option<KeysInput>,
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
    pub keys: Option<KeysInput>,
}

/// A record's `keys` as sent: a JSON object of strings by key type.
///
/// Read by a deserializer of its own because serde's messages quote what
/// they refuse (`invalid type: string "11010519491231002X", expected a
/// map`), and these values are identity numbers: every refusal here names
/// at most the key type (and not even that when the name is malformed, as
/// a value sent in the wrong place would be). A key type given twice is
/// refused rather than letting the last one win, which would drop an
/// earlier value unchecked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeysInput(pub BTreeMap<String, String>);

impl<'de> Deserialize<'de> for KeysInput {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // `deserialize_any`: the typed entry points (`deserialize_map`,
        // `deserialize_string`) let serde_json report a mismatch itself,
        // quoting the value; `any` hands every value to the visitors.
        d.deserialize_any(keys_input::Keys)
    }
}

/// The visitors behind [`KeysInput`]: every `visit_*` serde could call is
/// written out, so that none falls back to serde's message quoting the
/// value.
mod keys_input {
    use std::collections::BTreeMap;
    use std::fmt;

    use serde::de::{
        DeserializeSeed, Deserializer, EnumAccess, Error, MapAccess, SeqAccess, Visitor,
    };

    use super::KeysInput;
    use crate::local::keys::shown_type_name;

    const NOT_AN_OBJECT: &str = "keys must be an object of strings by key type";

    /// The whole `keys` object.
    pub(super) struct Keys;

    impl<'de> Visitor<'de> for Keys {
        type Value = KeysInput;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an object of strings by key type")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<KeysInput, A::Error> {
            let mut keys = BTreeMap::new();
            while let Some(key_type) = map.next_key::<String>()? {
                let value = map.next_value_seed(Value {
                    key_type: &key_type,
                })?;
                if keys.contains_key(&key_type) {
                    return Err(A::Error::custom(format!(
                        "key type {:?} given twice",
                        shown_type_name(&key_type)
                    )));
                }
                keys.insert(key_type, value);
            }
            Ok(KeysInput(keys))
        }

        fn visit_bool<E: Error>(self, _: bool) -> Result<KeysInput, E> {
            Err(E::custom(NOT_AN_OBJECT))
        }
        fn visit_i64<E: Error>(self, _: i64) -> Result<KeysInput, E> {
            Err(E::custom(NOT_AN_OBJECT))
        }
        fn visit_i128<E: Error>(self, _: i128) -> Result<KeysInput, E> {
            Err(E::custom(NOT_AN_OBJECT))
        }
        fn visit_u64<E: Error>(self, _: u64) -> Result<KeysInput, E> {
            Err(E::custom(NOT_AN_OBJECT))
        }
        fn visit_u128<E: Error>(self, _: u128) -> Result<KeysInput, E> {
            Err(E::custom(NOT_AN_OBJECT))
        }
        fn visit_f64<E: Error>(self, _: f64) -> Result<KeysInput, E> {
            Err(E::custom(NOT_AN_OBJECT))
        }
        fn visit_char<E: Error>(self, _: char) -> Result<KeysInput, E> {
            Err(E::custom(NOT_AN_OBJECT))
        }
        fn visit_str<E: Error>(self, _: &str) -> Result<KeysInput, E> {
            Err(E::custom(NOT_AN_OBJECT))
        }
        fn visit_string<E: Error>(self, _: String) -> Result<KeysInput, E> {
            Err(E::custom(NOT_AN_OBJECT))
        }
        fn visit_bytes<E: Error>(self, _: &[u8]) -> Result<KeysInput, E> {
            Err(E::custom(NOT_AN_OBJECT))
        }
        fn visit_byte_buf<E: Error>(self, _: Vec<u8>) -> Result<KeysInput, E> {
            Err(E::custom(NOT_AN_OBJECT))
        }
        fn visit_none<E: Error>(self) -> Result<KeysInput, E> {
            Err(E::custom(NOT_AN_OBJECT))
        }
        fn visit_some<D: Deserializer<'de>>(self, _: D) -> Result<KeysInput, D::Error> {
            Err(D::Error::custom(NOT_AN_OBJECT))
        }
        fn visit_unit<E: Error>(self) -> Result<KeysInput, E> {
            Err(E::custom(NOT_AN_OBJECT))
        }
        fn visit_newtype_struct<D: Deserializer<'de>>(self, _: D) -> Result<KeysInput, D::Error> {
            Err(D::Error::custom(NOT_AN_OBJECT))
        }
        fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<KeysInput, A::Error> {
            Err(A::Error::custom(NOT_AN_OBJECT))
        }
        fn visit_enum<A: EnumAccess<'de>>(self, _: A) -> Result<KeysInput, A::Error> {
            Err(A::Error::custom(NOT_AN_OBJECT))
        }
    }

    /// One key's value: a string, else an error naming only its type.
    struct Value<'a> {
        key_type: &'a str,
    }

    impl Value<'_> {
        fn refuse<E: Error>(&self) -> E {
            E::custom(format!(
                "key {} must be a string",
                shown_type_name(self.key_type)
            ))
        }
    }

    impl<'de> DeserializeSeed<'de> for Value<'_> {
        type Value = String;

        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
            d.deserialize_any(self)
        }
    }

    impl<'de> Visitor<'de> for Value<'_> {
        type Value = String;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a string")
        }

        fn visit_str<E: Error>(self, v: &str) -> Result<String, E> {
            Ok(v.to_owned())
        }
        fn visit_borrowed_str<E: Error>(self, v: &'de str) -> Result<String, E> {
            Ok(v.to_owned())
        }
        fn visit_string<E: Error>(self, v: String) -> Result<String, E> {
            Ok(v)
        }

        fn visit_bool<E: Error>(self, _: bool) -> Result<String, E> {
            Err(self.refuse())
        }
        fn visit_i64<E: Error>(self, _: i64) -> Result<String, E> {
            Err(self.refuse())
        }
        fn visit_i128<E: Error>(self, _: i128) -> Result<String, E> {
            Err(self.refuse())
        }
        fn visit_u64<E: Error>(self, _: u64) -> Result<String, E> {
            Err(self.refuse())
        }
        fn visit_u128<E: Error>(self, _: u128) -> Result<String, E> {
            Err(self.refuse())
        }
        fn visit_f64<E: Error>(self, _: f64) -> Result<String, E> {
            Err(self.refuse())
        }
        fn visit_char<E: Error>(self, _: char) -> Result<String, E> {
            Err(self.refuse())
        }
        fn visit_bytes<E: Error>(self, _: &[u8]) -> Result<String, E> {
            Err(self.refuse())
        }
        fn visit_byte_buf<E: Error>(self, _: Vec<u8>) -> Result<String, E> {
            Err(self.refuse())
        }
        fn visit_none<E: Error>(self) -> Result<String, E> {
            Err(self.refuse())
        }
        fn visit_some<D: Deserializer<'de>>(self, _: D) -> Result<String, D::Error> {
            Err(self.refuse())
        }
        fn visit_unit<E: Error>(self) -> Result<String, E> {
            Err(self.refuse())
        }
        fn visit_newtype_struct<D: Deserializer<'de>>(self, _: D) -> Result<String, D::Error> {
            Err(self.refuse())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<String, A::Error> {
            Err(self.refuse())
        }
        fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<String, A::Error> {
            Err(self.refuse())
        }
        fn visit_enum<A: EnumAccess<'de>>(self, _: A) -> Result<String, A::Error> {
            Err(self.refuse())
        }
    }
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
            Some(keys) => key_types.normalise_all(&keys.0)?,
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

/// A record as kept in the store (the domain name is the store's own),
/// and in the cache of other domains' records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredRecord {
    pub title: String,
    /// The metadata object as JSON text: the binary encoding cannot carry
    /// self-describing values.
    pub metadata_json: String,
    pub content: Option<Vec<u8>>,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    /// In the store, every key; in the cache, an empty value stands for
    /// a key withheld (a real key is never empty: `keys/normalise.rs` refuses it).
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
    #[error("cannot encode a record to store: {0}")]
    Unencodable(#[source] postcard::Error),
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

    /// A client-side record back in stored form (for caching it); the
    /// keys it withholds are kept as empty values, so that the cached
    /// copy still says they were withheld.
    pub fn from_record(r: &Record) -> Self {
        let ms = |t: OffsetDateTime| unix_ms(t);
        let mut keys = r.keys.clone();
        for key_type in &r.keys_withheld {
            keys.entry(key_type.clone()).or_default();
        }
        StoredRecord {
            title: r.title.clone(),
            metadata_json: serde_json::Value::Object(r.metadata.clone()).to_string(),
            content: r.content.clone(),
            created_at_ms: ms(r.created_at),
            updated_at_ms: ms(r.updated_at),
            keys,
        }
    }

    pub fn encode(&self) -> Result<Vec<u8>, StoredRecordError> {
        let mut out = vec![STORED_VERSION];
        out.extend(postcard::to_stdvec(self).map_err(StoredRecordError::Unencodable)?);
        Ok(out)
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

    /// The record as clients see it, with every key it holds (an empty
    /// value, the cache's mark of a key withheld, is listed as withheld).
    pub fn into_record(self, id: ArchiveId, domain: &str) -> Record {
        let metadata = match serde_json::from_str(&self.metadata_json) {
            Ok(serde_json::Value::Object(map)) => map,
            _ => serde_json::Map::new(),
        };
        let (withheld, keys): (BTreeMap<_, _>, BTreeMap<_, _>) =
            self.keys.into_iter().partition(|(_, v)| v.is_empty());
        Record {
            id,
            title: self.title,
            metadata,
            content: self.content,
            created_at: from_ms(self.created_at_ms),
            updated_at: from_ms(self.updated_at_ms),
            domain: domain.to_owned(),
            keys,
            keys_withheld: withheld.into_keys().collect(),
            catalogue_only: false,
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
    /// The record's keys, normalised (absent when it has none). Values of
    /// private key types are only in the answers of `POST /v1/search`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub keys: BTreeMap<String, String>,
    /// The key types the record holds a value of that this answer
    /// withholds (private types, in a record read by its ID; absent when
    /// none): `POST /v1/search`, which is audited, returns them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keys_withheld: Vec<String>,
    /// Only the catalogue entry (archive number, title, holding archive,
    /// dates) was given: the holding archive's release policy keeps the
    /// rest from other archives' readers, and gives it out only as a
    /// sealed copy in a request (`POST /v1/requests`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub catalogue_only: bool,
}

impl Record {
    /// The record's catalogue entry: its archive number, title, holding
    /// archive and dates, without metadata, content or keys.
    #[must_use]
    pub fn catalogue_entry(self) -> Record {
        Record {
            metadata: serde_json::Map::new(),
            content: None,
            keys: BTreeMap::new(),
            keys_withheld: Vec::new(),
            catalogue_only: true,
            ..self
        }
    }

    /// The record without the values of its private keys: only the types
    /// public in `types` keep their values; every other key (private, or
    /// not declared here) is named in `keys_withheld` instead. Applying it
    /// twice changes nothing. The rule, and why, is `Domain::get`'s
    /// (`local/domain/mod.rs`).
    pub fn withhold_private_keys(&mut self, types: &KeyTypes) {
        let public = |key_type: &str| {
            types
                .get(key_type)
                .is_some_and(|t| t.visibility == Visibility::Public)
        };
        let (kept, withheld): (BTreeMap<_, _>, BTreeMap<_, _>) = std::mem::take(&mut self.keys)
            .into_iter()
            .partition(|(t, _)| public(t));
        self.keys = kept;
        self.keys_withheld.extend(withheld.into_keys());
        self.keys_withheld.sort();
        self.keys_withheld.dedup();
    }
}

/// Microseconds since the Unix epoch (0 before it).
pub fn now_us() -> u64 {
    u64::try_from(OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000).unwrap_or(0)
}

pub fn now_ms() -> i64 {
    unix_ms(OffsetDateTime::now_utc())
}

/// Milliseconds since the Unix epoch: `time` keeps years within ±9999,
/// whose milliseconds fit an i64 with room to spare.
#[allow(clippy::cast_possible_truncation)]
fn unix_ms(t: OffsetDateTime) -> i64 {
    (t.unix_timestamp_nanos() / 1_000_000) as i64
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

    // serde's `with` hands the field over by reference.
    #[allow(clippy::ref_option)]
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

    proptest::proptest! {
        /// A stored record's bytes come from the disk or another domain's
        /// cache: any bytes are read or refused, never a panic.
        #[test]
        fn any_bytes_read_as_a_stored_record_or_are_refused_without_panic(
            version in proptest::prop_oneof![
                proptest::strategy::Just(STORED_VERSION),
                proptest::strategy::Just(STORED_VERSION_WITHOUT_KEYS),
                proptest::prelude::any::<u8>(),
            ],
            rest in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..256),
        ) {
            let mut bytes = vec![version];
            bytes.extend(rest);
            if let Ok(read) = StoredRecord::decode(&bytes) {
                let again = read.encode().expect("encodes");
                proptest::prop_assert_eq!(StoredRecord::decode(&again).expect("reads"), read);
            }
        }
    }

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
        assert_eq!(
            StoredRecord::decode(&stored.encode().unwrap()).unwrap(),
            stored
        );
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

    use proptest::prelude::*;
    use serde_json::{json, Value};

    /// What a PUT body and a bulk line with `keys` make of it: the error
    /// message, or None when it is accepted.
    fn refusals(keys: &str) -> Vec<Option<String>> {
        let put = format!(r#"{{"title":"t","keys":{keys}}}"#);
        let line = format!(r#"{{"id":"a","title":"t","keys":{keys}}}"#);
        vec![
            serde_json::from_str::<RecordInput>(&put)
                .err()
                .map(|e| e.to_string()),
            serde_json::from_str::<BulkLine>(&line)
                .err()
                .map(|e| e.to_string()),
        ]
    }

    /// A JSON value built around `secret` and `number`: anything but an
    /// object of strings, at any depth.
    fn bad_value(secret: String, number: u64) -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(json!(secret.clone())),
            Just(json!(number)),
            Just(json!(-i64::try_from(number).expect("below u64::MAX / 2"))),
            Just(json!(number as f64 + 0.5)),
            Just(json!(true)),
            Just(Value::Null),
        ];
        let names = prop_oneof![Just("id_card".to_owned()), Just(secret), "[a-z_]{1,8}",];
        leaf.prop_recursive(3, 16, 4, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map(names.clone(), inner, 1..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn no_error_for_bad_keys_quotes_the_value_it_refused(
            secret in "[1-8][0-9]{16}[0-9X]",
            number in 10_000_000_000u64..u64::MAX / 2,
            keys in ("[1-8][0-9]{16}[0-9X]", 10_000_000_000u64..u64::MAX / 2)
                .prop_flat_map(|(s, n)| bad_value(s, n)),
        ) {
            // The generated value hides its own secret and number; put
            // this case's in too, beside and inside it.
            let accepted = |v: &Value| match v {
                Value::Null => true,
                Value::Object(m) => m.values().all(Value::is_string),
                _ => false,
            };
            let cases = [
                keys.clone(),
                json!({"id_card": keys}),
                json!({"id_card": number}),
                json!({"id_card": [secret.clone()]}),
                json!({secret.clone(): number}),
                json!(secret.clone()),
                json!(number),
            ];
            for case in cases.iter().filter(|v| !accepted(v)) {
                let text = case.to_string();
                for refusal in refusals(&text) {
                    let message = refusal.expect("refused");
                    // Every digit run of 10 or more in the body is a value.
                    let digits = digit_runs(&text);
                    for run in digits {
                        prop_assert!(!message.contains(&run), "{message} quotes {run} of {text}");
                    }
                    prop_assert!(!message.contains(&secret[..17]), "{message}");
                }
            }
        }

        #[test]
        fn a_key_type_given_twice_is_refused_without_either_value(
            first in "[1-8][0-9]{16}[0-9X]",
            second in "[1-8][0-9]{16}[0-9X]",
            name in prop_oneof![Just("id_card".to_owned()), "[1-8][0-9]{17}"],
        ) {
            let keys = format!(r#"{{"{name}":"{first}","{name}":"{second}"}}"#);
            for refusal in refusals(&keys) {
                let message = refusal.expect("refused");
                let shown = crate::local::keys::shown_type_name(&name);
                prop_assert!(
                    message.contains(&format!("key type {shown:?} given twice")),
                    "{message}"
                );
                prop_assert!(!message.contains(&first) && !message.contains(&second), "{message}");
            }
        }
    }

    /// The runs of 10 or more digits in `text`.
    fn digit_runs(text: &str) -> Vec<String> {
        text.split(|c: char| !c.is_ascii_digit())
            .filter(|run| run.len() >= 10)
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn the_serde_messages_of_the_issue_no_longer_quote_the_number() {
        let [put, line] = &refusals(r#""11010519491231002X""#)[..] else {
            unreachable!()
        };
        for message in [put, line] {
            let message = message.as_deref().unwrap_or_default();
            assert!(
                message.starts_with("keys must be an object of strings by key type"),
                "{message}"
            );
            assert!(!message.contains("1101051949"), "{message}");
        }
        let message = refusals(r#"{"id_card": 110105194912310021}"#)[0]
            .clone()
            .unwrap_or_default();
        assert!(
            message.starts_with("key id_card must be a string"),
            "{message}"
        );
        assert!(!message.contains("1101051949"), "{message}");
    }

    #[test]
    fn keys_given_as_strings_once_each_are_read_as_given() {
        let input: RecordInput = serde_json::from_str(
            r#"{"title":"t","keys":{"name_birth":"张三|1990-03-07","id_card":"11010519491231002x"}}"#,
        )
        .unwrap();
        let keys = input.keys.unwrap().0;
        assert_eq!(keys["id_card"], "11010519491231002x");
        assert_eq!(keys["name_birth"], "张三|1990-03-07");
        let none: RecordInput = serde_json::from_str(r#"{"title":"t","keys":null}"#).unwrap();
        assert!(none.keys.is_none());
    }

    fn types() -> KeyTypes {
        use crate::local::keys::{KeyFormat, KeyType};
        KeyTypes::new(vec![
            KeyType {
                name: "id_card".into(),
                visibility: Visibility::Private,
                format: KeyFormat::IdCard,
            },
            KeyType {
                name: "cert".into(),
                visibility: Visibility::Public,
                format: KeyFormat::Text,
            },
        ])
        .unwrap()
    }

    #[test]
    fn a_record_withholds_its_private_and_undeclared_keys_and_keeps_the_public_ones() {
        let stored = StoredRecord {
            title: "t".into(),
            metadata_json: "{}".into(),
            content: None,
            created_at_ms: 1,
            updated_at_ms: 2,
            keys: BTreeMap::from([
                ("id_card".into(), "11010519491231002X".into()),
                ("cert".into(), "C-1".into()),
                ("gone".into(), "g".into()),
            ]),
        };
        let id = ArchiveId::parse("P-1").unwrap();
        let mut record = stored.clone().into_record(id.clone(), "A");
        assert!(record.keys_withheld.is_empty(), "the store's form has all");
        record.withhold_private_keys(&types());
        assert_eq!(
            record.keys,
            BTreeMap::from([("cert".to_owned(), "C-1".to_owned())])
        );
        assert_eq!(record.keys_withheld, ["gone", "id_card"]);
        let again = {
            let mut r = record.clone();
            r.withhold_private_keys(&types());
            r
        };
        assert_eq!(again, record, "twice changes nothing");
        let text = serde_json::to_string(&record).unwrap();
        assert!(!text.contains("1101051949"), "{text}");
        assert!(
            text.contains(r#""keys_withheld":["gone","id_card"]"#),
            "{text}"
        );

        // Through the cache's form and back, it still says what it withheld.
        let cached =
            StoredRecord::decode(&StoredRecord::from_record(&record).encode().unwrap()).unwrap();
        assert_eq!(cached.into_record(id, "A"), record);

        // A record with nothing withheld does not mention it.
        let plain = serde_json::to_value(
            StoredRecord {
                keys: BTreeMap::new(),
                ..stored
            }
            .into_record(ArchiveId::parse("P-2").unwrap(), "A"),
        )
        .unwrap();
        assert!(plain.get("keys_withheld").is_none(), "{plain}");
    }
}
