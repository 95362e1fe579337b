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
//! 5. more than [`MAX_KEY_BYTES`](normalise::MAX_KEY_BYTES) bytes of UTF-8: [`InvalidKey::TooLong`].
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
//! 4. exactly 18 characters after that ([`IdCardError::Length`](id_card::IdCardError::Length)), 17 ASCII
//!    digits then a digit or `X`; anything else, inner spaces included, is
//!    [`IdCardError::Character`](id_card::IdCardError::Character);
//! 5. region (first 6 digits): the first digit is 1–8, province codes
//!    11..=82 ([`IdCardError::Region`](id_card::IdCardError::Region));
//! 6. birth date (characters 7–14, `YYYYMMDD`): a real date, not before
//!    1900-01-01 and not after today in China Standard Time (UTC+8)
//!    ([`IdCardError::BirthDate`](id_card::IdCardError::BirthDate));
//! 7. check character (ISO 7064 MOD 11-2): with weights
//!    `7 9 10 5 8 4 2 1 6 3 7 9 10 5 8 4 2` over the first 17 digits,
//!    `"10X98765432"[sum % 11]` ([`IdCardError::CheckDigit`](id_card::IdCardError::CheckDigit)).
//!
//! [`KeyFormat::NameBirth`], a name and a birth date, `name|YYYY-MM-DD`:
//! 1. Unicode NFKC (full-width letters, digits, punctuation and `｜` become
//!    ASCII; CJK compatibility ideographs become the unified ones);
//! 2. exactly one `|` ([`NameBirthError::Separator`](normalise::NameBirthError::Separator));
//! 3. the name: trimmed, each run of white space one space, and the
//!    look-alikes of the middle dot that separates the parts of a
//!    transliterated or minority name (`・` U+30FB, `•` U+2022, `‧` U+2027,
//!    `∙` U+2219, `⋅` U+22C5) made `·` (U+00B7); not empty
//!    ([`NameBirthError::EmptyName`](normalise::NameBirthError::EmptyName));
//! 4. the date, white space removed, in one of the usual spellings:
//!    `1950-11-25`, `19501125`, `1950.11.25`, `1950/11/25`,
//!    `1950年11月25日` (month and day of one or two digits except in the
//!    8-digit form; the final `日` may be left out)
//!    ([`NameBirthError::DateForm`](normalise::NameBirthError::DateForm)), a real date not after today in China
//!    ([`NameBirthError::BirthDate`](normalise::NameBirthError::BirthDate)), written `YYYY-MM-DD`.
//!
//! Normalisation is idempotent: a normalised value normalises to itself;
//! every spelling a format accepts of one value gives that one value, and
//! so one digest everywhere (index, key filter, audit log).
//!
//! # Files
//!
//! - `types.rs`: the declared key types, their checks and fingerprint;
//! - `normalise.rs`: the rules of every format, text, name and birth date;
//! - `id_card.rs`: the GB 11643 identity number (15 or 18 characters);
//! - `date.rs`: today in China, which no birth date may pass;
//! - `digest.rs`: [`KeyHasher`] and [`Keying`], what stands in for a value.

mod date;
mod digest;
mod id_card;
mod normalise;
#[cfg(test)]
mod test_support;
mod types;

pub use digest::{KeyHasher, Keying};
pub use id_card::id_card_number;
pub use normalise::InvalidKey;
pub use types::{shown_type_name, KeyFormat, KeyType, KeyTypes, KeyTypesError, Visibility};
