//! The certificate: issued by the receiving archive once every holding
//! archive has answered, and only while every copy still checks; sealed in
//! sheets that each fit a QR code (`xarchive_seal::certificate`); kept
//! exactly as issued, so that asked again it is the same. Any archive of
//! the cluster checks one: by its code (the issuer's name is in it: the
//! issuer is asked, and checks what it kept again), or offline from its
//! payload against the trust list.

use std::collections::BTreeMap;
use std::sync::Arc;

use qrcode::render::svg;
use xarchive_seal::certificate::{normalise_code, seal_sheets, Payload};
use xarchive_seal::pdf::{CertificateDocument, CertificateFont, SheetView};
use xarchive_seal::statement::{CertificateStatement, CopyStatement, NotProvided};
use xarchive_seal::{verify_certificate, Rejected, VerifiedCertificate};

use super::kept::{decode, Action, Incoming, Kept, KeptCertificate, Outgoing, Step};
use super::receiving::check_copy;

use super::state::Trusted;
use super::{legacy, rfc3339, secs, unbase64, RequestsError};
use crate::local::audit::Requester;
use crate::local::domain::DomainError;
use crate::local::record::now_us;
use crate::local::requests::Side;
use crate::node::Node;
use crate::wire::{
    ArchiveName, Certificate, CertificateCheck, CertificateSheet, CheckedCopy, HoldingState,
    NotProvidedView, RequestStatus, TrustListBody,
};

/// What the certificate says was not provided: refusals with their
/// reasons, records their archive no longer held, records no archive
/// holds.
fn not_provided(request: &Outgoing) -> Vec<NotProvided> {
    let mut out = Vec::new();
    for (holding, part) in &request.parts {
        match part.state {
            HoldingState::Refused => out.push(NotProvided {
                holding: Some(holding.clone()),
                records: part.records.clone(),
                why: "refused".into(),
                reason: part.reason.clone(),
            }),
            _ if !part.missing.is_empty() => out.push(NotProvided {
                holding: Some(holding.clone()),
                records: part.missing.clone(),
                why: "not_held".into(),
                reason: None,
            }),
            _ => {}
        }
    }
    if !request.not_found.is_empty() {
        out.push(NotProvided {
            holding: None,
            records: request.not_found.clone(),
            why: "held_nowhere".into(),
            reason: None,
        });
    }
    out
}

fn day(secs: i64) -> String {
    xarchive_seal::trust::format_time(secs)
        .get(..10)
        .unwrap_or_default()
        .to_owned()
}

impl Node {
    fn name_of(&self, trust: &Trusted, domain: &str) -> ArchiveName {
        match trust.list.archive(domain) {
            Some(e) => ArchiveName {
                domain: e.domain.clone(),
                name: e.name().to_owned(),
                address: e.address.clone(),
                url: e.url.clone(),
            },
            None => self.archive_name(domain),
        }
    }

    /// A sheet checked, as the API shows it.
    fn check_view(&self, trust: &Trusted, verified: &[VerifiedCertificate]) -> CertificateCheck {
        let first = &verified[0].statement;
        let copies = verified
            .iter()
            .flat_map(|v| &v.copies)
            .map(|c| {
                let s = &c.statement;
                CheckedCopy {
                    holding: self.name_of(trust, &s.holding),
                    archive_number: s.archive_number.clone(),
                    title: s.title.clone(),
                    record_date: s.record_date.clone(),
                    released: day(s.released),
                    content_sha256: s.content_sha256.map(hex::encode),
                }
            })
            .collect();
        let not_provided = verified
            .iter()
            .flat_map(|v| &v.statement.not_provided)
            .map(|n| NotProvidedView {
                holding: n.holding.as_deref().map(|h| self.name_of(trust, h)),
                records: n.records.clone(),
                why: n.why.clone(),
                reason: n.reason.clone(),
            })
            .collect();
        CertificateCheck {
            code: first.code.clone(),
            issuer: self.name_of(trust, &first.issuer),
            request_id: first.request_id.clone(),
            issued_at: xarchive_seal::trust::format_time(first.issued),
            applicant_name: first.applicant_name.clone(),
            purpose: first.purpose.clone(),
            searched_by: first.searched_by.clone(),
            copies,
            not_provided,
            sheets_checked: u32::try_from(verified.len()).unwrap_or(u32::MAX),
            sheets: first.sheets,
            checked_by: self.cluster.me.to_string(),
        }
    }

