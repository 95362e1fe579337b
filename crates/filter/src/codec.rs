//! The envelope shared by every serialized form (docs/FORMAT.md): magic,
//! format version, reserved bytes, body, CRC32C trailer; and the bounded
//! reader that decoders use so that no input can make them panic or
//! allocate more than the input's own length.

use crate::geometry::{BloomGeometry, GeometryError};

/// Version written into, and the only one accepted from, every envelope.
pub const FORMAT_VERSION: u8 = 1;
/// Magic, version, three reserved bytes.
pub const HEADER_LEN: usize = 8;
/// CRC32C of everything before it.
pub const TRAILER_LEN: usize = 4;

/// Why bytes could not be decoded. Decoding never panics and never
/// allocates more than the length of its input.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DecodeError {
    #[error("input ends early: {needed} bytes needed, {available} available")]
    Truncated { needed: u64, available: u64 },
    #[error("not a {expected} (magic {found:?})")]
    Magic {
        expected: &'static str,
        found: [u8; 4],
    },
    #[error("format version {0} is not supported (this reader knows {FORMAT_VERSION})")]
    Version(u8),
    #[error("checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    Checksum { stored: u32, computed: u32 },
    #[error("invalid geometry: {0}")]
    Geometry(#[from] GeometryError),
    #[error("payload is {found} bytes but the header implies {expected}")]
    Length { expected: u64, found: u64 },
    #[error("invalid field: {0}")]
    Invalid(&'static str),
}

/// Kinds of envelope, by magic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Kind {
    pub magic: [u8; 4],
    pub name: &'static str,
}

pub(crate) const BLOOM: Kind = Kind {
    magic: *b"XABL",
    name: "Bloom filter",
};
pub(crate) const COUNTING: Kind = Kind {
    magic: *b"XACB",
    name: "counting Bloom filter",
};
pub(crate) const CUCKOO: Kind = Kind {
    magic: *b"XACK",
    name: "cuckoo filter",
};
pub(crate) const DELTA: Kind = Kind {
    magic: *b"XADL",
    name: "filter delta",
};

/// Builds an envelope: header on creation, CRC on [`Writer::finish`].
pub(crate) struct Writer(Vec<u8>);

impl Writer {
    pub fn new(kind: Kind, body_len: usize) -> Self {
        let mut buf = Vec::with_capacity(HEADER_LEN + body_len + TRAILER_LEN);
        buf.extend_from_slice(&kind.magic);
        buf.extend_from_slice(&[FORMAT_VERSION, 0, 0, 0]);
        Writer(buf)
    }

    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }

    pub fn u16(&mut self, v: u16) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }

    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }

    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }

    pub fn bytes(&mut self, v: &[u8]) -> &mut Self {
        self.0.extend_from_slice(v);
        self
    }

    pub fn words(&mut self, words: &[u64]) -> &mut Self {
        self.0.reserve(words.len() * 8);
        for w in words {
            self.0.extend_from_slice(&w.to_le_bytes());
        }
        self
    }

    /// LEB128: seven bits a byte, low first, high bit set on all but the last.
    // LEB128 keeps the low seven bits in each byte: the truncation is the encoding.
    #[allow(clippy::cast_possible_truncation)]
    pub fn varint(&mut self, mut v: u64) -> &mut Self {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
        self
    }

    pub fn finish(mut self) -> Vec<u8> {
        let crc = crc32c::crc32c(&self.0);
        self.0.extend_from_slice(&crc.to_le_bytes());
        self.0
    }
}

/// Checks an envelope's length, magic, version, reserved bytes and CRC, and
/// returns a reader over its body.
pub(crate) fn open(bytes: &[u8], kind: Kind) -> Result<Reader<'_>, DecodeError> {
    let min = (HEADER_LEN + TRAILER_LEN) as u64;
    if (bytes.len() as u64) < min {
        return Err(DecodeError::Truncated {
            needed: min,
            available: bytes.len() as u64,
        });
    }
    let mut found = [0u8; 4];
    found.copy_from_slice(&bytes[..4]);
    if found != kind.magic {
        return Err(DecodeError::Magic {
            expected: kind.name,
            found,
        });
    }
    if bytes[4] != FORMAT_VERSION {
        return Err(DecodeError::Version(bytes[4]));
    }
    let (content, trailer) = bytes.split_at(bytes.len() - TRAILER_LEN);
    let mut stored = [0u8; 4];
    stored.copy_from_slice(trailer);
    let stored = u32::from_le_bytes(stored);
    let computed = crc32c::crc32c(content);
    if stored != computed {
        return Err(DecodeError::Checksum { stored, computed });
    }
    if bytes[5..8] != [0, 0, 0] {
        return Err(DecodeError::Invalid("reserved header bytes must be zero"));
    }
    Ok(Reader {
        buf: &content[HEADER_LEN..],
    })
}

