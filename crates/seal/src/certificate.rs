//! A certificate as it leaves the archive: sheets, each a sealed
//! [`CertificateStatement`] small enough for one QR code (version 25 at
//! most, error correction M: readable printed on A4), written as the EU
//! Digital COVID Certificate writes its payload: a prefix, then the COSE
//! bytes compressed (zlib) and in base45 (RFC 9285), whose alphabet is the
//! QR code's own alphanumeric set. Compressed, a version 25 code holds
//! four copies where it held two (the request and archives a copy names
//! repeat from copy to copy). The verification code printed on every sheet names
//! the issuing archive, so that any archive of the cluster knows whom to
//! ask about it.

use qrcode::{EcLevel, QrCode, Version};

use crate::key::SecretKey;
use crate::sealed;
use crate::statement::{CertificateStatement, NotProvided};

/// What every payload begins with (the form's version in its name).
pub const PREFIX: &str = "XA1:";
/// The largest QR code a sheet carries, and its error correction.
pub const MAX_QR_VERSION: i16 = 25;
pub const QR_EC_LEVEL: EcLevel = EcLevel::M;
/// Rows (copies and what was not provided) on one sheet: what its table
/// holds on A4 beside the QR code.
pub const MAX_ROWS_PER_SHEET: usize = 6;

/// The most a payload may expand to: far more than a version 25 QR code
/// holds compressed, so that a crafted payload cannot fill memory.
const MAX_SEALED_BYTES: u64 = 64 * 1024;

/// Hex digits of the random part of a verification code: 80 bits, too
/// many to guess one (a code found gives the applicant's name).
const CODE_DIGITS: usize = 20;

/// A certificate's payload: the sealed statement of one sheet.
pub struct Payload {
    pub sealed: Vec<u8>,
}

impl Payload {
    /// Reads a payload as a QR code or a person gives it: line breaks and
    /// tabs (as a printout or a reader wraps it) left out. Spaces stay:
    /// base45's alphabet has one.
    pub fn parse(text: &str) -> Result<Payload, String> {
        use std::io::Read;
        let text: String = text
            .chars()
            .filter(|c| !matches!(c, '\n' | '\r' | '\t'))
            .collect();
        let Some(body) = text.strip_prefix(PREFIX) else {
            return Err(format!("a certificate's payload begins with {PREFIX}"));
        };
        let compressed = base45::decode(body)
            .map_err(|_| "the payload is not base45 (cut short, or mistyped?)".to_owned())?;
        let mut sealed = Vec::new();
        flate2::read::ZlibDecoder::new(compressed.as_slice())
            .take(MAX_SEALED_BYTES + 1)
            .read_to_end(&mut sealed)
            .map_err(|_| "the payload does not decompress (cut short, or changed?)".to_owned())?;
        if sealed.len() as u64 > MAX_SEALED_BYTES {
            return Err("the payload expands to more than a certificate holds".into());
        }
        Ok(Payload { sealed })
    }

    pub fn text(sealed: &[u8]) -> String {
        use std::io::Write;
        let mut zlib = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
        // Writing into a Vec cannot fail.
        let _ = zlib.write_all(sealed);
        let compressed = zlib.finish().unwrap_or_default();
        format!("{PREFIX}{}", base45::encode(&compressed))
    }
}

/// A new verification code of a certificate `issuer` issues:
/// `ISSUER.XXXX-XXXX-XXXX-XXXX-XXXX`.
pub fn new_code(issuer: &str) -> String {
    let digits = hex::encode_upper(rand::random::<[u8; CODE_DIGITS / 2]>());
    format!("{issuer}.{}", group(&digits))
}

/// A code as [`new_code`] writes it, whatever the case and separators of
/// its hex part (a person types it from paper); `None` if it cannot be one.
/// The issuer is returned apart: it says which archive to ask.
pub fn normalise_code(typed: &str) -> Option<(String, String)> {
    let (issuer, digits) = typed.trim().rsplit_once('.')?;
    let digits: String = digits
        .chars()
        .filter(|c| !matches!(c, '-' | ' '))
        .map(|c| c.to_ascii_uppercase())
        .collect();
    let issuer_ok = !issuer.is_empty()
        && issuer.len() <= 64
        && issuer
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    (issuer_ok && digits.len() == CODE_DIGITS && digits.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| (issuer.to_owned(), format!("{issuer}.{}", group(&digits))))
}

