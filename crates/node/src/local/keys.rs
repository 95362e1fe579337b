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
//! 3. a first-generation number of GB 11643-1989 (15 digits: 6 of region,
//!    `YYMMDD` born in the 1900s, 3 of sequence; no check character), as
//!    old records and old cards carry it, becomes its 18-character form:
//!    `19` inserted before the year and the check character of rule 7
//!    appended, so that both forms of one person's number are one value;
//! 4. exactly 18 characters after that ([`IdCardError::Length`]), 17 ASCII
//!    digits then a digit or `X`; anything else, inner spaces included, is
//!    [`IdCardError::Character`];
//! 5. region (first 6 digits): the first digit is 1–8, province codes
//!    11..=82 ([`IdCardError::Region`]);
//! 6. birth date (characters 7–14, `YYYYMMDD`): a real date, not before
//!    1900-01-01 and not after today in China Standard Time (UTC+8)
//!    ([`IdCardError::BirthDate`]);
//! 7. check character (ISO 7064 MOD 11-2): with weights
//!    `7 9 10 5 8 4 2 1 6 3 7 9 10 5 8 4 2` over the first 17 digits,
//!    `"10X98765432"[sum % 11]` ([`IdCardError::CheckDigit`]).
//!
//! [`KeyFormat::NameBirth`], a name and a birth date, `name|YYYY-MM-DD`:
//! 1. Unicode NFKC (full-width letters, digits, punctuation and `｜` become
//!    ASCII; CJK compatibility ideographs become the unified ones);
//! 2. exactly one `|` ([`NameBirthError::Separator`]);
//! 3. the name: trimmed, each run of white space one space, and the
//!    look-alikes of the middle dot that separates the parts of a
//!    transliterated or minority name (`・` U+30FB, `•` U+2022, `‧` U+2027,
//!    `∙` U+2219, `⋅` U+22C5) made `·` (U+00B7); not empty
//!    ([`NameBirthError::EmptyName`]);
//! 4. the date, white space removed, in one of the usual spellings:
//!    `1950-11-25`, `19501125`, `1950.11.25`, `1950/11/25`,
//!    `1950年11月25日` (month and day of one or two digits except in the
//!    8-digit form; the final `日` may be left out)
//!    ([`NameBirthError::DateForm`]), a real date not after today in China
//!    ([`NameBirthError::BirthDate`]), written `YYYY-MM-DD`.
//!
//! Normalisation is idempotent: a normalised value normalises to itself;
//! every spelling a format accepts of one value gives that one value, and
//! so one digest everywhere (index, key filter, audit log).

use std::collections::BTreeMap;
use std::fmt;

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::borrow::Cow;
use time::{Date, Month, OffsetDateTime, UtcOffset};
use unicode_normalization::{is_nfc_quick, is_nfkc_quick, IsNormalized, UnicodeNormalization};

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
    /// The resident identity number: 18 characters (GB 11643-1999), or the
    /// 15 digits of the first generation (GB 11643-1989), made 18.
    IdCard,
    /// A name and a birth date, `name|YYYY-MM-DD`, the date in any of its
    /// usual spellings.
    NameBirth,
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
    #[error("key {key_type} is not a valid name and birth date: it {reason}")]
    NameBirth {
        key_type: String,
        reason: NameBirthError,
    },
}

/// What is wrong with an identity number. Phrased to follow "it".
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum IdCardError {
    #[error("has {0} characters, not 18 (or 15 for a first-generation number)")]
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

/// What is wrong with a name and birth date. Phrased to follow "it".
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NameBirthError {
    #[error("must be a name and a birth date with one | between them, as in 张三|1950-11-25")]
    Separator,
    #[error("has no name before the |")]
    EmptyName,
    #[error(
        "has no birth date written as 1950-11-25, 19501125, 1950.11.25, 1950/11/25 or 1950年11月25日"
    )]
    DateForm,
    #[error("has no valid birth date: it must be a real date, not after today")]
    BirthDate,
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
        KeyFormat::NameBirth => "name_birth",
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
    let nfc = nfc(value);
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
    let normalised = match t.format {
        KeyFormat::Text => trimmed.to_owned(),
        KeyFormat::IdCard => normalise_id_card(trimmed).map_err(|reason| InvalidKey::IdCard {
            key_type: key_type(),
            reason,
        })?,
        KeyFormat::NameBirth => {
            normalise_name_birth(trimmed).map_err(|reason| InvalidKey::NameBirth {
                key_type: key_type(),
                reason,
            })?
        }
    };
    // NFKC may lengthen a value (one ligature, many letters): checked again
    // so that what is stored normalises to itself.
    if normalised.len() > MAX_KEY_BYTES {
        return Err(InvalidKey::TooLong {
            key_type: key_type(),
            bytes: normalised.len(),
            limit: MAX_KEY_BYTES,
        });
    }
    Ok(normalised)
}