    /// The certificate as issued, for the API: with each sheet's QR code
    /// drawn.
    fn certificate_body(
        &self,
        request: &Outgoing,
        kept: &KeptCertificate,
        trust: &Trusted,
    ) -> Certificate {
        let sheets = kept
            .sheets
            .iter()
            .map(|payload| CertificateSheet {
                qr_svg: xarchive_seal::certificate::qr(payload)
                    .map(|qr| qr.render::<svg::Color<'_>>().quiet_zone(true).build())
                    .unwrap_or_default(),
                payload: payload.clone(),
            })
            .collect();
        Certificate {
            code: kept.code.clone(),
            issued_at: rfc3339(kept.issued_us),
            issuer: self.name_of(trust, &self.cluster.me),
            request: self.view(request, Some(trust)),
            sheets,
        }
    }

    /// Issues the certificate of a request every holding archive answered
    /// (or that no archive holds a record of): refused while any copy
    /// kept does not check. Issued once; asked again, the same.
    pub async fn issue_certificate(
        self: &Arc<Self>,
        id: &str,
        clerk: Requester,
    ) -> Result<Certificate, RequestsError> {
        let trust = self.trust_list(false).await?;
        let (node, id) = (self.clone(), id.to_owned());
        tokio::task::spawn_blocking(move || node.issue_blocking(&id, clerk, &trust))
            .await
            .map_err(DomainError::from)?
    }

    fn issue_blocking(
        &self,
        id: &str,
        clerk: Requester,
        trust: &Trusted,
    ) -> Result<Certificate, RequestsError> {
        let bytes = self
            .requests
            .book
            .get(Side::Outgoing, id)?
            .ok_or_else(|| RequestsError::NoRequest(id.to_owned()))?;
        let request = decode::<Outgoing>(&bytes)?;
        if let Some(kept) = &request.certificate {
            return Ok(self.certificate_body(&request, kept, trust));
        }
        let view = self.view(&request, Some(trust));
        if let Some(copy) = view
            .holdings
            .iter()
            .flat_map(|h| &h.copies)
            .find(|c| !c.valid)
        {
            self.flag_failed_copies(id, &view);
            return Err(RequestsError::CopyInvalid {
                holding: copy.holding.clone(),
                record: copy.archive_number.clone(),
                why: copy.problem.clone().unwrap_or_default(),
            });
        }
        let kept = self
            .requests
            .book
            .change::<RequestsError>(Side::Outgoing, id, |old| {
                let old = old.ok_or_else(|| RequestsError::NoRequest(id.to_owned()))?;
                let mut request = decode::<Outgoing>(old)?;
                if request.certificate.is_some() {
                    return Ok(None);
                }
                match request.status() {
                    RequestStatus::Answered | RequestStatus::NoRecords => {}
                    status => return Err(RequestsError::NotAnswered(status)),
                }
                let mut copies = Vec::new();
                for part in request.parts.values() {
                    for copy in &part.copies {
                        if legacy::is_legacy(copy) {
                            return Err(RequestsError::CopyInvalid {
                                holding: String::new(),
                                record: String::new(),
                                why: "a copy released before seals cannot go on a certificate \
                                      that is checked offline: ask for it again"
                                    .into(),
                            });
                        }
                        copies.push(unbase64(&copy.sealed).unwrap_or_default());
                    }
                }
                let issued_us = now_us();
                let head = CertificateStatement {
                    issuer: self.cluster.me.to_string(),
                    code: xarchive_seal::certificate::new_code(&self.cluster.me),
                    request_id: request.id.clone(),
                    issued: secs(issued_us),
                    applicant_name: request.applicant_name.clone(),
                    applicant_digest: request.applicant_digest.clone(),
                    purpose: request.purpose.clone(),
                    searched_by: request.searched_by.clone(),
                    copies: Vec::new(),
                    not_provided: Vec::new(),
                    sheet: 1,
                    sheets: 1,
                };
                let sheets = seal_sheets(
                    &head,
                    copies,
                    not_provided(&request),
                    self.requests.seal.active(),
                )
                .map_err(|e| RequestsError::Invalid(e.to_string()))?;
                request.certificate = Some(KeptCertificate {
                    code: head.code.clone(),
                    issued_us,
                    sheets: sheets.into_iter().map(|s| s.payload).collect(),
                });
                request.certified_us = Some(issued_us);
                let records = request.records();
                request
                    .unlogged
                    .push(Step::now(clerk.clone(), Action::CertificateIssued, records));
                request.entry().map(Some)
            })?
            .ok_or_else(|| RequestsError::NoRequest(id.to_owned()))?;
        self.flush_steps::<Outgoing>(Side::Outgoing, id);
        let request = decode::<Outgoing>(&kept)?;
        let certificate = request
            .certificate
            .as_ref()
            .ok_or_else(|| RequestsError::NotCertified(id.to_owned()))?;
        Ok(self.certificate_body(&request, certificate, trust))
    }

    /// The certificate issued for request `id`.
    pub async fn certificate(self: &Arc<Self>, id: &str) -> Result<Certificate, RequestsError> {
        let trust = self.trust_list(false).await?;
        let (node, id) = (self.clone(), id.to_owned());
        tokio::task::spawn_blocking(move || {
            let bytes = node
                .requests
                .book
                .get(Side::Outgoing, &id)?
                .ok_or_else(|| RequestsError::NoRequest(id.clone()))?;
            let request = decode::<Outgoing>(&bytes)?;
            let kept = request
                .certificate
                .as_ref()
                .ok_or_else(|| RequestsError::NotCertified(id.clone()))?;
            Ok(node.certificate_body(&request, kept, &trust))
        })
        .await
        .map_err(DomainError::from)?
    }

    /// The font certificates are drawn with: `archive.font`, or one found
    /// among the system's (once).
    fn certificate_font(&self) -> Result<CertificateFont, RequestsError> {
        let found = self.requests.font.get_or_init(|| {
            match &self.config.archive.font {
                Some(path) => CertificateFont::from_file(path),
                None => CertificateFont::find(),
            }
            .map_err(|e| e.to_string())
        });
        found.clone().map_err(RequestsError::Pdf)
    }

    /// The certificate of request `id` as a PDF.
    pub async fn certificate_pdf(self: &Arc<Self>, id: &str) -> Result<Vec<u8>, RequestsError> {
        let certificate = self.certificate(id).await?;
        let trust = self.trust_list(false).await?;
        let node = self.clone();
        tokio::task::spawn_blocking(move || {
            let font = node.certificate_font()?;
            let seal_image = match &node.config.archive.seal_image {
                Some(path) => Some(std::fs::read(path).map_err(|e| {
                    RequestsError::Pdf(format!("archive.seal_image {}: {e}", path.display()))
                })?),
                None => None,
            };
            let archives: BTreeMap<String, xarchive_seal::ArchiveEntry> = trust
                .list
                .archives
                .iter()
                .map(|a| (a.domain.clone(), a.clone()))
                .collect();
            let issuer = archives
                .get(node.cluster.me.as_str())
                .cloned()
                .unwrap_or_else(|| node.own_trust_entry());
            let sheets = certificate
                .sheets
                .iter()
                .map(|sheet| sheet_view(&sheet.payload))
                .collect::<Result<Vec<_>, _>>()?;
            let document = CertificateDocument {
                issuer: &issuer,
                archives: &archives,
                sheets: &sheets,
                seal_image: seal_image.as_deref(),
            };
            xarchive_seal::pdf::render(&document, &font)
                .map_err(|e| RequestsError::Pdf(e.to_string()))
        })
        .await
        .map_err(DomainError::from)?
    }

    /// Checks a certificate's verification code. A code of this archive:
    /// the certificate kept under it checked again, sheet by sheet, with
    /// its copies; of another: that archive asked; a code of a copy of
    /// format 1: the copy kept under it checked again.
    pub async fn check_certificate(
        self: &Arc<Self>,
        code: &str,
    ) -> Result<CertificateCheck, RequestsError> {
        if let Some((issuer, code)) = normalise_code(code) {
            if issuer != self.cluster.me {
                return self.check_elsewhere(&issuer, &code).await;
            }
            let mut trust = self.trust_list(false).await?;
            let mut checked = self.check_kept(&code, &trust).await;
            if matches!(
                checked,
                Err(RequestsError::Rejected(Rejected::UnknownKey(_)))
            ) {
                trust = self.trust_list(true).await?;
                checked = self.check_kept(&code, &trust).await;
            }
            return checked;
        }
        let code = legacy::normalise_code(code).ok_or_else(|| {
            RequestsError::Invalid(
                "a verification code is the issuing archive's code, a dot and 20 hex digits, as \
                 printed: ARCHIVE.XXXX-XXXX-XXXX-XXXX-XXXX"
                    .into(),
            )
        })?;
        let node = self.clone();
        tokio::task::spawn_blocking(move || node.check_legacy(&code))
            .await
            .map_err(DomainError::from)?
    }

    /// Asks `issuer` about its `code`, as a client would.
    async fn check_elsewhere(
        &self,
        issuer: &str,
        code: &str,
    ) -> Result<CertificateCheck, RequestsError> {
        let roster = self
            .cluster
            .coordinator
            .view()
            .borrow()
            .members
            .get(issuer)
            .cloned();
        let Some(member) = roster else {
            // Not registered now: down, or no archive of this cluster.
            // Only the trust list (every archive that ever registered
            // keeps its entry) tells the two apart.
            let trust = self.trust_list(false).await?;
            if trust.list.archive(issuer).is_none() {
                return Err(RequestsError::UnknownIssuer(issuer.to_owned()));
            }
            return Err(RequestsError::IssuerUnreachable(
                self.names(&[issuer.to_owned()]),
            ));
        };
        let client = self
            .cluster
            .peer_client(&member.address)
            .map_err(|e| RequestsError::Peer(issuer.to_owned(), e))?;
        match client.check_certificate(code).await {
            Ok(mut check) => {
                check.checked_by = format!("{} (asked {issuer})", self.cluster.me);
                Ok(check)
            }
            Err(e @ crate::ClientError::Api { .. }) => {
                Err(RequestsError::Peer(issuer.to_owned(), e))
            }
            Err(_) => Err(RequestsError::IssuerUnreachable(
                self.names(&[issuer.to_owned()]),
            )),
        }
    }

    /// The certificate this archive issued under `code`, checked again:
    /// every sheet against the trust list, every copy kept with its
    /// metadata and content against its seal.
    async fn check_kept(
        self: &Arc<Self>,
        code: &str,
        trust: &Arc<Trusted>,
    ) -> Result<CertificateCheck, RequestsError> {
        let (node, code, trust) = (self.clone(), code.to_owned(), trust.clone());
        tokio::task::spawn_blocking(move || {
            let (_, bytes) = node
                .requests
                .book
                .by_code(Side::Outgoing, &code)?
                .ok_or_else(|| RequestsError::NoCertificate(code.clone()))?;
            let request = decode::<Outgoing>(&bytes)?;
            let invalid = |why: String| RequestsError::CertificateInvalid {
                code: code.clone(),
                why,
            };
            let kept = request
                .certificate
                .as_ref()
                .filter(|c| c.code == code)
                .ok_or_else(|| invalid("what is kept under its code is not it".into()))?;
            let mut verified = Vec::new();
            for payload in &kept.sheets {
                let sheet = verify_certificate(payload, &trust.list)?;
                if sheet.statement.code != code || sheet.statement.request_id != request.id {
                    return Err(invalid("a sheet kept under its code is of another".into()));
                }
                verified.push(sheet);
            }
            for (holding, part) in &request.parts {
                for copy in &part.copies {
                    check_copy(
                        copy,
                        &trust.list,
                        &node.cluster.me,
                        &request.id,
                        &part.records,
                    )
                    .map_err(|e| invalid(format!("the copy from {holding} kept here: {e}")))?;
                }
            }
            if verified.is_empty() {
                return Err(invalid("it has no sheet".into()));
            }
            Ok(node.check_view(&trust, &verified))
        })
        .await
        .map_err(DomainError::from)?
    }

    /// A format-1 copy's code: the copy kept under it (issued here, or
    /// released from here) checked again.
    fn check_legacy(&self, code: &str) -> Result<CertificateCheck, RequestsError> {
        let invalid = |why: String| RequestsError::CertificateInvalid {
            code: code.to_owned(),
            why,
        };
        let (copy, key, receiving, applicant, purpose) =
            if let Some((_, bytes)) = self.requests.book.by_code(Side::Outgoing, code)? {
                let request = decode::<Outgoing>(&bytes)?;
                let part = request
                    .parts
                    .values()
                    .find(|p| p.copies.iter().any(|c| legacy::code(c) == code))
                    .ok_or_else(|| invalid("it was changed after it was signed".into()))?;
                let copy = part
                    .copies
                    .iter()
                    .find(|c| legacy::code(c) == code)
                    .cloned()
                    .unwrap_or_default();
                (
                    copy,
                    part.signing_key.clone(),
                    self.cluster.me.to_string(),
                    request.applicant_name,
                    request.purpose,
                )
            } else if let Some((_, bytes)) = self.requests.book.by_code(Side::Incoming, code)? {
                let kept = decode::<Incoming>(&bytes)?;
                let copy = kept
                    .answer
                    .copies
                    .iter()
                    .find(|c| legacy::code(c) == code)
                    .cloned()
                    .ok_or_else(|| invalid("it was changed after it was signed".into()))?;
                let key = self
                    .requests
                    .seal
                    .records()
                    .iter()
                    .filter(|r| r.algorithm == xarchive_seal::Algorithm::Ed25519)
                    .find_map(|r| r.public().ok())
                    .and_then(|k| match k {
                        xarchive_seal::PublicKey::Ed25519(k) => Some(hex::encode(k.as_bytes())),
                        xarchive_seal::PublicKey::Sm2(_) => None,
                    })
                    .unwrap_or_default();
                (
                    copy,
                    key,
                    kept.delivery.receiving,
                    kept.delivery.applicant_name,
                    kept.delivery.purpose,
                )
            } else {
                return Err(RequestsError::NoCertificate(code.to_owned()));
            };
        let body = legacy::verify(&key, &copy).map_err(invalid)?;
        let content_sha256 = body
            .content
            .as_deref()
            .and_then(unbase64)
            .map(|c| hex::encode(xarchive_seal::statement::sha256(&c)));
        Ok(CertificateCheck {
            code: code.to_owned(),
            issuer: self.archive_name(&receiving),
            request_id: body.request_id,
            issued_at: String::new(),
            applicant_name: applicant,
            purpose,
            searched_by: None,
            copies: vec![CheckedCopy {
                holding: self.archive_name(&body.holding),
                archive_number: body.archive_number,
                title: body.title,
                record_date: None,
                released: body.date,
                content_sha256,
            }],
            not_provided: Vec::new(),
            sheets_checked: 1,
            sheets: 1,
            checked_by: self.cluster.me.to_string(),
        })
    }

    /// Checks a certificate's payload (as its QR code holds it) against
    /// the trust list, as an offline verifier would.
    pub async fn verify_payload(&self, payload: &str) -> Result<CertificateCheck, RequestsError> {
        let trust = self.trust_list(false).await?;
        let verified = match verify_certificate(payload, &trust.list) {
            Err(Rejected::UnknownKey(_)) => {
                let trust = self.trust_list(true).await?;
                return Ok(self.check_view(&trust, &[verify_certificate(payload, &trust.list)?]));
            }
            verified => verified?,
        };
        Ok(self.check_view(&trust, &[verified]))
    }

    /// The trust list, signed, as `GET /v1/trust-list` serves it: read
    /// afresh (unless read within seconds), since it is saved for offline
    /// checks and must not miss a key rotated or revoked since.
    pub async fn signed_trust_list(&self) -> Result<TrustListBody, RequestsError> {
        Ok(self.trust_list(true).await?.signed.clone().into())
    }
}

/// A sheet's payload, taken apart for its document.
fn sheet_view(payload: &str) -> Result<SheetView, RequestsError> {
    let unreadable = |why: String| RequestsError::Pdf(format!("a sheet kept is unreadable: {why}"));
    let sealed = Payload::parse(payload).map_err(unreadable)?.sealed;
    let opened = xarchive_seal::Opened::parse(&sealed).map_err(|e| unreadable(e.to_string()))?;
    let statement =
        CertificateStatement::decode(&opened.payload).map_err(|e| unreadable(e.to_string()))?;
    let copies = statement
        .copies
        .iter()
        .map(|c| {
            let opened = xarchive_seal::Opened::parse(c).map_err(|e| unreadable(e.to_string()))?;
            CopyStatement::decode(&opened.payload).map_err(|e| unreadable(e.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let qr = xarchive_seal::certificate::qr(payload)
        .ok_or_else(|| unreadable("its QR code does not fit".into()))?;
    Ok(SheetView {
        statement,
        copies,
        payload: payload.to_owned(),
        qr,
    })
}
