//! How a key's value is normalised and validated: the rules of every format,
//! text and a name with its birth date; the identity number's own rules are
//! in `id_card.rs`. Errors name the key type, never the value.

use std::borrow::Cow;
use std::collections::BTreeMap;

use time::{Date, Month};
use unicode_normalization::{is_nfc_quick, is_nfkc_quick, IsNormalized, UnicodeNormalization};

use super::date::{digits_value, today_in_china};
use super::id_card::{normalise_id_card, IdCardError};
use super::types::{shown_type_name, KeyFormat, KeyType, KeyTypes};

/// Most keys one record may carry.
const MAX_KEYS_PER_RECORD: usize = 16;
/// Longest normalised key value, in bytes of UTF-8.
const MAX_KEY_BYTES: usize = 256;
/// Raw values longer than this are refused before normalisation, so a huge
/// value cannot make us run NFC over megabytes only to refuse it afterwards.
const MAX_RAW_KEY_BYTES: usize = 64 * 1024;

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

/// What is wrong with a name and birth date. Phrased to follow "it".
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NameBirthError {
    #[error("must be a name and a birth date with one | between them, as in 张三|1950-11-25")]
    Separator,
    #[error("has no name before the |")]
    EmptyName,
    #[error(
        "has no birth date written as 1950-11-25, 19501125, 1950.11.25, 1950/11/25, 1950年11月25日 or 一九五〇年十一月二十五日"
    )]
    DateForm,
    #[error(
        "has a birth year and month but no day: the key needs the whole date, as in 1950-11-25"
    )]
    NoDay,
    #[error("has no valid birth date: it must be a real date, not after today")]
    BirthDate,
}

impl KeyTypes {
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
/// one function reads them all plainly. Before them: a time of day after
/// the date is left out (a spreadsheet's date cell saved as text, as in
/// `1950-11-25 00:00:00`), and a date in Chinese numerals
/// (一九五〇年十一月二十五日) is read as its digits.
fn parse_birth_date(s: &str) -> Result<Date, NameBirthError> {
    let s = without_time_of_day(s);
    let arabic = chinese_numerals_as_digits(s);
    let compact: String = arabic
        .as_deref()
        .unwrap_or(s)
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    let (year, month, day) = if compact.len() == 8 && compact.bytes().all(|b| b.is_ascii_digit()) {
        let b = compact.as_bytes();
        (&b[..4], &b[4..6], &b[6..])
    } else if let Some((y, rest)) = compact.split_once('年') {
        let (m, d) = rest.split_once('月').ok_or(NameBirthError::DateForm)?;
        let d = d
            .strip_suffix('日')
            .or_else(|| d.strip_suffix('号'))
            .unwrap_or(d);
        (y.as_bytes(), m.as_bytes(), d.as_bytes())
    } else {
        let sep = compact
            .chars()
            .find(|c| matches!(c, '-' | '.' | '/'))
            .ok_or_else(|| year_and_month_only(&compact))?;
        let mut parts = compact.split(sep);
        match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some(y), Some(m), Some(d), None) => (y.as_bytes(), m.as_bytes(), d.as_bytes()),
            _ => return Err(year_and_month_only(&compact)),
        }
    };
    let digits = |part: &[u8], lengths: std::ops::RangeInclusive<usize>| {
        if lengths.contains(&part.len()) && part.iter().all(u8::is_ascii_digit) {
            Ok(digits_value(part))
        } else {
            Err(NameBirthError::DateForm)
        }
    };
    let year = i32::try_from(digits(year, 4..=4)?).map_err(|_| NameBirthError::BirthDate)?;
    let month = digits(month, 1..=2)?;
    if day.is_empty() {
        return Err(NameBirthError::NoDay);
    }
    let day = u8::try_from(digits(day, 1..=2)?).map_err(|_| NameBirthError::BirthDate)?;
    let month = u8::try_from(month).map_err(|_| NameBirthError::BirthDate)?;
    let month = Month::try_from(month).map_err(|_| NameBirthError::BirthDate)?;
    let date = Date::from_calendar_date(year, month, day).map_err(|_| NameBirthError::BirthDate)?;
    if date > today_in_china() {
        return Err(NameBirthError::BirthDate);
    }
    Ok(date)
}

/// Why a date that is not one of the spellings is refused: a year and a
/// month alone (1950-11, 1950.11, 195011: what a 出生年月 column often
/// holds) are told apart from what cannot be read at all.
fn year_and_month_only(compact: &str) -> NameBirthError {
    let b = compact.as_bytes();
    let digits = |part: &[u8]| !part.is_empty() && part.iter().all(u8::is_ascii_digit);
    let year_month = match compact.find(['-', '.', '/']) {
        Some(at) => {
            at == 4
                && digits(&b[..4])
                && (1..=2).contains(&b.len().saturating_sub(5))
                && digits(&b[5..])
        }
        None => b.len() == 6 && digits(b),
    };
    if year_month {
        NameBirthError::NoDay
    } else {
        NameBirthError::DateForm
    }
}

