//! What archives seal, as CBOR arrays (compact enough for a QR code, and
//! read by position in the browser, `web/seal.js`): a holding archive's
//! copy of a record and its answer to a request, and a receiving
//! archive's certificate. Each begins with its kind; docs/FORMAT.md gives
//! every position.

use ciborium::Value;
use sha2::{Digest, Sha256};

/// The kinds, first in each array.
pub const COPY: &str = "xarchive copy/1";
pub const ANSWER: &str = "xarchive answer/1";
pub const CERTIFICATE: &str = "xarchive certificate/1";

/// Characters of a title sealed as it is; a longer one is sealed cut
/// there (ending in "…") beside the SHA-256 of the whole, so that a
/// certificate's QR code holds a few copies whatever their titles.
pub const SEALED_TITLE_CHARS: usize = 60;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a {kind}: {why}")]
pub struct Unreadable {
    pub kind: &'static str,
    pub why: String,
}

/// A record's copy as its holding archive seals it for one request: what a
/// certificate prints, and digests of the rest (its metadata and content
/// travel beside it and are checked against them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CopyStatement {
    pub holding: String,
    pub receiving: String,
    pub request_id: String,
    pub archive_number: String,
    /// As sealed: whole, or cut at [`SEALED_TITLE_CHARS`].
    pub title: String,
    /// The whole title's SHA-256, when `title` was cut.
    pub title_sha256: Option<[u8; 32]>,
    /// The record's own date, as its catalogue gives it.
    pub record_date: Option<String>,
    /// When the holding archive released it (seconds since the Unix epoch).
    pub released: i64,
    pub content_sha256: Option<[u8; 32]>,
    /// SHA-256 of the metadata's JSON as it travels.
    pub metadata_sha256: [u8; 32],
}

/// A holding archive's answer to one part of a request: every field the
/// receiving archive keeps, so that nothing a party on the wire changes
/// is kept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AnswerStatement {
    pub holding: String,
    pub receiving: String,
    pub request_id: String,
    /// `pending`, `in_review`, `released`, `refused` or `none_held`.
    pub state: String,
    pub reason: Option<String>,
    pub records: Vec<String>,
    pub missing: Vec<String>,
    /// The SHA-256 of each copy's sealed bytes, in order.
    pub copies: Vec<[u8; 32]>,
    /// When it was sealed (seconds since the Unix epoch).
    pub at: i64,
}

/// What a certificate says was not provided, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotProvided {
    /// The archive that was asked; none for records no archive holds.
    pub holding: Option<String>,
    pub records: Vec<String>,
    /// `refused` (then `reason` is the holding archive's), `not_held` or
    /// `held_nowhere`.
    pub why: String,
    pub reason: Option<String>,
}

/// One sheet of a certificate, sealed by the receiving archive that issued
/// it: who asked, for what, and every copy on the sheet as its holding
/// archive sealed it, so that the sheet is checked offline whole.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertificateStatement {
    pub issuer: String,
    /// Its verification code, printed on every sheet
    /// (`certificate::new_code`): the same on each sheet.
    pub code: String,
    pub request_id: String,
    /// When it was issued (seconds since the Unix epoch).
    pub issued: i64,
    pub applicant_name: String,
    /// The keyed digest of the applicant's identity number (as the audit
    /// logs write it): binds the certificate to the person without the
    /// number.
    pub applicant_digest: String,
    pub purpose: String,
    /// The key type the records were searched by (the applicant's identity
    /// number), or none when the clerk named the records.
    pub searched_by: Option<String>,
    /// The sealed copies on this sheet (each a `COSE_Sign1` of a
    /// [`CopyStatement`]).
    pub copies: Vec<Vec<u8>>,
    pub not_provided: Vec<NotProvided>,
    /// This sheet's number, from 1, and how many there are.
    pub sheet: u32,
    pub sheets: u32,
}

pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// `title` as a copy seals it: whole, or cut with the whole one's digest.
pub fn sealed_title(title: &str) -> (String, Option<[u8; 32]>) {
    if title.chars().count() <= SEALED_TITLE_CHARS {
        return (title.to_owned(), None);
    }
    let cut: String = title.chars().take(SEALED_TITLE_CHARS - 1).collect();
    (format!("{cut}…"), Some(sha256(title.as_bytes())))
}

