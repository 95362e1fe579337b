//! Fixtures the tests of the key modules share: a few declared types and
//! generators of valid birth dates, so each file's tests read alike.

use proptest::prelude::*;
use time::{Date, Month};

use super::date::today_in_china;
use super::normalise::InvalidKey;
use super::types::{KeyFormat, KeyType, KeyTypes, Visibility};

pub(super) fn id_type() -> KeyType {
    KeyType {
        name: "id_card".into(),
        visibility: Visibility::Private,
        format: KeyFormat::IdCard,
    }
}

pub(super) fn name_type() -> KeyType {
    KeyType {
        name: "name_birth".into(),
        visibility: Visibility::Public,
        format: KeyFormat::Text,
    }
}

/// A name and birth date type, as the default configuration declares
/// `name_birth` (here `name_type` plays a text key of that name).
pub(super) fn person_type() -> KeyType {
    KeyType {
        name: "person".into(),
        visibility: Visibility::Private,
        format: KeyFormat::NameBirth,
    }
}

pub(super) fn types() -> KeyTypes {
    KeyTypes::new(vec![id_type(), name_type(), person_type()]).expect("valid key types")
}

pub(super) fn person(value: &str) -> Result<String, InvalidKey> {
    types().normalise("person", value)
}

pub(super) fn id(value: &str) -> Result<String, InvalidKey> {
    types().normalise("id_card", value)
}

pub(super) fn valid_birth_date() -> impl Strategy<Value = (i32, u8, u8)> {
    let last_year = today_in_china().year() - 1;
    (1900..=last_year, 1u8..=12, 1u8..=31).prop_filter_map("a real date", |(y, m, d)| {
        let month = Month::try_from(m).ok()?;
        Date::from_calendar_date(y, month, d).ok()?;
        Some((y, m, d))
    })
}

/// `s` with its ASCII digits, and X, made full-width.
pub(super) fn full_width(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '0'..='9' => char::from_u32(0xff10 + (c as u32 - '0' as u32)).unwrap_or(c),
            'X' => 'Ｘ',
            _ => c,
        })
        .collect()
}
