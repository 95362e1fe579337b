//! Where an import reads from (a file, or standard input for `-`), what
//! it holds (CSV, NDJSON or a spreadsheet: said, by extension, or sniffed)
//! and in which encoding its text is (UTF-8 with or without a byte-order
//! mark, GBK, GB18030): text comes out as UTF-8 lines, each with its line
//! number in the input, or a [`Stop`] naming the line that cannot be read.

use std::io::{self, BufRead, BufReader, Cursor, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use encoding_rs::{Encoding, GB18030, GBK};

/// What an import reads.
#[derive(Clone, Debug)]
pub enum Input {
    Path(PathBuf),
    Stdin,
}

impl Input {
    pub fn new(arg: &Path) -> Input {
        if arg == Path::new("-") {
            Input::Stdin
        } else {
            Input::Path(arg.to_owned())
        }
    }

    /// As messages name it.
    pub fn name(&self) -> String {
        match self {
            Input::Path(p) => p.display().to_string(),
            Input::Stdin => "standard input".to_owned(),
        }
    }

    /// The extension, lower-cased, if a file has one.
    fn extension(&self) -> Option<String> {
        match self {
            Input::Path(p) => p
                .extension()
                .and_then(|e| e.to_str())
                .map(str::to_ascii_lowercase),
            Input::Stdin => None,
        }
    }

    /// Its size in bytes, when it is a file.
    pub fn size(&self) -> Option<u64> {
        match self {
            Input::Path(p) => std::fs::metadata(p).ok().map(|m| m.len()),
            Input::Stdin => None,
        }
    }

    /// Opened for reading, counting the bytes read into `read`.
    pub fn open(&self, read: Arc<AtomicU64>) -> Result<Counted, Stop> {
        let inner: Box<dyn Read + Send> = match self {
            Input::Path(p) => Box::new(std::fs::File::open(p).map_err(|source| Stop::Open {
                input: self.name(),
                source,
            })?),
            Input::Stdin => Box::new(io::stdin()),
        };
        Ok(Counted { inner, read })
    }
}

/// A reader that counts the bytes it reads, so that progress follows the
/// input rather than the records.
pub struct Counted {
    inner: Box<dyn Read + Send>,
    read: Arc<AtomicU64>,
}

impl Read for Counted {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// What the input holds, as `--format` says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FormatArg {
    /// By the file's extension, else by its first bytes.
    Auto,
    Csv,
    #[value(alias = "jsonl")]
    Ndjson,
    /// A spreadsheet (.xlsx; .xls and .ods are read by the same library).
    Xlsx,
}

/// What the input holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Csv,
    Ndjson,
    Spreadsheet,
}

/// The encoding of a text input, as `--encoding` says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum EncodingArg {
    /// UTF-8 if the text is valid UTF-8, else GB18030 (which GBK is part of).
    Auto,
    #[value(name = "utf-8", alias = "utf8")]
    Utf8,
    Gbk,
    Gb18030,
}

/// Why an import stopped before the end of its input. Never quotes the
/// input's text: it may hold identity numbers.
#[derive(Debug, thiserror::Error)]
pub enum Stop {
    #[error("cannot open {input}: {source}")]
    Open { input: String, source: io::Error },
    #[error("cannot read {input}: {source}")]
    Read { input: String, source: io::Error },
    #[error("line {line} is not valid {encoding}{hint}")]
    Encoding {
        line: u64,
        encoding: &'static str,
        hint: &'static str,
    },
    #[error(
        "the input is UTF-16 (a spreadsheet's \"Unicode text\"): save it as \"CSV UTF-8\", or import the spreadsheet itself"
    )]
    Utf16,
    #[error(
        "the input starts with a UTF-8 byte-order mark, but --encoding says {0}: leave --encoding out, or say utf-8"
    )]
    BomContradicts(&'static str),
    #[error("line {line} is not CSV: {detail}")]
    Csv { line: u64, detail: String },
    #[error("{0}")]
    Columns(String),
    #[error("{0}")]
    Spreadsheet(String),
}

impl Stop {
    /// The input's line at which the import stopped, when one did.
    pub fn line(&self) -> Option<u64> {
        match self {
            Stop::Encoding { line, .. } | Stop::Csv { line, .. } => Some(*line),
            _ => None,
        }
    }
}

/// A spreadsheet file's first bytes: a zip archive (.xlsx, .ods) or an
/// OLE compound file (.xls).
const ZIP_MAGIC: &[u8] = b"PK\x03\x04";
const OLE_MAGIC: &[u8] = b"\xd0\xcf\x11\xe0";
const UTF8_BOM: &[u8] = b"\xef\xbb\xbf";
const GB18030_BOM: &[u8] = b"\x84\x31\x95\x33";
/// How much of an input is read ahead to tell its format.
const SNIFF_BYTES: usize = 64 * 1024;