fn text(s: &str) -> Value {
    Value::Text(s.to_owned())
}

fn opt_text(s: Option<&str>) -> Value {
    s.map_or(Value::Null, text)
}

fn digest(d: Option<&[u8; 32]>) -> Value {
    d.map_or(Value::Null, |d| Value::Bytes(d.to_vec()))
}

fn texts(list: &[String]) -> Value {
    Value::Array(list.iter().map(|s| text(s)).collect())
}

fn encode(items: Vec<Value>) -> Vec<u8> {
    let mut out = Vec::new();
    // Writing CBOR into a Vec cannot fail.
    let _ = ciborium::into_writer(&Value::Array(items), &mut out);
    out
}

/// Reads the fields of one array statement of `kind`, in order.
struct Fields {
    kind: &'static str,
    items: std::vec::IntoIter<Value>,
    at: usize,
}

impl Fields {
    fn open(kind: &'static str, bytes: &[u8], len: usize) -> Result<Fields, Unreadable> {
        let bad = |why: String| Unreadable { kind, why };
        let value: Value = ciborium::from_reader(bytes).map_err(|e| bad(e.to_string()))?;
        let Value::Array(items) = value else {
            return Err(bad("not an array".into()));
        };
        if items.len() != len {
            return Err(bad(format!("{} fields, not {len}", items.len())));
        }
        let mut fields = Fields::new(kind, items);
        if fields.text()? != kind {
            return Err(bad("of another kind".into()));
        }
        Ok(fields)
    }

    fn new(kind: &'static str, items: Vec<Value>) -> Fields {
        Fields {
            kind,
            items: items.into_iter(),
            at: 0,
        }
    }

    fn bad(&self, what: &str) -> Unreadable {
        Unreadable {
            kind: self.kind,
            why: format!("field {} is not {what}", self.at),
        }
    }

    fn next(&mut self) -> Value {
        self.at += 1;
        self.items.next().unwrap_or(Value::Null)
    }

    fn text(&mut self) -> Result<String, Unreadable> {
        match self.next() {
            Value::Text(s) => Ok(s),
            _ => Err(self.bad("text")),
        }
    }

    fn opt_text(&mut self) -> Result<Option<String>, Unreadable> {
        match self.next() {
            Value::Text(s) => Ok(Some(s)),
            Value::Null => Ok(None),
            _ => Err(self.bad("text or null")),
        }
    }

    fn int(&mut self) -> Result<i64, Unreadable> {
        match self.next() {
            Value::Integer(i) => i64::try_from(i).map_err(|_| self.bad("an integer")),
            _ => Err(self.bad("an integer")),
        }
    }

    fn bytes(&mut self) -> Result<Vec<u8>, Unreadable> {
        match self.next() {
            Value::Bytes(b) => Ok(b),
            _ => Err(self.bad("bytes")),
        }
    }

    fn digest_of(&self, bytes: Vec<u8>) -> Result<[u8; 32], Unreadable> {
        bytes.try_into().map_err(|_| self.bad("a SHA-256"))
    }

    fn digest(&mut self) -> Result<[u8; 32], Unreadable> {
        let bytes = self.bytes()?;
        self.digest_of(bytes)
    }

    fn opt_digest(&mut self) -> Result<Option<[u8; 32]>, Unreadable> {
        match self.next() {
            Value::Null => Ok(None),
            Value::Bytes(b) => self.digest_of(b).map(Some),
            _ => Err(self.bad("a SHA-256 or null")),
        }
    }

    fn array(&mut self) -> Result<Vec<Value>, Unreadable> {
        match self.next() {
            Value::Array(items) => Ok(items),
            _ => Err(self.bad("an array")),
        }
    }

    fn texts(&mut self) -> Result<Vec<String>, Unreadable> {
        let items = self.array()?;
        items
            .into_iter()
            .map(|v| match v {
                Value::Text(s) => Ok(s),
                _ => Err(self.bad("an array of text")),
            })
            .collect()
    }
}

