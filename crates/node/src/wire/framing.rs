//! The node's binary framings: a delta with the IDs it changed, and a page
//! of a relay (entries of a JSON header and a body).

use serde::{Deserialize, Serialize};
use xarchive_filter::{DecodeError, Delta};

use crate::local::filter::FilterKind;
use crate::local::id::{ArchiveId, InvalidId};

/// Why a `DELTA_WITH_IDS` body could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FramingError {
    #[error("body shorter than its length prefix")]
    NoPrefix,
    #[error("delta of {0} bytes is longer than the body")]
    Truncated(usize),
    #[error("the delta: {0}")]
    Delta(#[from] DecodeError),
    #[error("the changed IDs are not UTF-8: {0}")]
    NotUtf8(#[from] std::str::Utf8Error),
    #[error("a changed ID: {0}")]
    Id(#[from] InvalidId),
}

/// Frames an encoded delta and the IDs it changed (`DELTA_WITH_IDS`).
// A delta of 4 GiB or more would be cut short: the format's length field is
// 32 bits. Deltas are far smaller, but nothing here bounds them.
#[allow(clippy::cast_possible_truncation)]
pub fn frame_delta_with_ids(encoded: &[u8], changed: &[ArchiveId]) -> Vec<u8> {
    let mut body = Vec::with_capacity(4 + encoded.len() + changed.len() * 24);
    body.extend_from_slice(&(encoded.len() as u32).to_le_bytes());
    body.extend_from_slice(encoded);
    for id in changed {
        body.extend_from_slice(id.as_str().as_bytes());
        body.push(b'\n');
    }
    body
}

/// Reads a `DELTA_WITH_IDS` body.
pub fn split_delta_with_ids(body: &[u8]) -> Result<(Delta, Vec<ArchiveId>), FramingError> {
    let len_bytes: [u8; 4] = body
        .get(..4)
        .and_then(|b| b.try_into().ok())
        .ok_or(FramingError::NoPrefix)?;
    let len = u32::from_le_bytes(len_bytes) as usize;
    let end = 4usize
        .checked_add(len)
        .filter(|end| *end <= body.len())
        .ok_or(FramingError::Truncated(len))?;
    let delta = Delta::decode(&body[4..end])?;
    let changed = std::str::from_utf8(&body[end..])?
        .split_terminator('\n')
        .map(ArchiveId::parse)
        .collect::<Result<Vec<_>, _>>()?;
    Ok((delta, changed))
}

/// Which of an origin's two filters a relayed change is of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RelayPart {
    Filter,
    Keys,
}

/// What a relayed change is: whose filter, and from which position to which.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RelayHeader {
    /// The domain whose filter changed.
    pub origin: String,
    pub part: RelayPart,
    #[serde(with = "crate::local::epoch::u64_string")]
    pub epoch: u64,
    /// The version the body brings a copy to.
    pub version: u64,
    /// A delta's first version; absent for a whole filter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<u64>,
    /// A whole filter's kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<FilterKind>,
    /// A whole key filter's key id (`KEY_ID_HEADER`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_id: Option<String>,
}

/// One relayed change.
#[derive(Clone, Debug, PartialEq)]
pub struct RelayEntry {
    pub header: RelayHeader,
    pub body: bytes::Bytes,
}

/// Why a relay page could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RelayPageError {
    #[error("entry at byte {0} runs past the end of the page")]
    Truncated(usize),
    #[error("entry at byte {at}: header: {source}")]
    Header {
        at: usize,
        source: serde_json::Error,
    },
    #[error("cannot encode a relay entry's header: {0}")]
    Unencodable(#[source] serde_json::Error),
}

/// Writes a relay page.
// A part of 4 GiB or more would be cut short: the format's length field is
// 32 bits. Headers and bodies are far smaller, but nothing here bounds them.
#[allow(clippy::cast_possible_truncation)]
pub fn encode_relay_page<'a>(
    entries: impl IntoIterator<Item = &'a RelayEntry>,
) -> Result<Vec<u8>, RelayPageError> {
    let mut page = Vec::new();
    for entry in entries {
        let header = serde_json::to_vec(&entry.header).map_err(RelayPageError::Unencodable)?;
        page.extend_from_slice(&(header.len() as u32).to_le_bytes());
        page.extend_from_slice(&header);
        page.extend_from_slice(&(entry.body.len() as u32).to_le_bytes());
        page.extend_from_slice(&entry.body);
    }
    Ok(page)
}