/// The input's format, said or by extension, else sniffed from its first
/// bytes; and a reader that still yields every byte.
pub fn detect(
    input: &Input,
    format: FormatArg,
    mut reader: Counted,
) -> Result<(Format, Box<dyn Read + Send>), Stop> {
    let said = match format {
        FormatArg::Csv => Some(Format::Csv),
        FormatArg::Ndjson => Some(Format::Ndjson),
        FormatArg::Xlsx => Some(Format::Spreadsheet),
        FormatArg::Auto => match input.extension().as_deref() {
            Some("csv" | "txt") => Some(Format::Csv),
            Some("ndjson" | "jsonl" | "json") => Some(Format::Ndjson),
            Some("xlsx" | "xlsm" | "xlsb" | "xls" | "ods") => Some(Format::Spreadsheet),
            _ => None,
        },
    };
    if let Some(format) = said {
        return Ok((format, Box::new(reader)));
    }
    let mut prefix = Vec::new();
    (&mut reader)
        .take(SNIFF_BYTES as u64)
        .read_to_end(&mut prefix)
        .map_err(|source| Stop::Read {
            input: input.name(),
            source,
        })?;
    let format = sniff(&prefix);
    Ok((format, Box::new(Cursor::new(prefix).chain(reader))))
}

/// A spreadsheet by its magic number; NDJSON if the first byte that is not
/// white space (after a byte-order mark) is `{`; else CSV.
pub fn sniff(prefix: &[u8]) -> Format {
    if prefix.starts_with(ZIP_MAGIC) || prefix.starts_with(OLE_MAGIC) {
        return Format::Spreadsheet;
    }
    let text = prefix.strip_prefix(UTF8_BOM).unwrap_or(prefix);
    match text.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{') => Format::Ndjson,
        _ => Format::Csv,
    }
}

/// Which encoding the lines are read in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Decision {
    /// Only ASCII so far (the same in all three).
    Undecided,
    Utf8 {
        detected: bool,
    },
    Legacy {
        encoding: &'static Encoding,
        detected: bool,
    },
}

/// The lines of a text input, as UTF-8. Splitting at the byte `\n` before
/// decoding is safe in all three encodings: in UTF-8 no byte of a
/// multi-byte character is below 0x80, and in GBK and GB18030 no trailing
/// byte is below 0x30.
pub struct Lines<R> {
    reader: R,
    decision: Decision,
    /// Lines read so far (the number of the last one).
    line: u64,
    raw: Vec<u8>,
    /// For [`Read`]: a decoded line not yet handed out, and how far.
    pending: Vec<u8>,
    at: usize,
}

impl<R: BufRead> Lines<R> {
    pub fn new(reader: R, encoding: EncodingArg) -> Self {
        let decision = match encoding {
            EncodingArg::Auto => Decision::Undecided,
            EncodingArg::Utf8 => Decision::Utf8 { detected: false },
            EncodingArg::Gbk => Decision::Legacy {
                encoding: GBK,
                detected: false,
            },
            EncodingArg::Gb18030 => Decision::Legacy {
                encoding: GB18030,
                detected: false,
            },
        };
        Lines {
            reader,
            decision,
            line: 0,
            raw: Vec::new(),
            pending: Vec::new(),
            at: 0,
        }
    }

    /// Replaces `out` with the next line, as UTF-8 (with its line end, if
    /// it had one); its line number, or None at the end.
    pub fn next_into(&mut self, out: &mut Vec<u8>, input: &str) -> Result<Option<u64>, Stop> {
        out.clear();
        self.raw.clear();
        let n = self
            .reader
            .read_until(b'\n', &mut self.raw)
            .map_err(|source| Stop::Read {
                input: input.to_owned(),
                source,
            })?;
        if n == 0 {
            return Ok(None);
        }
        self.line += 1;
        let buffer = std::mem::take(&mut self.raw);
        let result = self.decode_line(&buffer, out);
        self.raw = buffer;
        result.map(|()| Some(self.line))
    }

    fn decode_line(&mut self, mut raw: &[u8], out: &mut Vec<u8>) -> Result<(), Stop> {
        if self.line == 1 {
            raw = self.strip_byte_order_mark(raw)?;
        }
        self.decode(raw, out)
    }