impl CopyStatement {
    pub fn encode(&self) -> Vec<u8> {
        encode(vec![
            text(COPY),
            text(&self.holding),
            text(&self.receiving),
            text(&self.request_id),
            text(&self.archive_number),
            text(&self.title),
            digest(self.title_sha256.as_ref()),
            opt_text(self.record_date.as_deref()),
            Value::Integer(self.released.into()),
            digest(self.content_sha256.as_ref()),
            Value::Bytes(self.metadata_sha256.to_vec()),
        ])
    }

    pub fn decode(bytes: &[u8]) -> Result<CopyStatement, Unreadable> {
        let mut f = Fields::open(COPY, bytes, 11)?;
        Ok(CopyStatement {
            holding: f.text()?,
            receiving: f.text()?,
            request_id: f.text()?,
            archive_number: f.text()?,
            title: f.text()?,
            title_sha256: f.opt_digest()?,
            record_date: f.opt_text()?,
            released: f.int()?,
            content_sha256: f.opt_digest()?,
            metadata_sha256: f.digest()?,
        })
    }
}

impl AnswerStatement {
    pub fn encode(&self) -> Vec<u8> {
        encode(vec![
            text(ANSWER),
            text(&self.holding),
            text(&self.receiving),
            text(&self.request_id),
            text(&self.state),
            opt_text(self.reason.as_deref()),
            texts(&self.records),
            texts(&self.missing),
            Value::Array(
                self.copies
                    .iter()
                    .map(|d| Value::Bytes(d.to_vec()))
                    .collect(),
            ),
            Value::Integer(self.at.into()),
        ])
    }

    pub fn decode(bytes: &[u8]) -> Result<AnswerStatement, Unreadable> {
        let mut f = Fields::open(ANSWER, bytes, 10)?;
        let holding = f.text()?;
        let receiving = f.text()?;
        let request_id = f.text()?;
        let state = f.text()?;
        let reason = f.opt_text()?;
        let records = f.texts()?;
        let missing = f.texts()?;
        let copies = f
            .array()?
            .into_iter()
            .map(|v| match v {
                Value::Bytes(b) => f.digest_of(b),
                _ => Err(f.bad("an array of SHA-256")),
            })
            .collect::<Result<_, _>>()?;
        Ok(AnswerStatement {
            holding,
            receiving,
            request_id,
            state,
            reason,
            records,
            missing,
            copies,
            at: f.int()?,
        })
    }
}

impl CertificateStatement {
    pub fn encode(&self) -> Vec<u8> {
        let not_provided = self
            .not_provided
            .iter()
            .map(|n| {
                Value::Array(vec![
                    opt_text(n.holding.as_deref()),
                    texts(&n.records),
                    text(&n.why),
                    opt_text(n.reason.as_deref()),
                ])
            })
            .collect();
        encode(vec![
            text(CERTIFICATE),
            text(&self.issuer),
            text(&self.code),
            text(&self.request_id),
            Value::Integer(self.issued.into()),
            text(&self.applicant_name),
            text(&self.applicant_digest),
            text(&self.purpose),
            opt_text(self.searched_by.as_deref()),
            Value::Array(
                self.copies
                    .iter()
                    .map(|c| Value::Bytes(c.clone()))
                    .collect(),
            ),
            Value::Array(not_provided),
            Value::Integer(self.sheet.into()),
            Value::Integer(self.sheets.into()),
        ])
    }

