//! Checking sealed statements against a trust list, with nothing else: a
//! receiving archive checks what a holding archive sealed; anyone checks a
//! certificate offline (the CLI, the page, a bank's own tool). Each way a
//! check fails has its own [`Rejected`], a stable code for the API and an
//! exit code for the command line.

use crate::certificate::{self, Payload};
use crate::sealed::{Opened, SealError};
use crate::statement::{AnswerStatement, CertificateStatement, CopyStatement, Unreadable};
use crate::trust::{ArchiveEntry, KeyNotValid, TrustList};
use crate::KeyId;

/// Why something sealed was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Rejected {
    #[error("not a certificate or sealed statement: {0}")]
    Malformed(String),
    #[error("sealed by the key {0}, which the trust list does not hold (an older list? save the current one)")]
    UnknownKey(KeyId),
    #[error("sealed by the key {key} of {archive}, which may not be trusted for it: {why}")]
    KeyNotValid {
        key: KeyId,
        archive: String,
        why: KeyNotValid,
    },
    #[error("the seal of {0} does not match what is sealed: it was changed after it was sealed")]
    Changed(String),
    #[error("{0}")]
    Mismatch(String),
}

impl Rejected {
    /// The API's error code for it (docs/API.md).
    pub fn code(&self) -> &'static str {
        match self {
            Rejected::Malformed(_) => "certificate_malformed",
            Rejected::UnknownKey(_) => "certificate_key_unknown",
            Rejected::KeyNotValid { .. } => "certificate_key_not_valid",
            Rejected::Changed(_) | Rejected::Mismatch(_) => "certificate_invalid",
        }
    }

    /// `xarchive certificate verify`'s exit code for it (its manual page:
    /// 1 changed, 3 a key not in the trust list, 5 a key not valid for it,
    /// 7 not a certificate; 6 is the trust list's own failure).
    pub fn exit_code(&self) -> u8 {
        match self {
            Rejected::Changed(_) | Rejected::Mismatch(_) => 1,
            Rejected::UnknownKey(_) => 3,
            Rejected::KeyNotValid { .. } => 5,
            Rejected::Malformed(_) => 7,
        }
    }
}

impl From<Unreadable> for Rejected {
    fn from(e: Unreadable) -> Self {
        Rejected::Malformed(e.to_string())
    }
}

/// Opens `sealed` and checks it under the key its header names, which the
/// trust list must hold, valid at the time `at` reads from the statement
/// (the key's owner is returned: the caller checks it is who the
/// statement names).
fn check<'t, T>(
    sealed: &[u8],
    trust: &'t TrustList,
    decode: impl FnOnce(&[u8]) -> Result<T, Unreadable>,
    at: impl FnOnce(&T) -> i64,
) -> Result<(T, &'t ArchiveEntry, Opened), Rejected> {
    let opened = Opened::parse(sealed).map_err(|e| Rejected::Malformed(e.to_string()))?;
    let (archive, record) = trust
        .key(opened.key)
        .ok_or(Rejected::UnknownKey(opened.key))?;
    let key = record
        .public()
        .map_err(|e| Rejected::Malformed(e.to_string()))?;
    opened.verify(&key).map_err(|e| match e {
        SealError::Forged(_) => Rejected::Changed(archive.name().to_owned()),
        e => Rejected::Malformed(e.to_string()),
    })?;
    let statement = decode(&opened.payload)?;
    record
        .valid_at(at(&statement))
        .map_err(|why| Rejected::KeyNotValid {
            key: opened.key,
            archive: archive.name().to_owned(),
            why,
        })?;
    Ok((statement, archive, opened))
}

/// A copy as its holding archive sealed it, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifiedCopy {
    pub statement: CopyStatement,
    /// The holding archive, as the trust list names it.
    pub holding: ArchiveEntry,
}

/// Checks a sealed copy: sealed by the archive it names as holding it,
/// under a key valid when it was released.
pub fn verify_copy(sealed: &[u8], trust: &TrustList) -> Result<VerifiedCopy, Rejected> {
    let (statement, archive, _) = check(sealed, trust, CopyStatement::decode, |c| c.released)?;
    if statement.holding != archive.domain {
        return Err(Rejected::Mismatch(format!(
            "a copy says it is from {}, but {} sealed it",
            statement.holding, archive.domain
        )));
    }
    Ok(VerifiedCopy {
        statement,
        holding: archive.clone(),
    })
}

/// Checks a holding archive's sealed answer: sealed by the archive it
/// names as holding, under a key valid when it was sealed.
pub fn verify_answer(sealed: &[u8], trust: &TrustList) -> Result<AnswerStatement, Rejected> {
    let (statement, archive, _) = check(sealed, trust, AnswerStatement::decode, |a| a.at)?;
    if statement.holding != archive.domain {
        return Err(Rejected::Mismatch(format!(
            "an answer says it is from {}, but {} sealed it",
            statement.holding, archive.domain
        )));
    }
    Ok(statement)
}

/// A certificate's sheet, checked whole.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifiedCertificate {
    pub statement: CertificateStatement,
    pub issuer: ArchiveEntry,
    pub copies: Vec<VerifiedCopy>,
}

/// Checks a certificate's payload (as its QR code holds it) against
/// `trust`: the issuer's seal, and every copy's seal by its holding
/// archive, each copy made for this request and this issuer.
pub fn verify_certificate(
    payload: &str,
    trust: &TrustList,
) -> Result<VerifiedCertificate, Rejected> {
    let Payload { sealed } = Payload::parse(payload).map_err(Rejected::Malformed)?;
    verify_sealed_certificate(&sealed, trust)
}

/// [`verify_certificate`] of the sealed bytes themselves.
pub fn verify_sealed_certificate(
    sealed: &[u8],
    trust: &TrustList,
) -> Result<VerifiedCertificate, Rejected> {
    let (statement, issuer, _) = check(sealed, trust, CertificateStatement::decode, |c| c.issued)?;
    let code_issuer = certificate::normalise_code(&statement.code).map(|(issuer, _)| issuer);
    if statement.issuer != issuer.domain || code_issuer.as_deref() != Some(issuer.domain.as_str()) {
        return Err(Rejected::Mismatch(format!(
            "the certificate says {} issued it, but {} sealed it",
            statement.issuer, issuer.domain
        )));
    }
    let mut copies = Vec::new();
    for (n, sealed) in statement.copies.iter().enumerate() {
        let copy = verify_copy(sealed, trust)?;
        let c = &copy.statement;
        if c.receiving != statement.issuer || c.request_id != statement.request_id {
            return Err(Rejected::Mismatch(format!(
                "copy {} was sealed for request {} of {}, not for this certificate",
                n + 1,
                c.request_id,
                c.receiving
            )));
        }
        copies.push(copy);
    }
    Ok(VerifiedCertificate {
        statement,
        issuer: issuer.clone(),
        copies,
    })
}
