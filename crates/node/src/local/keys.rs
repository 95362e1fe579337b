//! Named exact keys (identity number, name and birth date, …) that records
//! carry besides the archive number: the declared key types, how values are
//! normalised and validated, and the digests that stand in for the values in
//! filters, the store index and the audit log.
//!
//! Key values are often personal data. Nothing in this module puts a value
//! into an error message or Debug output: errors say what is wrong (length,
//! character, date, check digit) and name the key type, never the value.
//!
//! # Normalisation (the spec)
//!
//! Every format:
//! 1. Unicode NFC;
//! 2. trim Unicode whitespace (`White_Space`, including U+3000) at both ends;
//! 3. empty after that: [`InvalidKey::Empty`];
//! 4. any control character ([`char::is_control`]) left:
//!    [`InvalidKey::ControlCharacter`];
//! 5. more than [`MAX_KEY_BYTES`] bytes of UTF-8: [`InvalidKey::TooLong`].
//!
//! [`KeyFormat::Text`]: only the rules above.
//!
//! [`KeyFormat::IdCard`], the 18-character resident identity number of
//! GB 11643-1999, also:
//! 1. full-width digits `０`–`９` (U+FF10..=U+FF19) and full-width `Ｘ`/`ｘ`
//!    become ASCII, because Chinese input methods type them;
//! 2. a final `x` becomes `X`;
//! 3. exactly 18 characters ([`IdCardError::Length`]), 17 ASCII digits then a
//!    digit or `X`; anything else, inner spaces included, is
//!    [`IdCardError::Character`];
//! 4. region (first 6 digits): the first digit is 1–8, province codes
//!    11..=82 ([`IdCardError::Region`]);
//! 5. birth date (characters 7–14, `YYYYMMDD`): a real date, not before
//!    1900-01-01 and not after today in China Standard Time (UTC+8)
//!    ([`IdCardError::BirthDate`]);
//! 6. check character (ISO 7064 MOD 11-2): with weights
//!    `7 9 10 5 8 4 2 1 6 3 7 9 10 5 8 4 2` over the first 17 digits,
//!    `"10X98765432"[sum % 11]` ([`IdCardError::CheckDigit`]).
//!
//! Normalisation is idempotent: a normalised value normalises to itself.

use std::collections::BTreeMap;
use std::fmt;

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use time::{Date, Month, OffsetDateTime, UtcOffset};
use unicode_normalization::UnicodeNormalization;

/// Most key types a cluster may declare.
pub const MAX_KEY_TYPES: usize = 16;
/// Most keys one record may carry.
pub const MAX_KEYS_PER_RECORD: usize = 16;
/// Longest key type name, in characters.
pub const MAX_TYPE_NAME_CHARS: usize = 32;
/// Longest normalised key value, in bytes of UTF-8.
pub const MAX_KEY_BYTES: usize = 256;
/// Raw values longer than this are refused before normalisation, so a huge
/// value cannot make us run NFC over megabytes only to refuse it afterwards.
const MAX_RAW_KEY_BYTES: usize = 64 * 1024;

/// Separates the parts of the bytes that are digested (ASCII unit
/// separator: cannot occur in a type name, and values refuse controls).
const SEP: char = '\u{1f}';

/// Derivation key used when a domain has no cluster secret. It is public
/// (it is in this source), so digests made with it hide nothing from someone
/// who can guess values.
const PUBLIC_DERIVATION_KEY: &[u8] = b"xarchive public derivation key v1 (not secret)";
const FILTER_KEY_LABEL: &[u8] = b"xarchive private key filter v1";
const AUDIT_KEY_LABEL: &[u8] = b"xarchive audit v1";

/// Weights of the first 17 digits in GB 11643-1999's check.
const ID_CARD_WEIGHTS: [u32; 17] = [7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2];
/// Check character for each `sum % 11`.
const ID_CARD_CHECK: &[u8; 11] = b"10X98765432";
const ID_CARD_LEN: usize = 18;

/// How a key type's values are checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum KeyFormat {
    /// Any text: only the common rules.
    #[default]
    Text,
    /// The 18-character resident identity number (GB 11643-1999).
    IdCard,
}

/// Whether a key type may be tested by anyone holding the filter (public)
/// or only by those holding the cluster secret (private).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Visibility {
    Public,
    Private,
}

/// One declared key type, as in the config:
/// `[[keys]] name = "id_card", visibility = "private", format = "id_card"`
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct KeyType {
    pub name: String,
    pub visibility: Visibility,
    #[serde(default)]
    pub format: KeyFormat,
}