    /// Takes a byte-order mark off the first line, deciding the encoding.
    fn strip_byte_order_mark<'a>(&mut self, raw: &'a [u8]) -> Result<&'a [u8], Stop> {
        if raw.starts_with(b"\xff\xfe") || raw.starts_with(b"\xfe\xff") {
            return Err(Stop::Utf16);
        }
        if let Some(rest) = raw.strip_prefix(UTF8_BOM) {
            return match self.decision {
                Decision::Legacy { encoding, .. } => Err(Stop::BomContradicts(encoding.name())),
                _ => {
                    self.decision = Decision::Utf8 { detected: true };
                    Ok(rest)
                }
            };
        }
        if let Some(rest) = raw.strip_prefix(GB18030_BOM) {
            if self.decision == Decision::Undecided {
                self.decision = Decision::Legacy {
                    encoding: GB18030,
                    detected: true,
                };
                return Ok(rest);
            }
            if let Decision::Legacy { encoding, .. } = self.decision {
                if encoding == GB18030 {
                    return Ok(rest);
                }
            }
        }
        Ok(raw)
    }

    fn decode(&mut self, raw: &[u8], out: &mut Vec<u8>) -> Result<(), Stop> {
        if raw.is_ascii() {
            out.extend_from_slice(raw);
            return Ok(());
        }
        let line = self.line;
        match self.decision {
            Decision::Undecided => {
                if std::str::from_utf8(raw).is_ok() {
                    self.decision = Decision::Utf8 { detected: true };
                    out.extend_from_slice(raw);
                    return Ok(());
                }
                match GB18030.decode_without_bom_handling_and_without_replacement(raw) {
                    Some(text) => {
                        self.decision = Decision::Legacy {
                            encoding: GB18030,
                            detected: true,
                        };
                        out.extend_from_slice(text.as_bytes());
                        Ok(())
                    }
                    None => Err(Stop::Encoding {
                        line,
                        encoding: "UTF-8, GBK or GB18030",
                        hint: "",
                    }),
                }
            }
            Decision::Utf8 { detected } => {
                if std::str::from_utf8(raw).is_err() {
                    return Err(Stop::Encoding {
                        line,
                        encoding: "UTF-8",
                        hint: if detected {
                            ", though the lines before it were: if the file is GBK or GB18030, say --encoding gb18030"
                        } else {
                            " (--encoding utf-8)"
                        },
                    });
                }
                out.extend_from_slice(raw);
                Ok(())
            }
            Decision::Legacy { encoding, detected } => {
                match encoding.decode_without_bom_handling_and_without_replacement(raw) {
                    Some(text) => {
                        out.extend_from_slice(text.as_bytes());
                        Ok(())
                    }
                    None => Err(Stop::Encoding {
                        line,
                        encoding: encoding.name(),
                        hint: if detected {
                            " (the encoding found from the lines before it)"
                        } else {
                            " (the encoding --encoding says)"
                        },
                    }),
                }
            }
        }
    }
}

/// The decoded text as one stream, for the CSV reader (whose quoted fields
/// may span lines). A [`Stop`] comes out as an I/O error wrapping it.
pub struct Decoded<R> {
    pub lines: Lines<R>,
    input: String,
}

impl<R: BufRead> Decoded<R> {
    pub fn new(lines: Lines<R>, input: String) -> Self {
        Decoded { lines, input }
    }
}

impl<R: BufRead> Read for Decoded<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let lines = &mut self.lines;
        if lines.at == lines.pending.len() {
            let mut pending = std::mem::take(&mut lines.pending);
            let next = lines.next_into(&mut pending, &self.input);
            lines.pending = pending;
            lines.at = 0;
            match next {
                Ok(Some(_)) => {}
                Ok(None) => return Ok(0),
                Err(stop) => return Err(io::Error::other(stop)),
            }
        }
        let n = buf.len().min(lines.pending.len() - lines.at);
        buf[..n].copy_from_slice(&lines.pending[lines.at..lines.at + n]);
        lines.at += n;
        Ok(n)
    }
}

/// The [`Stop`] inside an I/O error from [`Decoded`], or the error as a
/// read failure.
pub fn stop_from_io(e: io::Error, input: &str) -> Stop {
    if e.get_ref().is_some_and(|inner| inner.is::<Stop>()) {
        if let Some(inner) = e.into_inner() {
            if let Ok(stop) = inner.downcast::<Stop>() {
                return *stop;
            }
        }
        // Unreachable: checked above; kept an error rather than a panic.
        return Stop::Read {
            input: input.to_owned(),
            source: io::Error::other("unreadable"),
        };
    }
    Stop::Read {
        input: input.to_owned(),
        source: e,
    }
}