fn group(digits: &str) -> String {
    digits
        .as_bytes()
        .chunks(4)
        .map(String::from_utf8_lossy)
        .collect::<Vec<_>>()
        .join("-")
}

/// The QR code of `payload`, if it fits [`MAX_QR_VERSION`].
pub fn qr(payload: &str) -> Option<QrCode> {
    let bits = qr_bits(payload)?;
    QrCode::with_bits(bits, QR_EC_LEVEL).ok()
}

/// `payload` encoded for the smallest QR version that holds it, if that is
/// at most [`MAX_QR_VERSION`]: what deciding whether it fits costs, without
/// drawing the code (choosing its mask is most of a QR code's time).
fn qr_bits(payload: &str) -> Option<qrcode::bits::Bits> {
    let bits = qrcode::bits::encode_auto(payload.as_bytes(), QR_EC_LEVEL).ok()?;
    matches!(bits.version(), Version::Normal(v) if v <= MAX_QR_VERSION).then_some(bits)
}

/// One sealed sheet; its QR code is [`qr`] of its payload.
pub struct Sheet {
    pub statement: CertificateStatement,
    /// As its QR code holds it.
    pub payload: String,
}

/// What does not fit a sheet even alone.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("one entry of the certificate is too large for a QR code of version {MAX_QR_VERSION}")]
pub struct TooLarge;

/// What goes on a sheet: a sealed copy or something not provided.
enum Row {
    Copy(Vec<u8>),
    NotProvided(NotProvided),
}