/// The cluster's declared key types (same at every domain), kept sorted by
/// name so that every domain iterates them in the same order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeyTypes {
    types: Vec<KeyType>,
}

/// Why a list of key types cannot be declared. Type names are configuration,
/// not personal data, so they are named.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyTypesError {
    #[error(
        "key type name {0:?} is not 1 to {MAX_TYPE_NAME_CHARS} characters of a-z, 0-9 and _ starting with a letter"
    )]
    BadName(String),
    #[error("key type {0} is declared more than once")]
    Duplicate(String),
    #[error("{count} key types are declared; the limit is {limit}")]
    TooMany { count: usize, limit: usize },
}

/// Why a record's key cannot be accepted. Never holds the value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidKey {
    /// Holds the type name when it is well-formed; a malformed name could be
    /// a value sent in the wrong place, so it is not echoed.
    #[error("no key type {0} is declared")]
    UnknownType(String),
    #[error("the record has {count} keys; the limit is {limit}")]
    TooManyKeys { count: usize, limit: usize },
    #[error("key {key_type} is empty")]
    Empty { key_type: String },
    #[error("key {key_type} is {bytes} bytes long; the limit is {limit}")]
    TooLong {
        key_type: String,
        bytes: usize,
        limit: usize,
    },
    #[error("key {key_type} contains a control character")]
    ControlCharacter { key_type: String },
    #[error("key {key_type} is not a valid identity number: it {reason}")]
    IdCard {
        key_type: String,
        reason: IdCardError,
    },
}

/// What is wrong with an identity number. Phrased to follow "it".
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum IdCardError {
    #[error("has {0} characters, not 18")]
    Length(usize),
    #[error("may hold only digits, and X last")]
    Character,
    #[error("has no valid region: the first digit must be 1 to 8")]
    Region,
    #[error("has no valid birth date: it must be a real date from 1900-01-01 to today")]
    BirthDate,
    #[error("has a wrong check digit")]
    CheckDigit,
}

/// Placeholder for an unknown type name that is not well-formed.
const MALFORMED_TYPE_NAME: &str = "(a malformed name)";

/// A key type's name as an error may show it: the name when it is
/// well-formed, else a placeholder (a malformed name could be a value
/// sent in the wrong place).
pub fn shown_type_name(name: &str) -> &str {
    if is_valid_type_name(name) {
        name
    } else {
        MALFORMED_TYPE_NAME
    }
}

fn is_valid_type_name(name: &str) -> bool {
    let mut chars = name.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    first.is_ascii_lowercase()
        && name.chars().count() <= MAX_TYPE_NAME_CHARS
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

impl KeyTypes {
    /// Checks names (1..=32 chars of [a-z0-9_], starting with a letter), no
    /// duplicates, at most 16 types.
    pub fn new(mut types: Vec<KeyType>) -> Result<Self, KeyTypesError> {
        if types.len() > MAX_KEY_TYPES {
            return Err(KeyTypesError::TooMany {
                count: types.len(),
                limit: MAX_KEY_TYPES,
            });
        }
        if let Some(bad) = types.iter().find(|t| !is_valid_type_name(&t.name)) {
            return Err(KeyTypesError::BadName(bad.name.clone()));
        }
        types.sort_by(|a, b| a.name.cmp(&b.name));
        if let Some(pair) = types.windows(2).find(|w| w[0].name == w[1].name) {
            return Err(KeyTypesError::Duplicate(pair[0].name.clone()));
        }
        Ok(KeyTypes { types })
    }

    pub fn get(&self, name: &str) -> Option<&KeyType> {
        self.types
            .binary_search_by(|t| t.name.as_str().cmp(name))
            .ok()
            .map(|i| &self.types[i])
    }

    pub fn is_empty(&self) -> bool {
        self.types.is_empty()
    }

    /// In name order.
    pub fn iter(&self) -> impl Iterator<Item = &KeyType> {
        self.types.iter()
    }

    /// A short digest (16 hex chars of SHA-256) of the canonical list (sorted
    /// by name, with visibility and format), so domains can refuse to join a
    /// cluster that declares a different list.
    pub fn fingerprint(&self) -> String {
        let mut hasher = Sha256::new();
        hasher.update(b"xarchive key types v1\n");
        for t in &self.types {
            let line = format!(
                "{}{SEP}{}{SEP}{}\n",
                t.name,
                visibility_name(t.visibility),
                format_name(t.format)
            );
            hasher.update(line.as_bytes());
        }
        let mut hex = hex::encode(hasher.finalize());
        hex.truncate(16);
        hex
    }

    /// Normalises and validates every key of a record: an unknown type is an
    /// error naming the type (type names are not personal data), an invalid
    /// value an error naming the type and what is wrong. Returns the
    /// normalised map. At most 16 keys per record.
    pub fn normalise_all(
        &self,
        keys: &BTreeMap<String, String>,
    ) -> Result<BTreeMap<String, String>, InvalidKey> {
        if keys.len() > MAX_KEYS_PER_RECORD {
            return Err(InvalidKey::TooManyKeys {
                count: keys.len(),
                limit: MAX_KEYS_PER_RECORD,
            });
        }
        keys.iter()
            .map(|(t, v)| Ok((t.clone(), self.normalise(t, v)?)))
            .collect()
    }

    /// One value of one type.
    pub fn normalise(&self, key_type: &str, value: &str) -> Result<String, InvalidKey> {
        let Some(t) = self.get(key_type) else {
            return Err(InvalidKey::UnknownType(
                shown_type_name(key_type).to_owned(),
            ));
        };
        normalise_value(t, value)
    }
}

fn visibility_name(v: Visibility) -> &'static str {
    match v {
        Visibility::Public => "public",
        Visibility::Private => "private",
    }
}