/// A buffered reader over `reader`, large enough that reading is not what
/// an import waits for.
pub fn buffered(reader: Box<dyn Read + Send>) -> BufReader<Box<dyn Read + Send>> {
    BufReader::with_capacity(1 << 20, reader)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn lines_of(bytes: &[u8], encoding: EncodingArg) -> Result<Vec<(u64, String)>, Stop> {
        let mut lines = Lines::new(Cursor::new(bytes.to_vec()), encoding);
        let mut out = Vec::new();
        let mut all = Vec::new();
        while let Some(n) = lines.next_into(&mut out, "test")? {
            all.push((n, String::from_utf8(out.clone()).expect("UTF-8 out")));
        }
        Ok(all)
    }

    fn encoded(text: &str, encoding: &'static Encoding) -> Vec<u8> {
        let (bytes, _, unmappable) = encoding.encode(text);
        assert!(!unmappable, "{text:?} has no {} form", encoding.name());
        bytes.into_owned()
    }

    const CATALOGUE: &str = "档号,题名,年度\nJ001-WS·2023-Y-0001,关于档案数字化的通知,2023\n";

    #[test]
    fn utf8_with_or_without_a_byte_order_mark_gbk_and_gb18030_read_alike() {
        let expected = lines_of(CATALOGUE.as_bytes(), EncodingArg::Utf8).unwrap();
        let mut bom = UTF8_BOM.to_vec();
        bom.extend_from_slice(CATALOGUE.as_bytes());
        for (bytes, said) in [
            (CATALOGUE.as_bytes().to_vec(), EncodingArg::Auto),
            (bom.clone(), EncodingArg::Auto),
            (bom, EncodingArg::Utf8),
            (encoded(CATALOGUE, GBK), EncodingArg::Auto),
            (encoded(CATALOGUE, GBK), EncodingArg::Gbk),
            (encoded(CATALOGUE, GB18030), EncodingArg::Gb18030),
            (encoded(CATALOGUE, GB18030), EncodingArg::Gbk),
        ] {
            assert_eq!(lines_of(&bytes, said).unwrap(), expected, "{said:?}");
        }
    }

    #[test]
    fn a_line_not_in_the_encoding_found_stops_the_import_at_that_line_with_a_hint() {
        let mut bytes = "id,title\nA-1,中文\n".as_bytes().to_vec();
        bytes.extend_from_slice(&encoded("A-2,中文\n", GBK));
        let e = lines_of(&bytes, EncodingArg::Auto).unwrap_err();
        assert_eq!(e.line(), Some(3));
        assert!(e.to_string().contains("--encoding gb18030"), "{e}");
    }

    #[test]
    fn utf16_and_a_byte_order_mark_contradicting_the_encoding_said_are_refused() {
        assert!(matches!(
            lines_of(b"\xff\xfei\x00d\x00", EncodingArg::Auto),
            Err(Stop::Utf16)
        ));
        assert!(matches!(
            lines_of(b"\xef\xbb\xbfid,title\n", EncodingArg::Gbk),
            Err(Stop::BomContradicts("GBK"))
        ));
    }

    #[test]
    fn formats_are_sniffed_from_the_first_bytes() {
        assert_eq!(sniff(b"  \n{\"id\":1}"), Format::Ndjson);
        assert_eq!(sniff(b"\xef\xbb\xbf{\"id\":1}"), Format::Ndjson);
        assert_eq!(sniff(b"id,title\n"), Format::Csv);
        assert_eq!(sniff(b""), Format::Csv);
        assert_eq!(sniff(b"PK\x03\x04rest"), Format::Spreadsheet);
    }

    proptest! {
        /// Text as a catalogue holds it (Chinese, ASCII, the middle dot,
        /// full-width forms, a character only GB18030's four-byte form has).
        #[test]
        fn any_text_reads_the_same_in_every_encoding_it_can_be_written_in(
            text in "([a-zA-Z0-9,;\"·\u{3000}-\u{303f}\u{4e00}-\u{9fa5}\u{ff01}-\u{ff5e}\u{20000}-\u{20010}]{0,20}\n){1,6}",
            bom in any::<bool>(),
        ) {
            let expected = lines_of(text.as_bytes(), EncodingArg::Utf8).unwrap();
            let mut utf8 = if bom { UTF8_BOM.to_vec() } else { Vec::new() };
            utf8.extend_from_slice(text.as_bytes());
            prop_assert_eq!(&lines_of(&utf8, EncodingArg::Auto).unwrap(), &expected);
            let gb = encoded(&text, GB18030);
            prop_assert_eq!(&lines_of(&gb, EncodingArg::Gb18030).unwrap(), &expected);
            // Found from the first line that is not ASCII, unless its
            // GB18030 bytes happen to be valid UTF-8 too (possible for a
            // few short lines; then --encoding must say it).
            let first = gb.split(|b| *b == b'\n').find(|l| !l.is_ascii());
            if first.is_none_or(|l| std::str::from_utf8(l).is_err()) {
                prop_assert_eq!(&lines_of(&gb, EncodingArg::Auto).unwrap(), &expected);
            }
        }
    }
}