/// `s` in NFC, copied only if it is not already (an identity number, a
/// name typed by an input method, nearly always is): every key of every
/// record imported goes through here.
fn nfc(s: &str) -> Cow<'_, str> {
    match is_nfc_quick(s.chars()) {
        IsNormalized::Yes => Cow::Borrowed(s),
        _ => Cow::Owned(s.nfc().collect()),
    }
}

/// `s` in NFKC, copied only if it is not already.
fn nfkc(s: &str) -> Cow<'_, str> {
    match is_nfkc_quick(s.chars()) {
        IsNormalized::Yes => Cow::Borrowed(s),
        _ => Cow::Owned(s.nfkc().collect()),
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
    if count == FIRST_GENERATION_LEN {
        // No check character in the first generation: digits only.
        if bad_char || id.contains(&b'X') {
            return Err(IdCardError::Character);
        }
        id = second_generation(&id);
        count = ID_CARD_LEN;
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

/// Length of a first-generation number (GB 11643-1989).
const FIRST_GENERATION_LEN: usize = 15;

/// The 18 characters of a first-generation number's 15 ASCII digits: the
/// century `19` before its two-digit year (every first-generation number
/// was issued to someone born in the 1900s) and the check character.
fn second_generation(first: &[u8]) -> Vec<u8> {
    let mut id = Vec::with_capacity(ID_CARD_LEN);
    id.extend_from_slice(&first[..6]);
    id.extend_from_slice(b"19");
    id.extend_from_slice(&first[6..]);
    let check = check_character(&id);
    id.push(check);
    id
}

/// The middle dot's look-alikes that people type between the parts of a
/// name (阿沛·阿旺晋美, 约翰·史密斯): katakana middle dot (what Japanese
/// and some Chinese input methods give; NFKC makes the half-width one
/// this), bullet, hyphenation point, bullet operator, dot operator.
const MIDDLE_DOT_LOOK_ALIKES: [char; 5] =
    ['\u{30fb}', '\u{2022}', '\u{2027}', '\u{2219}', '\u{22c5}'];

/// `s` is already NFC, trimmed, free of controls and short.
fn normalise_name_birth(s: &str) -> Result<String, NameBirthError> {
    let nfkc = nfkc(s);
    let Some((name, date)) = nfkc.split_once('|') else {
        return Err(NameBirthError::Separator);
    };
    if date.contains('|') {
        return Err(NameBirthError::Separator);
    }
    let mut out = String::with_capacity(nfkc.len());
    for (i, word) in name.split_whitespace().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.extend(word.chars().map(|c| {
            if MIDDLE_DOT_LOOK_ALIKES.contains(&c) {
                '·'
            } else {
                c
            }
        }));
    }
    if out.is_empty() {
        return Err(NameBirthError::EmptyName);
    }
    let date = parse_birth_date(date)?;
    out.push('|');
    out.push_str(&format!(
        "{:04}-{:02}-{:02}",
        date.year(),
        u8::from(date.month()),
        date.day()
    ));
    Ok(out)
}

/// A date in one of the spellings of [`KeyFormat::NameBirth`], after NFKC.
/// By hand rather than with `time`'s format descriptions: there are five
/// fixed spellings, one with CJK separators and an optional last one, and
/// one function reads them all plainly.
fn parse_birth_date(s: &str) -> Result<Date, NameBirthError> {
    let compact: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    let (year, month, day) = if compact.len() == 8 && compact.bytes().all(|b| b.is_ascii_digit()) {
        let b = compact.as_bytes();
        (&b[..4], &b[4..6], &b[6..])
    } else if let Some((y, rest)) = compact.split_once('年') {
        let (m, d) = rest.split_once('月').ok_or(NameBirthError::DateForm)?;
        let d = d.strip_suffix('日').unwrap_or(d);
        (y.as_bytes(), m.as_bytes(), d.as_bytes())
    } else {
        let sep = compact
            .chars()
            .find(|c| matches!(c, '-' | '.' | '/'))
            .ok_or(NameBirthError::DateForm)?;
        let mut parts = compact.split(sep);
        match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some(y), Some(m), Some(d), None) => (y.as_bytes(), m.as_bytes(), d.as_bytes()),
            _ => return Err(NameBirthError::DateForm),
        }
    };
    let digits = |part: &[u8], lengths: std::ops::RangeInclusive<usize>| {
        if lengths.contains(&part.len()) && part.iter().all(u8::is_ascii_digit) {
            Ok(digits_value(part))
        } else {
            Err(NameBirthError::DateForm)
        }
    };
    let year = digits(year, 4..=4)? as i32;
    let month = digits(month, 1..=2)? as u8;
    let day = digits(day, 1..=2)? as u8;
    let month = Month::try_from(month).map_err(|_| NameBirthError::BirthDate)?;
    let date = Date::from_calendar_date(year, month, day).map_err(|_| NameBirthError::BirthDate)?;
    if date > today_in_china() {
        return Err(NameBirthError::BirthDate);
    }
    Ok(date)
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
    use std::collections::BTreeSet;

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

    /// A name and birth date type, as the default configuration declares
    /// `name_birth` (here `name_type` plays a text key of that name).
    fn person_type() -> KeyType {
        KeyType {
            name: "person".into(),
            visibility: Visibility::Private,
            format: KeyFormat::NameBirth,
        }
    }

    fn types() -> KeyTypes {
        KeyTypes::new(vec![id_type(), name_type(), person_type()]).expect("valid key types")
    }

    fn person(value: &str) -> Result<String, InvalidKey> {
        types().normalise("person", value)
    }

    fn person_reason(value: &str) -> Option<NameBirthError> {
        match person(value) {
            Err(InvalidKey::NameBirth { reason, .. }) => Some(reason),
            _ => None,
        }
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
    fn a_fifteen_digit_first_generation_number_becomes_its_eighteen_character_form() {
        assert_eq!(id("110105491231002").as_deref(), Ok("11010519491231002X"));
        assert_eq!(id("440524800101001").as_deref(), Ok("440524198001010013"));
        assert_eq!(
            id(" １１０１０５４９１２３１００２\u{3000}").as_deref(),
            Ok("11010519491231002X")
        );
    }

    #[test]
    fn a_fifteen_digit_number_is_checked_as_its_eighteen_character_form_would_be() {
        assert_eq!(id_reason("11010549123100X"), Some(IdCardError::Character));
        assert_eq!(id_reason("11010549123 002"), Some(IdCardError::Character));
        assert_eq!(id_reason("010105491231002"), Some(IdCardError::Region));
        assert_eq!(id_reason("110105490230002"), Some(IdCardError::BirthDate));
        assert_eq!(id_reason("110105491301002"), Some(IdCardError::BirthDate));
        assert_eq!(id_reason("1101054912310021"), Some(IdCardError::Length(16)));
        assert_eq!(id_reason("11010549123100"), Some(IdCardError::Length(14)));
    }

    #[test]
    fn every_usual_spelling_of_a_birth_date_gives_one_value() {
        for typed in [
            "张三|1950-11-25",
            "张三|19501125",
            "张三|1950.11.25",
            "张三|1950/11/25",
            "张三|1950年11月25日",
            "张三|1950年11月25",
            "张三|１９５０年１１月２５日",
            "张三｜１９５０－１１－２５",
            "张三|１９５０．１１．２５",
            "张三|1950／11／25",
            "  张三 | 1950 年 11 月 25 日 ",
            "张三|1950 11 25",
        ] {
            assert_eq!(person(typed).as_deref(), Ok("张三|1950-11-25"), "{typed}");
        }
        for typed in [
            "李四|1950-1-5",
            "李四|1950.01.5",
            "李四|1950年1月5日",
            "李四|19500105",
        ] {
            assert_eq!(person(typed).as_deref(), Ok("李四|1950-01-05"), "{typed}");
        }
    }

    #[test]
    fn a_name_is_trimmed_its_spaces_collapsed_and_its_middle_dots_made_one() {
        assert_eq!(
            person(" John \u{3000}  Smith |1950-11-25").as_deref(),
            Ok("John Smith|1950-11-25")
        );
        for dot in ['·', '・', '･', '•', '‧', '∙', '⋅'] {
            assert_eq!(
                person(&format!("阿沛{dot}阿旺晋美|1910-02-01")).as_deref(),
                Ok("阿沛·阿旺晋美|1910-02-01"),
                "{dot}"
            );
        }
        // Full-width letters, as an input method in full-width mode types them.
        assert_eq!(
            person("Ｊｏｈｎ|1950-11-25").as_deref(),
            Ok("John|1950-11-25")
        );
    }

    #[test]
    fn a_name_and_birth_date_the_format_cannot_read_is_refused_saying_why() {
        use NameBirthError::*;
        for (typed, why) in [
            ("张三 1950-11-25", Separator),
            ("张三|1950-11-25|x", Separator),
            (" |1950-11-25", EmptyName),
            ("张三|", DateForm),
            ("张三|50-11-25", DateForm),
            ("张三|1950-11", DateForm),
            ("张三|1950-11/25", DateForm),
            ("张三|1950年11-25", DateForm),
            ("张三|25.11.1950", DateForm),
            ("张三|1950-111-25", DateForm),
            ("张三|195011250", DateForm),
            ("张三|一九五〇年十一月", DateForm),
            ("张三|1950-02-30", BirthDate),
            ("张三|1950-13-01", BirthDate),
            ("张三|1950-00-10", BirthDate),
        ] {
            assert_eq!(person_reason(typed), Some(why), "{typed}");
        }
        let next_year = today_in_china().year() + 1;
        assert_eq!(
            person_reason(&format!("张三|{next_year}-01-01")),
            Some(BirthDate)
        );
    }

    #[test]
    fn errors_about_a_name_and_birth_date_never_contain_the_value() {
        for typed in [
            "王小明 1962-11-25",
            "王小明|1962-11-25|",
            "王小明|1962-02-30",
            "王小明|1962-11",
            "王小明|99999999",
        ] {
            let e = person(typed).expect_err("invalid value");
            let shown = format!("{e} {e:?}");
            assert!(!shown.contains("王小明"), "{shown}");
            assert!(!shown.contains("1962-"), "{shown}");
            assert!(!shown.contains("9999"), "{shown}");
        }
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
            "110105490230002",
            "11010549123100X",
            "1101054912310021",
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

    /// A valid first-generation number (born in the 1900s) and its
    /// 18-character form.
    fn valid_first_generation_id() -> impl Strategy<Value = (String, String)> {
        (100_000u32..=899_999, valid_birth_date(), 0u16..=999)
            .prop_filter("born in the 1900s", |(_, (y, _, _), _)| *y < 2000)
            .prop_map(|(r, (y, m, d), s)| {
                (
                    format!("{r:06}{:02}{m:02}{d:02}{s:03}", y % 100),
                    id_card_number(r, y, m, d, s),
                )
            })
    }

    /// `s` with its ASCII digits, and X, made full-width.
    fn full_width(s: &str) -> String {
        s.chars()
            .map(|c| match c {
                '0'..='9' => char::from_u32(0xff10 + (c as u32 - '0' as u32)).unwrap_or(c),
                'X' => 'Ｘ',
                _ => c,
            })
            .collect()
    }

    /// A name as people write one: Chinese characters, perhaps two parts
    /// joined by a middle dot or one of its look-alikes.
    fn name_parts() -> impl Strategy<Value = (String, Option<(char, String)>)> {
        (
            "[\u{4e00}-\u{9fa5}]{1,4}",
            prop::option::of((
                prop::sample::select(vec!['·', '・', '･', '•', '‧', '∙', '⋅']),
                "[\u{4e00}-\u{9fa5}]{1,4}",
            )),
        )
    }

    proptest! {
        /// What an outsider types, of any format: refused, or a value
        /// that normalises to itself (stored and searched as one).
        #[test]
        fn any_text_normalises_to_a_value_that_normalises_to_itself_or_is_refused(
            text in "\\PC{0,40}|[0-9Xx|年月日./ -]{0,30}",
        ) {
            for t in [KeyFormat::Text, KeyFormat::IdCard, KeyFormat::NameBirth] {
                let types = KeyTypes::new(vec![KeyType { format: t, ..id_type() }]).expect("valid");
                if let Ok(once) = types.normalise("id_card", &text) {
                    prop_assert_eq!(types.normalise("id_card", &once).ok(), Some(once));
                }
            }
        }

        #[test]
        fn both_forms_of_an_identity_number_as_typed_give_one_value_and_one_digest(
            (fifteen, eighteen) in valid_first_generation_id(),
            wide in any::<bool>(),
            pad in "[ \u{3000}]{0,2}",
        ) {
            let hasher = KeyHasher::new(Some("secret"));
            let mut values = BTreeSet::new();
            let mut elements = BTreeSet::new();
            let mut index = BTreeSet::new();
            let mut audit = BTreeSet::new();
            for form in [&fifteen, &eighteen, &eighteen.to_lowercase()] {
                let typed = if wide { full_width(form) } else { form.clone() };
                let v = id(&format!("{pad}{typed}{pad}")).expect("a valid number");
                elements.insert(hasher.filter_element(&id_type(), &v));
                index.insert(KeyHasher::index_digest("id_card", &v));
                audit.insert(hasher.audit_digest("id_card", &v));
                values.insert(v);
            }
            prop_assert_eq!(values.into_iter().collect::<Vec<_>>(), vec![eighteen]);
            prop_assert_eq!((elements.len(), index.len(), audit.len()), (1, 1, 1));
        }

        #[test]
        fn every_spelling_of_a_name_and_birth_date_gives_one_value(
            (first, rest) in name_parts(),
            (y, m, d) in valid_birth_date(),
            form in 0usize..5,
            short in any::<bool>(),
            wide in any::<bool>(),
            pad in "[ \u{3000}]{0,2}",
        ) {
            let (mm, dd) = if short && form != 1 {
                (m.to_string(), d.to_string())
            } else {
                (format!("{m:02}"), format!("{d:02}"))
            };
            let date = match form {
                0 => format!("{y}-{mm}-{dd}"),
                1 => format!("{y}{mm}{dd}"),
                2 => format!("{y}.{mm}.{dd}"),
                3 => format!("{y}/{mm}/{dd}"),
                _ => format!("{y}年{mm}月{dd}日"),
            };
            let date = if wide { full_width(&date) } else { date };
            let typed_name = match &rest {
                Some((dot, second)) => format!("{first}{dot}{second}"),
                None => first.clone(),
            };
            let expected_name = match &rest {
                Some((_, second)) => format!("{first}·{second}"),
                None => first.clone(),
            };
            let expected = format!("{expected_name}|{y:04}-{m:02}-{d:02}");
            let once = person(&format!("{pad}{typed_name}{pad}|{pad}{date}{pad}"));
            prop_assert_eq!(&once, &Ok(expected.clone()));
            prop_assert_eq!(person(&expected), Ok(expected));
        }

        #[test]
        fn name_and_birth_date_normalisation_is_idempotent(s in any::<String>()) {
            if let Ok(once) = person(&s) {
                prop_assert_eq!(person(&once), Ok(once.clone()));
            }
        }

        #[test]
        fn name_and_birth_date_normalisation_of_near_misses_is_idempotent(
            s in "[ \u{3000}a\u{301}\u{4e00}\u{f900}\u{ff21}・•|｜]{0,6}[|｜][ 0-9０-９年月日./-]{0,14}"
        ) {
            if let Ok(once) = person(&s) {
                prop_assert_eq!(person(&once), Ok(once.clone()));
            }
        }

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