fn format_name(f: KeyFormat) -> &'static str {
    match f {
        KeyFormat::Text => "text",
        KeyFormat::IdCard => "id_card",
    }
}

fn normalise_value(t: &KeyType, value: &str) -> Result<String, InvalidKey> {
    let key_type = || t.name.clone();
    if value.len() > MAX_RAW_KEY_BYTES {
        return Err(InvalidKey::TooLong {
            key_type: key_type(),
            bytes: value.len(),
            limit: MAX_KEY_BYTES,
        });
    }
    let nfc: String = value.nfc().collect();
    let trimmed = nfc.trim();
    if trimmed.is_empty() {
        return Err(InvalidKey::Empty {
            key_type: key_type(),
        });
    }
    if trimmed.chars().any(char::is_control) {
        return Err(InvalidKey::ControlCharacter {
            key_type: key_type(),
        });
    }
    if trimmed.len() > MAX_KEY_BYTES {
        return Err(InvalidKey::TooLong {
            key_type: key_type(),
            bytes: trimmed.len(),
            limit: MAX_KEY_BYTES,
        });
    }
    match t.format {
        KeyFormat::Text => Ok(trimmed.to_owned()),
        KeyFormat::IdCard => normalise_id_card(trimmed).map_err(|reason| InvalidKey::IdCard {
            key_type: key_type(),
            reason,
        }),
    }
}

/// Full-width digits and X, as Chinese input methods type them, to ASCII.
fn half_width(c: char) -> char {
    match c {
        '\u{ff10}'..='\u{ff19}' => char::from(b'0' + (c as u32 - 0xff10) as u8),
        'Ｘ' | 'ｘ' => 'X',
        other => other,
    }
}

/// `s` is already NFC, trimmed, free of controls and short.
fn normalise_id_card(s: &str) -> Result<String, IdCardError> {
    let mut id: Vec<u8> = Vec::with_capacity(ID_CARD_LEN);
    let mut count = 0;
    let mut bad_char = false;
    for c in s.chars().map(half_width) {
        count += 1;
        match c {
            '0'..='9' | 'X' | 'x' => id.push(c.to_ascii_uppercase() as u8),
            _ => bad_char = true,
        }
    }
    if count != ID_CARD_LEN {
        return Err(IdCardError::Length(count));
    }
    // Only the last may be X.
    if bad_char || id[..ID_CARD_LEN - 1].contains(&b'X') {
        return Err(IdCardError::Character);
    }
    if !(b'1'..=b'8').contains(&id[0]) {
        return Err(IdCardError::Region);
    }
    check_birth_date(&id[6..14])?;
    if id[17] != check_character(&id[..17]) {
        return Err(IdCardError::CheckDigit);
    }
    // Only ASCII was pushed.
    String::from_utf8(id).map_err(|_| IdCardError::Character)
}

/// Value of ASCII digits (already checked to be digits).
fn digits_value(ds: &[u8]) -> u32 {
    ds.iter().fold(0, |n, d| n * 10 + u32::from(d - b'0'))
}

fn check_birth_date(yyyymmdd: &[u8]) -> Result<(), IdCardError> {
    let year = digits_value(&yyyymmdd[..4]) as i32;
    let month =
        Month::try_from(digits_value(&yyyymmdd[4..6]) as u8).map_err(|_| IdCardError::BirthDate)?;
    let day = digits_value(&yyyymmdd[6..8]) as u8;
    let date = Date::from_calendar_date(year, month, day).map_err(|_| IdCardError::BirthDate)?;
    let earliest =
        Date::from_calendar_date(1900, Month::January, 1).map_err(|_| IdCardError::BirthDate)?;
    if date < earliest || date > today_in_china() {
        return Err(IdCardError::BirthDate);
    }
    Ok(())
}