/// A cursor over an envelope's body; every read is bounds-checked.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn remaining(&self) -> usize {
        self.buf.len()
    }

    // `n` is at most `self.buf.len()`, checked above: it fits a usize.
    #[allow(clippy::cast_possible_truncation)]
    pub fn take(&mut self, n: u64) -> Result<&'a [u8], DecodeError> {
        if n > self.buf.len() as u64 {
            return Err(DecodeError::Truncated {
                needed: n,
                available: self.buf.len() as u64,
            });
        }
        let (head, rest) = self.buf.split_at(n as usize);
        self.buf = rest;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N as u64)?);
        Ok(out)
    }

    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.array::<1>()?[0])
    }

    pub fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    pub fn zeros(&mut self, n: u64) -> Result<(), DecodeError> {
        if self.take(n)?.iter().any(|&b| b != 0) {
            return Err(DecodeError::Invalid("reserved bytes must be zero"));
        }
        Ok(())
    }

    pub fn varint(&mut self) -> Result<u64, DecodeError> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = self.u8()?;
            let bits = u64::from(byte & 0x7f);
            if shift == 63 && bits > 1 {
                return Err(DecodeError::Invalid("varint overflows 64 bits"));
            }
            value |= bits << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(DecodeError::Invalid("varint longer than 10 bytes"))
    }

    /// Exactly `n` bytes of payload must remain; anything else is an error.
    pub fn payload(&mut self, n: u64) -> Result<&'a [u8], DecodeError> {
        if self.buf.len() as u64 != n {
            return Err(DecodeError::Length {
                expected: n,
                found: self.buf.len() as u64,
            });
        }
        self.take(n)
    }

    pub fn end(&self) -> Result<(), DecodeError> {
        if !self.buf.is_empty() {
            return Err(DecodeError::Invalid("trailing bytes after the body"));
        }
        Ok(())
    }
}

/// Little-endian u64 words from a payload whose length is a multiple of 8.
pub(crate) fn le_words(bytes: &[u8]) -> impl ExactSizeIterator<Item = u64> + '_ {
    bytes.chunks_exact(8).map(|c| {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        u64::from_le_bytes(w)
    })
}

/// Bytes from hex digits, whitespace ignored (test inputs from fuzz finds).
#[cfg(test)]
pub(crate) fn unhex(hex: &str) -> Vec<u8> {
    let digits: Vec<u8> = hex
        .bytes()
        .filter(|b| !b.is_ascii_whitespace())
        .map(|b| match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            _ => panic!("not a lowercase hex digit: {}", b as char),
        })
        .collect();
    digits.chunks_exact(2).map(|p| p[0] << 4 | p[1]).collect()
}

/// A 512-counter `XACB` filter (308 bytes) that both counting decoders once
/// allocated far more than its size for: a regression input for each.
#[cfg(test)]
pub(crate) const FUZZ_FIND_512_COUNTERS: &str =
    "5841434201000000000200000000000001000000000000000000000000000000
     1300000000000000110000000000000000000000000000000000000000000000
     000000000000000000000000000000000000000000000000000000000000f000
     0000000000000000000000000000000000000000000000000000000000000000
     0000000000000000000000000000000000000000000000000000000000000000
     0000000000000000000000000000000000000000000000000000000000000000
     0000000000000000000000000000000000000000000000000000000000000000
     0000000000000000000000000000000000000000000000000000000000000000
     0000000000000000000000000000000000000000000000000000000000000000
     00000000000000000000000000000000f82e4b10";

/// The body header `XABL` and `XACB` share: geometry, epoch, version,
/// items (40 bytes); each is followed by its cells, packed in u64 words.
pub(crate) struct BloomHeader {
    pub geometry: BloomGeometry,
    pub epoch: u64,
    pub version: u64,
    pub items: u64,
}

impl BloomHeader {
    const LEN: usize = 40;

    /// An envelope of `kind`: this header, then `words`.
    pub fn encode(&self, kind: Kind, words: &[u64]) -> Vec<u8> {
        let mut w = Writer::new(kind, Self::LEN + words.len() * 8);
        self.write(&mut w);
        w.words(words);
        w.finish()
    }

    /// Opens an envelope of `kind`: its header, and its payload checked to
    /// hold the geometry's cells at `cells_per_byte`. The payload stays as
    /// bytes, so each decoder makes its words once, straight from the input.
    pub fn decode(
        bytes: &[u8],
        kind: Kind,
        cells_per_byte: u64,
    ) -> Result<(Self, &[u8]), DecodeError> {
        let mut r = open(bytes, kind)?;
        let header = Self::read(&mut r)?;
        let payload = r.payload(header.geometry.num_bits() / cells_per_byte)?;
        Ok((header, payload))
    }

    fn write(&self, w: &mut Writer) {
        w.u64(self.geometry.num_bits())
            .u32(self.geometry.k())
            .u32(self.geometry.seed())
            .u64(self.epoch)
            .u64(self.version)
            .u64(self.items);
    }

    fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let num_bits = r.u64()?;
        let k = r.u32()?;
        let seed = r.u32()?;
        Ok(BloomHeader {
            geometry: BloomGeometry::new(num_bits, k, seed)?,
            epoch: r.u64()?,
            version: r.u64()?,
            items: r.u64()?,
        })
    }
}