/// `s` without a time of day after the date (`00:00:00`, `0:00`, after a
/// space or a `T`); as it is if it has none.
fn without_time_of_day(s: &str) -> &str {
    let Some(colon) = s.find(':') else {
        return s;
    };
    let Some(start) = s[..colon].rfind(|c: char| c.is_whitespace() || c == 'T') else {
        return s;
    };
    let time = s[start..].trim_start_matches(|c: char| c.is_whitespace() || c == 'T');
    // Hours, minutes, perhaps seconds (with a fraction), each in range.
    let parts: Vec<&str> = time.split(':').collect();
    let is_time = (2..=3).contains(&parts.len())
        && parts
            .iter()
            .zip([23, 59, 60])
            .enumerate()
            .all(|(i, (part, most))| {
                let whole = match (i, part.split_once('.')) {
                    (2, Some((whole, fraction)))
                        if fraction.bytes().all(|b| b.is_ascii_digit()) =>
                    {
                        whole
                    }
                    _ => part,
                };
                (1..=2).contains(&whole.len())
                    && whole.bytes().all(|b| b.is_ascii_digit())
                    && digits_value(whole.as_bytes()) <= most
            });
    if is_time {
        &s[..start]
    } else {
        s
    }
}

/// The value of a Chinese numeral digit: 〇 (and its look-alike ○), 零,
/// 一 … 九.
fn chinese_digit(c: char) -> Option<u32> {
    "〇一二三四五六七八九"
        .chars()
        .position(|d| d == c)
        .or(match c {
            '○' | '零' => Some(0),
            _ => None,
        })
        .map(|d| u32::try_from(d).expect("a digit's place among ten"))
}

/// `s` with its runs of Chinese numerals written in digits: a year digit
/// by digit (一九五〇 1950), a month or day with 十 (十一 11, 二十五 25,
/// 三十 30, 廿五 25); None when it has none.
fn chinese_numerals_as_digits(s: &str) -> Option<String> {
    let numeral = |c: char| c == '十' || chinese_digit(c).is_some();
    if !s.chars().any(|c| numeral(c) || c == '廿' || c == '卅') {
        return None;
    }
    // 廿 and 卅, as dates write twenty and thirty: 廿五 is 二十五.
    let s = s.replace('廿', "二十").replace('卅', "三十");
    let mut out = String::with_capacity(s.len());
    let mut run: Vec<char> = Vec::new();
    let flush = |run: &mut Vec<char>, out: &mut String| {
        if run.is_empty() {
            return;
        }
        match run.iter().position(|c| *c == '十') {
            Some(ten) => {
                let tens = match run[..ten] {
                    [] => Some(1),
                    [d] => chinese_digit(d),
                    _ => None,
                };
                let units = match run[ten + 1..] {
                    [] => Some(0),
                    [d] => chinese_digit(d),
                    _ => None,
                };
                match (tens, units) {
                    (Some(t), Some(u)) => out.push_str(&(t * 10 + u).to_string()),
                    // Not a number: left as it was, for the reader to refuse.
                    _ => out.extend(run.iter()),
                }
            }
            None => out.extend(
                run.iter()
                    .filter_map(|c| chinese_digit(*c))
                    .map(|d| char::from_digit(d, 10).unwrap_or('?')),
            ),
        }
        run.clear();
    };
    for c in s.chars() {
        if numeral(c) {
            run.push(c);
        } else {
            flush(&mut run, &mut out);
            out.push(c);
        }
    }
    flush(&mut run, &mut out);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local::keys::test_support::{
        full_width, id, id_type, person, types, valid_birth_date,
    };
    use proptest::prelude::*;

    fn person_reason(value: &str) -> Option<NameBirthError> {
        match person(value) {
            Err(InvalidKey::NameBirth { reason, .. }) => Some(reason),
            _ => None,
        }
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
            "张三|1950-11-25 00:00:00",
            "张三|1950/11/25 0:00",
            "张三|1950-11-25T00:00:00.000",
            "张三|1950年11月25号",
            "张三|一九五〇年十一月二十五日",
            "张三|一九五零年十一月廿五日",
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
            ("张三|1950-11", NoDay),
            ("张三|1950.11", NoDay),
            ("张三|195011", NoDay),
            ("张三|1950年11月", NoDay),
            ("张三|一九五〇年十一月", NoDay),
            ("张三|1950-11-25 25:00", DateForm),
            ("张三|十九五〇年十一月二十五日", DateForm),
            ("张三|1950-11/25", DateForm),
            ("张三|1950年11-25", DateForm),
            ("张三|25.11.1950", DateForm),
            ("张三|1950-111-25", DateForm),
            ("张三|195011250", DateForm),
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

    }
}
