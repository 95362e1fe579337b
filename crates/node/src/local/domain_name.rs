//! A domain's name, checked once where it comes in (the configuration, a
//! URL's path, ZooKeeper, a peer's answer) and typed from there on, so
//! that no name that could escape a ZooKeeper path, a file name or a
//! metric label travels as a bare string.

use std::borrow::Borrow;
use std::fmt;
use std::ops::Deref;

/// Longest domain name, in characters (all ASCII).
pub const MAX_NAME_CHARS: usize = 64;

/// A domain's name: 1 to [`MAX_NAME_CHARS`] of `A-Z a-z 0-9 - _`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(transparent)]
pub struct DomainName(String);

/// Why a string is not a domain name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a domain name: it must be 1..={MAX_NAME_CHARS} of A-Z a-z 0-9 - _")]
pub struct InvalidDomainName(pub String);

impl DomainName {
    pub fn parse(name: &str) -> Result<Self, InvalidDomainName> {
        Self::try_from(name.to_owned())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

/// Whether `name` may name a domain (see [`DomainName`]).
pub fn is_domain_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_CHARS
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

impl TryFrom<String> for DomainName {
    type Error = InvalidDomainName;

    fn try_from(name: String) -> Result<Self, InvalidDomainName> {
        if is_domain_name(&name) {
            Ok(DomainName(name))
        } else {
            Err(InvalidDomainName(name))
        }
    }
}

impl std::str::FromStr for DomainName {
    type Err = InvalidDomainName;

    fn from_str(name: &str) -> Result<Self, InvalidDomainName> {
        DomainName::parse(name)
    }
}

impl<'de> serde::Deserialize<'de> for DomainName {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        DomainName::try_from(name).map_err(serde::de::Error::custom)
    }
}

impl fmt::Display for DomainName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Deref for DomainName {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for DomainName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// So that maps keyed by name are asked with a `&str`.
impl Borrow<str> for DomainName {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl PartialEq<str> for DomainName {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for DomainName {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl PartialEq<String> for DomainName {
    fn eq(&self, other: &String) -> bool {
        self.0 == *other
    }
}

impl PartialEq<DomainName> for str {
    fn eq(&self, other: &DomainName) -> bool {
        self == other.0
    }
}

impl PartialEq<DomainName> for &str {
    fn eq(&self, other: &DomainName) -> bool {
        *self == other.0
    }
}

impl PartialEq<DomainName> for String {
    fn eq(&self, other: &DomainName) -> bool {
        *self == other.0
    }
}

impl From<&DomainName> for String {
    fn from(name: &DomainName) -> String {
        name.0.clone()
    }
}

impl From<DomainName> for String {
    fn from(name: DomainName) -> String {
        name.0
    }
}

/// A name written in a unit test, where a name that is none is a bug in
/// the test.
#[cfg(test)]
impl From<&str> for DomainName {
    fn from(name: &str) -> Self {
        DomainName::parse(name).expect("a test's domain name")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_of_letters_digits_dashes_and_underscores_up_to_64_is_a_domain_name() {
        for good in ["A", "county-0421", "prov_gd", &"x".repeat(64)] {
            assert_eq!(
                DomainName::parse(good).map(|n| n.to_string()),
                Ok(good.to_owned())
            );
        }
        for bad in ["", "a/b", "a b", "档案馆", "../x", "a.b", &"x".repeat(65)] {
            assert_eq!(
                DomainName::parse(bad),
                Err(InvalidDomainName(bad.to_owned()))
            );
        }
    }

    #[test]
    fn a_name_reads_from_json_only_if_it_is_one_and_writes_as_a_string() {
        let name: DomainName = serde_json::from_str("\"county-0421\"").unwrap();
        assert_eq!(name, "county-0421");
        assert_eq!(serde_json::to_string(&name).unwrap(), "\"county-0421\"");
        let refused = serde_json::from_str::<DomainName>("\"a/b\"").unwrap_err();
        assert!(
            refused.to_string().contains("is not a domain name"),
            "{refused}"
        );
    }

    #[test]
    fn a_map_keyed_by_domain_name_is_asked_with_a_str() {
        let mut map = std::collections::BTreeMap::new();
        map.insert(DomainName::parse("B").unwrap(), 1);
        assert_eq!(map.get("B"), Some(&1));
    }

    proptest::proptest! {
        /// Every name of the alphabet and length reads back through JSON
        /// as it was typed; one character outside the alphabet anywhere in
        /// it makes it no name.
        #[test]
        fn names_round_trip_and_one_foreign_character_refuses_them(
            name in "[A-Za-z0-9_-]{1,63}",
            foreign in "[^A-Za-z0-9_-]",
            at in 0usize..64,
        ) {
            let parsed = DomainName::parse(&name).unwrap();
            let json = serde_json::to_string(&parsed).unwrap();
            proptest::prop_assert_eq!(serde_json::from_str::<DomainName>(&json).unwrap(), parsed);
            let mut spoiled = name.clone();
            spoiled.insert_str(at.min(name.len()), &foreign);
            proptest::prop_assert!(DomainName::parse(&spoiled).is_err());
        }
    }
}