/// Numbers are issued in China: someone born this morning in Beijing has
/// tomorrow's date by UTC's reckoning for eight hours.
fn today_in_china() -> Date {
    let cst = UtcOffset::from_hms(8, 0, 0).unwrap_or(UtcOffset::UTC);
    OffsetDateTime::now_utc().to_offset(cst).date()
}

/// ISO 7064 MOD 11-2 check character of 17 ASCII digits.
fn check_character(first17: &[u8]) -> u8 {
    let sum: u32 = first17
        .iter()
        .zip(ID_CARD_WEIGHTS)
        .map(|(d, w)| u32::from(d - b'0') * w)
        .sum();
    ID_CARD_CHECK[(sum % 11) as usize]
}

/// A valid identity number for region `region` (6 digits), birth date and
/// sequence (3 digits), with its check digit. For tests and sample data.
///
/// # Panics
/// If `region` is not 6 digits, `year` not 4, or `sequence` above 999:
/// the result would not be 18 characters.
pub fn id_card_number(region: u32, year: i32, month: u8, day: u8, sequence: u16) -> String {
    assert!(region <= 999_999, "region must be at most 6 digits");
    assert!((0..=9999).contains(&year), "year must be 4 digits");
    assert!(month <= 99 && day <= 99, "month and day must be 2 digits");
    assert!(sequence <= 999, "sequence must be at most 3 digits");
    let mut id = format!("{region:06}{year:04}{month:02}{day:02}{sequence:03}");
    let check = check_character(id.as_bytes());
    id.push(char::from(check));
    id
}

type HmacSha256 = Hmac<Sha256>;

/// HMAC-SHA-256 of `message` under `key`.
fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    let mut mac = match HmacSha256::new_from_slice(key) {
        Ok(mac) => mac,
        // HMAC hashes or pads keys of any length; this cannot fail.
        Err(_) => unreachable!("HMAC accepts keys of any length"),
    };
    mac.update(message);
    mac.finalize().into_bytes().into()
}

/// The bytes every digest of a key is made from: `k␟{type}␟{value}`.
fn key_bytes(key_type: &str, normalised: &str) -> Vec<u8> {
    format!("k{SEP}{key_type}{SEP}{normalised}").into_bytes()
}

/// What goes into a filter or the store index for one key: never the clear
/// value.
#[derive(Clone)]
pub struct KeyHasher {
    filter_key: [u8; 32],
    audit_key: [u8; 32],
    has_secret: bool,
}

impl KeyHasher {
    /// `cluster_secret`: the cluster's shared secret, or None on a domain
    /// without one. Without a secret a fixed, publicly known derivation key
    /// (`"xarchive public derivation key v1 (not secret)"`) is used: private
    /// keys are then protected only by access control, since anyone holding
    /// the filter can test guessed values against it.
    pub fn new(cluster_secret: Option<&str>) -> Self {
        let secret = cluster_secret.map_or(PUBLIC_DERIVATION_KEY, str::as_bytes);
        KeyHasher {
            filter_key: hmac_sha256(secret, FILTER_KEY_LABEL),
            audit_key: hmac_sha256(secret, AUDIT_KEY_LABEL),
            has_secret: cluster_secret.is_some(),
        }
    }

    /// The element a filter holds for a key. For a public type, the bytes
    /// `"k\x1f{type}\x1f{value}"`, so the browser page can test public keys
    /// with the plain filter hashing. For a private type, HMAC-SHA-256 over
    /// the same bytes under
    /// `filter_key = HMAC-SHA-256(secret, "xarchive private key filter v1")`,
    /// 32 bytes.
    pub fn filter_element(&self, key_type: &KeyType, normalised: &str) -> Vec<u8> {
        let bytes = key_bytes(&key_type.name, normalised);
        match key_type.visibility {
            Visibility::Public => bytes,
            Visibility::Private => hmac_sha256(&self.filter_key, &bytes).to_vec(),
        }
    }

    /// Names the filter key without revealing it (the first 16 hex
    /// characters of HMAC-SHA-256 under it of a fixed label): two domains
    /// build key filters the other can read only if these are equal.
    pub fn filter_key_id(&self) -> String {
        hex::encode(&hmac_sha256(&self.filter_key, b"xarchive key filter id")[..8])
    }

