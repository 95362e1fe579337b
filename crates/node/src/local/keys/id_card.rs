//! The resident identity number of GB 11643: 18 characters with an
//! ISO 7064 check character, or the 15 digits of the first generation made
//! 18; its region and birth date checked.

use time::{Date, Month};

use super::date::{digits_value, today_in_china};

/// Weights of the first 17 digits in GB 11643-1999's check.
const ID_CARD_WEIGHTS: [u32; 17] = [7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2];
/// Check character for each `sum % 11`.
const ID_CARD_CHECK: &[u8; 11] = b"10X98765432";
const ID_CARD_LEN: usize = 18;

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

/// Full-width digits and X, as Chinese input methods type them, to ASCII.
fn half_width(c: char) -> char {
    match c {
        '\u{ff10}'..='\u{ff19}' => char::from_digit(u32::from(c) - 0xff10, 10).unwrap_or(c),
        'Ｘ' | 'ｘ' => 'X',
        other => other,
    }
}

/// `s` is already NFC, trimmed, free of controls and short.
pub(super) fn normalise_id_card(s: &str) -> Result<String, IdCardError> {
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

fn check_birth_date(yyyymmdd: &[u8]) -> Result<(), IdCardError> {
    let year = i32::try_from(digits_value(&yyyymmdd[..4])).map_err(|_| IdCardError::BirthDate)?;
    let month = u8::try_from(digits_value(&yyyymmdd[4..6])).map_err(|_| IdCardError::BirthDate)?;
    let month = Month::try_from(month).map_err(|_| IdCardError::BirthDate)?;
    let day = u8::try_from(digits_value(&yyyymmdd[6..8])).map_err(|_| IdCardError::BirthDate)?;
    let date = Date::from_calendar_date(year, month, day).map_err(|_| IdCardError::BirthDate)?;
    let earliest =
        Date::from_calendar_date(1900, Month::January, 1).map_err(|_| IdCardError::BirthDate)?;
    if date < earliest || date > today_in_china() {
        return Err(IdCardError::BirthDate);
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local::keys::test_support::{full_width, id, id_type, types, valid_birth_date};
    use crate::local::keys::{InvalidKey, KeyHasher};
    use proptest::prelude::*;
    use std::collections::BTreeSet;

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

    proptest! {
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