/// Reads a relay page; bodies are slices of `page`, not copies.
pub fn decode_relay_page(page: &bytes::Bytes) -> Result<Vec<RelayEntry>, RelayPageError> {
    let mut entries = Vec::new();
    let mut at = 0;
    while at < page.len() {
        let start = at;
        let take = |at: &mut usize| -> Result<bytes::Bytes, RelayPageError> {
            let len = page
                .get(*at..*at + 4)
                .and_then(|b| <[u8; 4]>::try_from(b).ok())
                .map(|b| u32::from_le_bytes(b) as usize)
                .ok_or(RelayPageError::Truncated(start))?;
            let end = (*at + 4)
                .checked_add(len)
                .filter(|end| *end <= page.len())
                .ok_or(RelayPageError::Truncated(start))?;
            let part = page.slice(*at + 4..end);
            *at = end;
            Ok(part)
        };
        let header = take(&mut at)?;
        let header = serde_json::from_slice(&header)
            .map_err(|source| RelayPageError::Header { at: start, source })?;
        let body = take(&mut at)?;
        entries.push(RelayEntry { header, body });
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// A peer's delta body: any bytes are read or refused, never a panic.
        #[test]
        fn any_bytes_read_as_a_delta_with_ids_or_are_refused_without_panic(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..256),
        ) {
            let _ = split_delta_with_ids(&bytes);
        }
    }

    #[test]
    fn a_framed_delta_reads_back_and_a_damaged_one_is_refused() {
        let mut filter = xarchive_filter::CountingBloomFilter::with_capacity(100, 0.01).unwrap();
        filter.insert(b"a");
        let delta = filter.flips_since(0).unwrap();
        let ids = vec![
            ArchiveId::parse("a").unwrap(),
            ArchiveId::parse("档案/1").unwrap(),
        ];
        let body = frame_delta_with_ids(&delta.encode(), &ids);
        let (read, changed) = split_delta_with_ids(&body).unwrap();
        assert_eq!((read, changed), (delta, ids));
        assert!(matches!(
            split_delta_with_ids(&body[..3]),
            Err(FramingError::NoPrefix)
        ));
        let mut long = body.clone();
        long[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            split_delta_with_ids(&long),
            Err(FramingError::Truncated(_))
        ));
        let mut bad_id = body;
        bad_id.extend_from_slice(b"\x01\n");
        assert!(matches!(
            split_delta_with_ids(&bad_id),
            Err(FramingError::Id(_))
        ));
    }

    fn relay_entry() -> impl proptest::strategy::Strategy<Value = RelayEntry> {
        use proptest::prelude::*;
        (
            "[a-z0-9-]{1,12}",
            any::<bool>(),
            any::<u64>(),
            any::<u64>(),
            proptest::option::of(any::<u64>()),
            proptest::collection::vec(any::<u8>(), 0..64),
        )
            .prop_map(|(origin, keys, epoch, version, from, body)| RelayEntry {
                header: RelayHeader {
                    origin,
                    part: if keys {
                        RelayPart::Keys
                    } else {
                        RelayPart::Filter
                    },
                    epoch,
                    version,
                    from,
                    kind: from.is_none().then_some(FilterKind::Counting),
                    key_id: (keys && from.is_none()).then(|| "k1".to_owned()),
                },
                body: body.into(),
            })
    }

    proptest::proptest! {
        #[test]
        fn a_relay_page_reads_back_as_written(
            entries in proptest::collection::vec(relay_entry(), 0..6)
        ) {
            let page = bytes::Bytes::from(encode_relay_page(&entries).unwrap());
            proptest::prop_assert_eq!(decode_relay_page(&page).unwrap(), entries);
        }

        #[test]
        fn a_cut_relay_page_is_refused_and_any_bytes_are_read_without_panic(
            entries in proptest::collection::vec(relay_entry(), 1..4),
            cut in 1usize..64,
            noise in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..128),
        ) {
            let page = encode_relay_page(&entries).unwrap();
            let cut = cut.min(page.len());
            let short = bytes::Bytes::copy_from_slice(&page[..page.len() - cut]);
            // What is left may end exactly between entries, else it is refused.
            if let Ok(read) = decode_relay_page(&short) {
                proptest::prop_assert!(read.len() < entries.len());
            }
            let _ = decode_relay_page(&bytes::Bytes::from(noise));
        }
    }
}