    pub fn decode(bytes: &[u8]) -> Result<CertificateStatement, Unreadable> {
        let mut f = Fields::open(CERTIFICATE, bytes, 13)?;
        let issuer = f.text()?;
        let code = f.text()?;
        let request_id = f.text()?;
        let issued = f.int()?;
        let applicant_name = f.text()?;
        let applicant_digest = f.text()?;
        let purpose = f.text()?;
        let searched_by = f.opt_text()?;
        let copies = f
            .array()?
            .into_iter()
            .map(|v| match v {
                Value::Bytes(b) => Ok(b),
                _ => Err(f.bad("an array of sealed copies")),
            })
            .collect::<Result<_, _>>()?;
        let mut not_provided = Vec::new();
        for item in f.array()? {
            let mut n = match item {
                Value::Array(items) if items.len() == 4 => Fields::new(CERTIFICATE, items),
                _ => return Err(f.bad("an array of what was not provided")),
            };
            not_provided.push(NotProvided {
                holding: n.opt_text()?,
                records: n.texts()?,
                why: n.text()?,
                reason: n.opt_text()?,
            });
        }
        let sheet = u32::try_from(f.int()?).map_err(|_| f.bad("a sheet number"))?;
        let sheets = u32::try_from(f.int()?).map_err(|_| f.bad("a sheet count"))?;
        if sheet == 0 || sheet > sheets {
            return Err(f.bad("a sheet within the count"));
        }
        Ok(CertificateStatement {
            issuer,
            code,
            request_id,
            issued,
            applicant_name,
            applicant_digest,
            purpose,
            searched_by,
            copies,
            not_provided,
            sheet,
            sheets,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn copy() -> CopyStatement {
        CopyStatement {
            holding: "B".into(),
            receiving: "A".into(),
            request_id: "00ff".into(),
            archive_number: "J201-CW·2010-Y-00042".into(),
            title: "婚姻登记".into(),
            title_sha256: None,
            record_date: Some("2007-05-01".into()),
            released: 1_790_000_000,
            content_sha256: Some([7; 32]),
            metadata_sha256: [9; 32],
        }
    }

    fn certificate() -> CertificateStatement {
        CertificateStatement {
            issuer: "A".into(),
            code: "A.7F3C-8E21-0A9D-44C1-D2E5".into(),
            request_id: "00ff".into(),
            issued: 1_790_000_100,
            applicant_name: "张三".into(),
            applicant_digest: "ab".repeat(16),
            purpose: "贷款".into(),
            searched_by: Some("id_card".into()),
            copies: vec![vec![1, 2, 3]],
            not_provided: vec![NotProvided {
                holding: Some("C".into()),
                records: vec!["C-1".into()],
                why: "refused".into(),
                reason: Some("涉及第三人隐私".into()),
            }],
            sheet: 1,
            sheets: 2,
        }
    }

    #[test]
    fn each_statement_reads_back_as_written_and_not_as_another_kind() {
        let c = copy();
        assert_eq!(CopyStatement::decode(&c.encode()), Ok(c.clone()));
        let a = AnswerStatement {
            holding: "B".into(),
            receiving: "A".into(),
            request_id: "00ff".into(),
            state: "refused".into(),
            reason: Some("涉及第三人隐私".into()),
            records: vec!["C-1".into()],
            missing: vec![],
            copies: vec![[1; 32]],
            at: 5,
        };
        assert_eq!(AnswerStatement::decode(&a.encode()), Ok(a.clone()));
        let cert = certificate();
        assert_eq!(CertificateStatement::decode(&cert.encode()), Ok(cert));
        assert!(AnswerStatement::decode(&c.encode()).is_err());
        assert!(CopyStatement::decode(&a.encode()).is_err());
        let mut wrong_sheet = certificate();
        wrong_sheet.sheet = 3;
        assert!(CertificateStatement::decode(&wrong_sheet.encode()).is_err());
    }

    #[test]
    fn a_long_title_is_sealed_cut_with_the_whole_one_s_digest() {
        let short = "婚姻登记";
        assert_eq!(sealed_title(short), (short.to_owned(), None));
        let long = "档".repeat(200);
        let (cut, digest) = sealed_title(&long);
        assert_eq!(cut.chars().count(), SEALED_TITLE_CHARS);
        assert!(cut.ends_with('…'));
        assert_eq!(digest, Some(sha256(long.as_bytes())));
    }

    proptest! {
        #[test]
        fn no_bytes_whatever_they_are_crash_a_reader(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = CopyStatement::decode(&bytes);
            let _ = AnswerStatement::decode(&bytes);
            let _ = CertificateStatement::decode(&bytes);
        }

        #[test]
        fn a_copy_with_any_text_reads_back(title in ".{0,80}", number in ".{1,40}", date in proptest::option::of(".{0,12}")) {
            let mut c = copy();
            c.title = title;
            c.archive_number = number;
            c.record_date = date;
            prop_assert_eq!(CopyStatement::decode(&c.encode()), Ok(c));
        }
    }
}