/// Seals the certificate `head` (its fields but copies, what was not
/// provided and sheet numbers) with `key`, its rows spread over as many
/// sheets as their QR codes need, in order, [`MAX_ROWS_PER_SHEET`] at most
/// on each; a certificate with no rows is one sheet.
pub fn seal_sheets(
    head: &CertificateStatement,
    copies: Vec<Vec<u8>>,
    not_provided: Vec<NotProvided>,
    key: &SecretKey,
) -> Result<Vec<Sheet>, TooLarge> {
    let rows: Vec<Row> = copies
        .into_iter()
        .map(Row::Copy)
        .chain(not_provided.into_iter().map(Row::NotProvided))
        .collect();
    let statement = |rows: &[&Row], sheet: u32, sheets: u32| {
        let mut s = head.clone();
        s.copies.clear();
        s.not_provided.clear();
        for row in rows {
            match row {
                Row::Copy(c) => s.copies.push(c.clone()),
                Row::NotProvided(n) => s.not_provided.push(n.clone()),
            }
        }
        s.sheet = sheet;
        s.sheets = sheets;
        s
    };
    let fits = |rows: &[&Row]| {
        // Sheet numbers as large as they could be, so that the final
        // numbering cannot make a sheet outgrow its code.
        let probe = statement(rows, 255, 255);
        qr_bits(&Payload::text(&sealed::seal(key, probe.encode()))).is_some()
    };
    let mut groups: Vec<Vec<&Row>> = vec![Vec::new()];
    for row in &rows {
        let mut candidate = groups.last().cloned().unwrap_or_default();
        candidate.push(row);
        if candidate.len() <= MAX_ROWS_PER_SHEET && fits(&candidate) {
            if let Some(last) = groups.last_mut() {
                *last = candidate;
            }
            continue;
        }
        if !fits(&[row]) {
            return Err(TooLarge);
        }
        groups.push(vec![row]);
    }
    if groups.len() > 1 && groups[0].is_empty() {
        groups.remove(0);
    }
    let sheets = u32::try_from(groups.len()).map_err(|_| TooLarge)?;
    groups
        .iter()
        .zip(1..)
        .map(|(rows, n)| {
            let statement = statement(rows, n, sheets);
            let payload = Payload::text(&sealed::seal(key, statement.encode()));
            qr_bits(&payload).ok_or(TooLarge)?;
            Ok(Sheet { statement, payload })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::Algorithm;
    use crate::statement::{sealed_title, sha256, CopyStatement};
    use crate::trust::{ArchiveEntry, KeyRecord, TrustList};
    use crate::verify::{verify_certificate, Rejected};

    pub(crate) fn head(issuer: &str) -> CertificateStatement {
        CertificateStatement {
            issuer: issuer.into(),
            code: new_code(issuer),
            request_id: "0123456789abcdef0123456789abcdef".into(),
            issued: 1_800_000_000,
            applicant_name: "张三".into(),
            applicant_digest: "ab".repeat(16),
            purpose: "贷款".into(),
            searched_by: Some("id_card".into()),
            copies: Vec::new(),
            not_provided: Vec::new(),
            sheet: 1,
            sheets: 1,
        }
    }

    pub(crate) fn copy(
        holding: &SecretKey,
        name: &str,
        issuer: &str,
        title: &str,
        n: usize,
    ) -> Vec<u8> {
        let (title, title_sha256) = sealed_title(title);
        let statement = CopyStatement {
            holding: name.into(),
            receiving: issuer.into(),
            request_id: "0123456789abcdef0123456789abcdef".into(),
            archive_number: format!("J201-CW·2010-Y-{n:05}"),
            title,
            title_sha256,
            record_date: Some("2007-05-01".into()),
            released: 1_799_999_000,
            content_sha256: Some(sha256(format!("content {n}").as_bytes())),
            metadata_sha256: sha256(format!("{{\"n\": {n}}}").as_bytes()),
        };
        sealed::seal(holding, statement.encode())
    }

    pub(crate) fn trust(keys: &[(&str, &SecretKey)]) -> TrustList {
        let archives = keys
            .iter()
            .map(|(name, key)| ArchiveEntry {
                domain: (*name).into(),
                display_name: format!("{name}档案馆"),
                address: String::new(),
                url: String::new(),
                keys: vec![KeyRecord::new(
                    &key.public(),
                    time::OffsetDateTime::from_unix_timestamp(1_700_000_000).unwrap(),
                )],
            })
            .collect();
        TrustList::new("c", true, archives)
    }

    #[test]
    fn codes_name_their_issuer_and_read_back_however_typed() {
        let code = new_code("52-2301");
        let (issuer, normal) = normalise_code(&code).unwrap();
        assert_eq!(
            (issuer.as_str(), normal.as_str()),
            ("52-2301", code.as_str())
        );
        let typed = code.to_lowercase().replace('-', " ").replacen(' ', "-", 1);
        assert_eq!(normalise_code(&typed).map(|c| c.1), Some(code.clone()));
        assert_eq!(normalise_code("7F3C-8E21-0A9D-44C1-D2E5"), None);
        assert_eq!(normalise_code("../x.7F3C-8E21-0A9D-44C1-D2E5"), None);
        assert_eq!(normalise_code("A.7F3C"), None);
    }

    #[test]
    fn many_copies_with_long_titles_spread_over_sheets_each_checking_alone_within_the_qr_limit() {
        let a = SecretKey::generate(Algorithm::Sm2Sm3);
        let b = SecretKey::generate(Algorithm::Sm2Sm3);
        let copies = (0..9)
            .map(|n| copy(&b, "B", "A", &"长题名".repeat(40), n))
            .collect();
        let refused = NotProvided {
            holding: Some("C".into()),
            records: vec!["C-1".into()],
            why: "refused".into(),
            reason: Some("涉及第三人隐私".into()),
        };
        let sheets = seal_sheets(&head("A"), copies, vec![refused], &a).unwrap();
        assert!(sheets.len() >= 2, "{} sheets", sheets.len());
        let trust = trust(&[("A", &a), ("B", &b)]);
        let mut seen = 0;
        for (n, sheet) in sheets.iter().enumerate() {
            let code = qr(&sheet.payload).unwrap();
            assert!(matches!(code.version(), Version::Normal(v) if v <= MAX_QR_VERSION));
            let verified = verify_certificate(&sheet.payload, &trust).unwrap();
            assert_eq!(verified.statement.sheet as usize, n + 1);
            assert_eq!(verified.statement.sheets as usize, sheets.len());
            assert_eq!(verified.statement.code, sheets[0].statement.code);
            seen += verified.copies.len();
        }
        assert_eq!(seen, 9);
        assert_eq!(sheets.last().unwrap().statement.not_provided.len(), 1);
    }

    #[test]
    fn a_certificate_sealed_after_its_key_was_rotated_out_or_before_it_was_valid_is_refused() {
        let a = SecretKey::generate(Algorithm::Sm2Sm3);
        let sheet = seal_sheets(&head("A"), Vec::new(), Vec::new(), &a)
            .unwrap()
            .remove(0);
        let mut trust = trust(&[("A", &a)]);
        // Rotated out before the certificate's date (1 800 000 000).
        trust.archives[0].keys[0].not_after = Some(crate::trust::format_time(1_750_000_000));
        let e = verify_certificate(&sheet.payload, &trust).unwrap_err();
        assert!(matches!(e, Rejected::KeyNotValid { .. }), "{e}");
        assert_eq!((e.exit_code(), e.code()), (5, "certificate_key_not_valid"));
        // Valid only from after it.
        trust.archives[0].keys[0].not_after = None;
        trust.archives[0].keys[0].not_before = crate::trust::format_time(1_900_000_000);
        assert!(matches!(
            verify_certificate(&sheet.payload, &trust),
            Err(Rejected::KeyNotValid { .. })
        ));
    }

    #[test]
    fn a_certificate_with_nothing_on_it_is_one_sheet() {
        let a = SecretKey::generate(Algorithm::Sm2Sm3);
        let sheets = seal_sheets(&head("A"), Vec::new(), Vec::new(), &a).unwrap();
        assert_eq!(sheets.len(), 1);
        let verified = verify_certificate(&sheets[0].payload, &trust(&[("A", &a)])).unwrap();
        assert!(verified.copies.is_empty());
    }

    #[test]
    fn a_payload_cut_short_changed_or_signed_by_a_stranger_is_refused_saying_why() {
        let a = SecretKey::generate(Algorithm::Sm2Sm3);
        let b = SecretKey::generate(Algorithm::Ed25519);
        let sheet = seal_sheets(
            &head("A"),
            vec![copy(&b, "B", "A", "婚姻登记", 1)],
            Vec::new(),
            &a,
        )
        .unwrap()
        .remove(0);
        let trust = trust(&[("A", &a), ("B", &b)]);
        assert!(verify_certificate(&sheet.payload, &trust).is_ok());
        let cut = &sheet.payload[..sheet.payload.len() - 7];
        assert!(matches!(
            verify_certificate(cut, &trust),
            Err(Rejected::Malformed(_))
        ));
        assert!(matches!(
            verify_certificate("hello", &trust),
            Err(Rejected::Malformed(_))
        ));

        // The applicant's name changed and the payload sealed again by a
        // key the trust list does not hold.
        let forger = SecretKey::generate(Algorithm::Sm2Sm3);
        let mut changed = sheet.statement.clone();
        changed.applicant_name = "李四".into();
        let forged = Payload::text(&sealed::seal(&forger, changed.encode()));
        assert!(matches!(
            verify_certificate(&forged, &trust),
            Err(Rejected::UnknownKey(_))
        ));
        // Changed under the real seal: the seal no longer matches.
        let mut sealed = Payload::parse(&sheet.payload).unwrap().sealed;
        let at = sealed
            .windows("张三".len())
            .position(|w| w == "张三".as_bytes())
            .unwrap();
        sealed[at..at + "李四".len()].copy_from_slice("李四".as_bytes());
        let changed = Payload::text(&sealed);
        assert_eq!(
            verify_certificate(&changed, &trust)
                .unwrap_err()
                .exit_code(),
            1
        );
        // A copy sealed for another issuer's certificate.
        let stray = copy(&b, "B", "C", "婚姻登记", 2);
        let sheet = seal_sheets(&head("A"), vec![stray], Vec::new(), &a)
            .unwrap()
            .remove(0);
        assert!(matches!(
            verify_certificate(&sheet.payload, &trust),
            Err(Rejected::Mismatch(_))
        ));
    }
}
