//! The declared key types: their names, visibility and format, the checks
//! on a list of them, and its fingerprint (domains refuse to join a cluster
//! that declares another list).

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Most key types a cluster may declare.
const MAX_KEY_TYPES: usize = 16;
/// Longest key type name, in characters.
const MAX_TYPE_NAME_CHARS: usize = 32;

/// Separates the parts of the bytes that are digested (ASCII unit
/// separator: cannot occur in a type name, and values refuse controls).
pub(super) const SEP: char = '\u{1f}';

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local::keys::test_support::{id_type, name_type};

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
}
