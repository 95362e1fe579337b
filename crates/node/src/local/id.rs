//! Archive IDs: the archive number, 1..=256 bytes of UTF-8 without control
//! characters. Anything else is refused before it reaches the store or the
//! filter.

use std::fmt;

/// Longest ID, in bytes of UTF-8.
pub const MAX_ID_BYTES: usize = 256;

/// A validated archive ID, such as `J001-WS·2023-Y-0001` or `档案/2024/001`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(transparent)]
pub struct ArchiveId(String);

/// Why a string is not an archive ID.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidId {
    #[error("archive ID is empty")]
    Empty,
    #[error("archive ID is {0} bytes long; the limit is {MAX_ID_BYTES}")]
    TooLong(usize),
    #[error("archive ID contains a control character (U+{0:04X}) at byte {1}")]
    Control(u32, usize),
    #[error("archive ID {0:?} cannot be used: a URL path would drop it as a dot segment")]
    DotSegment(&'static str),
}

impl ArchiveId {
    pub fn parse(s: &str) -> Result<Self, InvalidId> {
        if s.is_empty() {
            return Err(InvalidId::Empty);
        }
        if s.len() > MAX_ID_BYTES {
            return Err(InvalidId::TooLong(s.len()));
        }
        if let Some((at, c)) = s.char_indices().find(|(_, c)| c.is_control()) {
            return Err(InvalidId::Control(c as u32, at));
        }
        // Even percent-encoded (%2E), URL parsers resolve these away.
        match s {
            "." => return Err(InvalidId::DotSegment(".")),
            ".." => return Err(InvalidId::DotSegment("..")),
            _ => {}
        }
        Ok(ArchiveId(s.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

impl fmt::Display for ArchiveId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<[u8]> for ArchiveId {
    fn as_ref(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

impl<'de> serde::Deserialize<'de> for ArchiveId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        ArchiveId::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_real_archive_numbers() {
        for id in [
            "J001-WS·2023-Y-0001",
            "档案/2024/001",
            "A",
            "📁-1",
            &"x".repeat(256),
        ] {
            assert_eq!(ArchiveId::parse(id).unwrap().as_str(), id);
        }
    }

    #[test]
    fn refuses_empty_long_and_control() {
        assert_eq!(ArchiveId::parse(""), Err(InvalidId::Empty));
        assert_eq!(
            ArchiveId::parse(&"x".repeat(257)),
            Err(InvalidId::TooLong(257))
        );
        // 86 three-byte characters: 258 bytes, under 257 characters.
        assert!(matches!(
            ArchiveId::parse(&"档".repeat(86)),
            Err(InvalidId::TooLong(258))
        ));
        assert_eq!(ArchiveId::parse("a\nb"), Err(InvalidId::Control(10, 1)));
        assert!(ArchiveId::parse("a\u{7f}").is_err());
        assert_eq!(ArchiveId::parse(".."), Err(InvalidId::DotSegment("..")));
        assert!(ArchiveId::parse("...").is_ok());
    }
}