    /// The store index's key for (type, value): SHA-256 over
    /// `"k\x1f{type}\x1f{value}"`, 32 bytes. Independent of the secret so
    /// that rotating the secret does not rewrite the store.
    pub fn index_digest(key_type: &str, normalised: &str) -> [u8; 32] {
        Sha256::digest(key_bytes(key_type, normalised)).into()
    }

    /// For the audit log: HMAC-SHA-256 over `"k\x1f{type}\x1f{value}"` under
    /// `audit_key = HMAC-SHA-256(secret, "xarchive audit v1")`, the first 32
    /// hex characters.
    pub fn audit_digest(&self, key_type: &str, normalised: &str) -> String {
        let mac = hmac_sha256(&self.audit_key, &key_bytes(key_type, normalised));
        hex::encode(&mac[..16])
    }
}

/// The declared key types and the hashing of their values: what the
/// domain's key filter is built with.
#[derive(Clone, Debug)]
pub struct Keying {
    pub types: KeyTypes,
    pub hasher: KeyHasher,
}

impl Keying {
    /// The filter elements of a record's keys (normalised); keys of a type
    /// not declared here are left out, as no search can name them.
    pub fn elements<'a>(
        &'a self,
        keys: &'a BTreeMap<String, String>,
    ) -> impl Iterator<Item = Vec<u8>> + 'a {
        keys.iter()
            .filter_map(|(name, value)| self.element(name, value))
    }

    /// The filter element of one key, if its type is declared.
    pub fn element(&self, key_type: &str, value: &str) -> Option<Vec<u8>> {
        let key_type = self.types.get(key_type)?;
        Some(self.hasher.filter_element(key_type, value))
    }
}

/// By hand, so the derived keys are never printed.
impl fmt::Debug for KeyHasher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyHasher")
            .field("has_secret", &self.has_secret)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn id_type() -> KeyType {
        KeyType {
            name: "id_card".into(),
            visibility: Visibility::Private,
            format: KeyFormat::IdCard,
        }
    }

    fn name_type() -> KeyType {
        KeyType {
            name: "name_birth".into(),
            visibility: Visibility::Public,
            format: KeyFormat::Text,
        }
    }

    fn types() -> KeyTypes {
        KeyTypes::new(vec![id_type(), name_type()]).expect("valid key types")
    }

    fn id(value: &str) -> Result<String, InvalidKey> {
        types().normalise("id_card", value)
    }

    fn id_reason(value: &str) -> Option<IdCardError> {
        match id(value) {
            Err(InvalidKey::IdCard { reason, .. }) => Some(reason),
            _ => None,
        }
    }

    #[test]
    fn known_valid_numbers_are_accepted() {
        assert_eq!(
            id("11010519491231002X").as_deref(),
            Ok("11010519491231002X")
        );
        // The brief's 440524188001010014 has a correct check digit but a
        // birth date in 1880, before 1900; this is the same number born in
        // 1980, with its computed check digit.
        assert_eq!(
            id("440524198001010013").as_deref(),
            Ok("440524198001010013")
        );
        assert_eq!(
            id_card_number(440524, 1980, 1, 1, 1),
            "440524198001010013".to_owned()
        );
    }

    #[test]
    fn a_birth_date_before_1900_is_refused() {
        assert_eq!(
            id_reason("440524188001010014"),
            Some(IdCardError::BirthDate)
        );
    }

    #[test]
    fn a_wrong_check_digit_is_refused() {
        assert_eq!(
            id_reason("110105194912310021"),
            Some(IdCardError::CheckDigit)
        );
    }

    #[test]
    fn seventeen_characters_are_refused() {
        assert_eq!(
            id_reason("11010519491231002"),
            Some(IdCardError::Length(17))
        );
    }

    #[test]
    fn letters_are_refused() {
        assert_eq!(
            id_reason("1101051949123100AX"),
            Some(IdCardError::Character)
        );
        assert_eq!(
            id_reason("X10105194912310021"),
            Some(IdCardError::Character)
        );
    }

    #[test]
    fn inner_spaces_are_refused() {
        assert_eq!(
            id_reason("110105 1949123100X"),
            Some(IdCardError::Character)
        );
    }

    #[test]
    fn february_30th_is_refused() {
        let mut n = id_card_number(110105, 1990, 2, 28, 1);
        n.replace_range(12..14, "30");
        let check = check_character(&n.as_bytes()[..17]);
        n.replace_range(17..18, &char::from(check).to_string());
        assert_eq!(id_reason(&n), Some(IdCardError::BirthDate));
    }

    #[test]
    fn a_future_birth_date_is_refused() {
        let next_year = today_in_china().year() + 1;
        let n = id_card_number(110105, next_year, 1, 1, 1);
        assert_eq!(id_reason(&n), Some(IdCardError::BirthDate));
    }

    #[test]
    fn a_region_starting_with_0_or_9_is_refused() {
        assert_eq!(
            id_reason(&id_card_number(10105, 1990, 1, 1, 1)),
            Some(IdCardError::Region)
        );
        assert_eq!(
            id_reason(&id_card_number(910105, 1990, 1, 1, 1)),
            Some(IdCardError::Region)
        );
        assert_eq!(
            id_reason(&id_card_number(0, 1990, 1, 1, 1)),
            Some(IdCardError::Region)
        );
    }

    #[test]
    fn a_lower_case_check_x_is_upper_cased() {
        assert_eq!(
            id("11010519491231002x").as_deref(),
            Ok("11010519491231002X")
        );
    }

    #[test]
    fn full_width_input_normalises_to_ascii() {
        let full: String = "11010519491231002"
            .chars()
            .map(|c| char::from_u32(0xff10 + (c as u32 - '0' as u32)).unwrap_or(c))
            .chain(['ｘ'])
            .collect();
        assert_eq!(id(&full).as_deref(), Ok("11010519491231002X"));
        assert_eq!(
            id("11010519491231002Ｘ").as_deref(),
            Ok("11010519491231002X")
        );
    }

    #[test]
    fn surrounding_whitespace_is_trimmed() {
        assert_eq!(
            id("  11010519491231002X \u{3000}\n").as_deref(),
            Ok("11010519491231002X")
        );
        assert_eq!(
            types()
                .normalise("name_birth", " 张三|1990-03-07  ")
                .as_deref(),
            Ok("张三|1990-03-07")
        );
    }

    #[test]
    fn composed_and_decomposed_forms_normalise_alike() {
        let t = types();
        let a = t.normalise("name_birth", "Jose\u{301}");
        let b = t.normalise("name_birth", "Jos\u{e9}");
        assert_eq!(a, b);
        assert_eq!(a.as_deref(), Ok("Jos\u{e9}"));
    }

    #[test]
    fn empty_control_and_long_values_are_refused() {
        let t = types();
        assert!(matches!(
            t.normalise("name_birth", " \u{3000} "),
            Err(InvalidKey::Empty { .. })
        ));
        assert!(matches!(
            t.normalise("name_birth", "a\nb"),
            Err(InvalidKey::ControlCharacter { .. })
        ));
        assert!(matches!(
            t.normalise("name_birth", &"a".repeat(257)),
            Err(InvalidKey::TooLong { bytes: 257, .. })
        ));
        assert!(t.normalise("name_birth", &"a".repeat(256)).is_ok());
        assert!(matches!(
            t.normalise("name_birth", &"a".repeat(MAX_RAW_KEY_BYTES + 1)),
            Err(InvalidKey::TooLong { .. })
        ));
    }

    #[test]
    fn unknown_types_are_named_unless_malformed() {
        let t = types();
        assert_eq!(
            t.normalise("passport", "E12345678"),
            Err(InvalidKey::UnknownType("passport".into()))
        );
        let e = t
            .normalise("11010519491231002X", "id_card")
            .expect_err("unknown type");
        assert!(!e.to_string().contains("110105"));
    }

    #[test]
    fn normalise_all_normalises_every_key_and_limits_their_number() {
        let t = types();
        let keys = BTreeMap::from([
            ("id_card".to_owned(), "11010519491231002x ".to_owned()),
            ("name_birth".to_owned(), "张三|1990-03-07".to_owned()),
        ]);
        let out = t.normalise_all(&keys).expect("valid keys");
        assert_eq!(out["id_card"], "11010519491231002X");
        assert_eq!(out["name_birth"], "张三|1990-03-07");

        let bad = BTreeMap::from([("other".to_owned(), "x".to_owned())]);
        assert_eq!(
            t.normalise_all(&bad),
            Err(InvalidKey::UnknownType("other".into()))
        );

        let many: BTreeMap<String, String> =
            (0..17).map(|i| (format!("k{i}"), "v".to_owned())).collect();
        assert_eq!(
            t.normalise_all(&many),
            Err(InvalidKey::TooManyKeys {
                count: 17,
                limit: 16
            })
        );
    }

    /// Every run of 6 or more digits in `s`.
    fn digit_runs(s: &str) -> Vec<String> {
        let mut runs = Vec::new();
        let chars: Vec<char> = s.chars().collect();
        for start in 0..chars.len() {
            for end in start + 6..=chars.len() {
                let run: String = chars[start..end].iter().collect();
                if run.chars().all(|c| c.is_ascii_digit()) {
                    runs.push(run);
                }
            }
        }
        runs
    }

    #[test]
    fn errors_never_contain_the_value() {
        let future = id_card_number(110105, today_in_china().year() + 1, 1, 1, 1);
        let values = [
            "110105194912310021",
            "11010519491231002",
            "1101051949123100AX",
            "110105 1949123100X",
            "440524188001010014",
            "910105199001010011",
            "110105199002300011",
            future.as_str(),
            "1101051949123100211",
            "110105\n19491231002X",
            "",
        ];
        for v in values {
            let e = id(v).expect_err("invalid value");
            let shown = [format!("{e}"), format!("{e:?}")];
            for s in &shown {
                if !v.is_empty() {
                    assert!(!s.contains(v), "{s} shows the value");
                }
                for run in digit_runs(v) {
                    assert!(!s.contains(&run), "{s} shows part of the value");
                }
            }
        }
        let long = "1234567".repeat(40);
        let e = types()
            .normalise("name_birth", &long)
            .expect_err("too long");
        assert!(!format!("{e}{e:?}").contains("1234567"));
    }

    #[test]
    fn filter_element_of_a_private_key_depends_on_the_secret() {
        let a = KeyHasher::new(Some("secret a"));
        let a2 = KeyHasher::new(Some("secret a"));
        let b = KeyHasher::new(Some("secret b"));
        let none = KeyHasher::new(None);
        let v = "11010519491231002X";
        let ea = a.filter_element(&id_type(), v);
        assert_eq!(ea.len(), 32);
        assert_eq!(ea, a2.filter_element(&id_type(), v));
        assert_ne!(ea, b.filter_element(&id_type(), v));
        assert_ne!(ea, none.filter_element(&id_type(), v));
        assert_ne!(ea, a.filter_element(&id_type(), "440524198001010013"));
    }

    #[test]
    fn filter_element_of_a_public_key_is_the_documented_bytes() {
        let h = KeyHasher::new(Some("secret"));
        assert_eq!(
            h.filter_element(&name_type(), "张三|1990-03-07"),
            "k\x1fname_birth\x1f张三|1990-03-07".as_bytes()
        );
    }

    #[test]
    fn index_digest_is_sha256_of_the_key_bytes() {
        let d = KeyHasher::index_digest("id_card", "11010519491231002X");
        let expected: [u8; 32] = Sha256::digest(b"k\x1fid_card\x1f11010519491231002X").into();
        assert_eq!(d, expected);
        assert_ne!(d, KeyHasher::index_digest("id_card", "440524198001010013"));
    }

    #[test]
    fn audit_digest_is_32_hex_characters_under_the_secret() {
        let a = KeyHasher::new(Some("secret a"));
        let b = KeyHasher::new(Some("secret b"));
        let da = a.audit_digest("id_card", "11010519491231002X");
        assert_eq!(da.len(), 32);
        assert!(da.chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(da, a.audit_digest("id_card", "11010519491231002X"));
        assert_ne!(da, b.audit_digest("id_card", "11010519491231002X"));
    }

    #[test]
    fn debug_of_a_key_hasher_shows_no_keys() {
        let h = KeyHasher::new(Some("secret"));
        let shown = format!("{h:?}");
        assert_eq!(shown, "KeyHasher { has_secret: true, .. }");
    }

    #[test]
    fn duplicate_names_are_refused() {
        assert_eq!(
            KeyTypes::new(vec![id_type(), name_type(), id_type()]),
            Err(KeyTypesError::Duplicate("id_card".into()))
        );
    }

    #[test]
    fn bad_names_are_refused() {
        for name in [
            "",
            "1abc",
            "_abc",
            "Id",
            "id-card",
            "id card",
            "身份证",
            &"a".repeat(33),
        ] {
            let t = KeyType {
                name: name.to_owned(),
                ..name_type()
            };
            assert_eq!(
                KeyTypes::new(vec![t]),
                Err(KeyTypesError::BadName(name.to_owned())),
                "{name:?}"
            );
        }
        let ok = KeyType {
            name: format!("a{}", "_9".repeat(15) + "z"),
            ..name_type()
        };
        assert_eq!(ok.name.len(), 32);
        assert!(KeyTypes::new(vec![ok]).is_ok());
    }

    #[test]
    fn more_than_16_types_are_refused() {
        let many = (0..17)
            .map(|i| KeyType {
                name: format!("k{i}"),
                ..name_type()
            })
            .collect();
        assert_eq!(
            KeyTypes::new(many),
            Err(KeyTypesError::TooMany {
                count: 17,
                limit: 16
            })
        );
    }

    #[test]
    fn fingerprint_ignores_declaration_order_but_not_visibility() {
        let ab = KeyTypes::new(vec![id_type(), name_type()]).expect("valid");
        let ba = KeyTypes::new(vec![name_type(), id_type()]).expect("valid");
        assert_eq!(ab.fingerprint(), ba.fingerprint());
        assert_eq!(ab.fingerprint().len(), 16);
        assert_eq!(ab, ba);

        let public_id = KeyType {
            visibility: Visibility::Public,
            ..id_type()
        };
        let changed = KeyTypes::new(vec![public_id, name_type()]).expect("valid");
        assert_ne!(ab.fingerprint(), changed.fingerprint());

        let text_id = KeyType {
            format: KeyFormat::Text,
            ..id_type()
        };
        let changed = KeyTypes::new(vec![text_id, name_type()]).expect("valid");
        assert_ne!(ab.fingerprint(), changed.fingerprint());
        assert_ne!(ab.fingerprint(), KeyTypes::default().fingerprint());
    }

    #[test]
    fn key_types_read_from_config_toml() {
        #[derive(Deserialize)]
        struct Config {
            keys: Vec<KeyType>,
        }
        let c: Config = toml::from_str(
            r#"
            [[keys]]
            name = "id_card"
            visibility = "private"
            format = "id_card"

            [[keys]]
            name = "name_birth"
            visibility = "public"
            "#,
        )
        .expect("valid config");
        assert_eq!(c.keys, vec![id_type(), name_type()]);
        assert!(toml::from_str::<Config>(
            "[[keys]]\nname = \"a\"\nvisibility = \"public\"\nextra = 1"
        )
        .is_err());
    }

    fn valid_birth_date() -> impl Strategy<Value = (i32, u8, u8)> {
        let last_year = today_in_china().year() - 1;
        (1900..=last_year, 1u8..=12, 1u8..=31).prop_filter_map("a real date", |(y, m, d)| {
            let month = Month::try_from(m).ok()?;
            Date::from_calendar_date(y, month, d).ok()?;
            Some((y, m, d))
        })
    }

    fn valid_id() -> impl Strategy<Value = String> {
        (100_000u32..=899_999, valid_birth_date(), 0u16..=999)
            .prop_map(|(r, (y, m, d), s)| id_card_number(r, y, m, d, s))
    }

    proptest! {
        #[test]
        fn generated_numbers_are_valid(n in valid_id()) {
            prop_assert_eq!(id(&n), Ok(n.clone()));
        }

        #[test]
        fn every_single_character_substitution_is_caught(
            n in valid_id(),
            at in 0usize..18,
            to in prop::sample::select(b"0123456789X".to_vec()),
        ) {
            let mut bytes = n.clone().into_bytes();
            prop_assume!(bytes[at] != to);
            bytes[at] = to;
            let changed = String::from_utf8(bytes).expect("ASCII");
            prop_assert!(id(&changed).is_err());
        }

        #[test]
        fn text_normalisation_is_idempotent(s in any::<String>()) {
            let t = types();
            if let Ok(once) = t.normalise("name_birth", &s) {
                prop_assert_eq!(t.normalise("name_birth", &once), Ok(once.clone()));
            }
        }

        #[test]
        fn combining_text_normalisation_is_idempotent(
            s in "[ \u{3000}\t]{0,2}[a-eA-E\u{300}-\u{36f}\u{1100}-\u{1175}\u{ac00}-\u{ac10} ]{0,12}[ \u{3000}]{0,2}"
        ) {
            let t = types();
            if let Ok(once) = t.normalise("name_birth", &s) {
                prop_assert_eq!(t.normalise("name_birth", &once), Ok(once.clone()));
            }
        }

        #[test]
        fn id_card_normalisation_is_idempotent(
            n in valid_id(),
            full_width in any::<bool>(),
            pad in "[ \u{3000}]{0,3}",
        ) {
            let typed: String = if full_width {
                n.chars()
                    .map(|c| match c {
                        '0'..='9' => char::from_u32(0xff10 + (c as u32 - '0' as u32)).unwrap_or(c),
                        _ => 'ｘ',
                    })
                    .collect()
            } else {
                n.to_lowercase()
            };
            let input = format!("{pad}{typed}{pad}");
            let once = id(&input);
            prop_assert_eq!(&once, &Ok(n.clone()));
            prop_assert_eq!(id(&n), Ok(n));
        }
    }
}
