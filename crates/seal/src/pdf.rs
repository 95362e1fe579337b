//! The certificate as a document to print and to send: a PDF of A4 pages,
//! one per sheet, with the archives' real names and addresses, the
//! applicant, every copy and what was not provided, the verification code
//! and the sheet's QR code, and the archive's seal image when one is
//! configured. Written with krilla, which embeds the subset of the font it
//! uses with the map back to Unicode, so that the Chinese text is
//! extractable (poppler's `pdftotext` reads it). The payload of each sheet
//! is also in the document's keywords, where [`payloads`] reads it back
//! for an offline check of the file itself.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use krilla::color::rgb;
use krilla::geom::{PathBuilder, Point, Size, Transform};
use krilla::metadata::Metadata;
use krilla::page::PageSettings;
use krilla::paint::Fill;
use krilla::surface::Surface;
use krilla::text::{Font, TextDirection};
use qrcode::QrCode;

use crate::certificate::Payload;
use crate::statement::{CertificateStatement, CopyStatement, NotProvided};
use crate::trust::{format_time, ArchiveEntry};

/// A4, in points.
const PAGE_W: f32 = 595.28;
const PAGE_H: f32 = 841.89;
const MARGIN: f32 = 56.0;
/// A QR module's side: 1.25 pt, about 0.44 mm, so that a version 25 code
/// with its quiet zone is 156 pt (55 mm) wide.
const MODULE: f32 = 1.25;

#[derive(Debug, thiserror::Error)]
pub enum PdfError {
    #[error("no font with Chinese characters was found among the system's fonts (install fonts-noto-cjk or fonts-wqy-microhei, or set archive.font)")]
    NoFont,
    #[error("cannot read the font {path}: {source}")]
    FontFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the font {0} has no Chinese characters, or is not a font")]
    NotAChineseFont(PathBuf),
    #[error("the seal image is not a PNG: {0}")]
    SealImage(String),
    #[error("cannot write the PDF: {0}")]
    Write(String),
    #[error("not a certificate's PDF: {0}")]
    NotACertificate(String),
}

/// A font that draws Chinese text.
#[derive(Clone)]
pub struct CertificateFont {
    data: Arc<Vec<u8>>,
    index: u32,
}

/// Families preferred for a certificate, sans-serif first.
const PREFERRED: [&str; 8] = [
    "Noto Sans CJK SC",
    "Source Han Sans SC",
    "WenQuanYi Micro Hei",
    "WenQuanYi Zen Hei",
    "Noto Serif CJK SC",
    "Source Han Serif SC",
    "Droid Sans Fallback",
    "AR PL UMing CN",
];

/// Characters every certificate prints: a font without them is no use.
const NEEDED: &str = "档案查询证明申请人";

fn covers(data: &[u8], index: u32) -> bool {
    ttf_parser::Face::parse(data, index)
        .is_ok_and(|face| NEEDED.chars().all(|c| face.glyph_index(c).is_some()))
}

impl CertificateFont {
    /// The font at `path` (TrueType, OpenType or a collection; its first
    /// face with Chinese characters).
    pub fn from_file(path: &Path) -> Result<CertificateFont, PdfError> {
        let data = std::fs::read(path).map_err(|source| PdfError::FontFile {
            path: path.to_owned(),
            source,
        })?;
        let faces = ttf_parser::fonts_in_collection(&data).unwrap_or(1);
        let index = (0..faces)
            .find(|&i| covers(&data, i))
            .ok_or_else(|| PdfError::NotAChineseFont(path.to_owned()))?;
        Ok(CertificateFont {
            data: Arc::new(data),
            index,
        })
    }

    /// A font with Chinese characters among the system's, a preferred
    /// family first.
    pub fn find() -> Result<CertificateFont, PdfError> {
        let mut db = fontdb::Database::new();
        db.load_system_fonts();
        let rank = |face: &fontdb::FaceInfo| {
            face.families
                .iter()
                .filter_map(|(name, _)| PREFERRED.iter().position(|p| p == name))
                .min()
                .unwrap_or(PREFERRED.len())
        };
        let mut faces: Vec<&fontdb::FaceInfo> = db
            .faces()
            .filter(|f| f.style == fontdb::Style::Normal && f.weight == fontdb::Weight::NORMAL)
            .collect();
        faces.sort_by_key(|f| (rank(f), f.post_script_name.clone()));
        for face in faces {
            let found = db.with_face_data(face.id, |data, index| {
                covers(data, index).then(|| CertificateFont {
                    data: Arc::new(data.to_vec()),
                    index,
                })
            });
            if let Some(Some(font)) = found {
                return Ok(font);
            }
        }
        Err(PdfError::NoFont)
    }

    fn krilla(&self) -> Option<Font> {
        Font::new(self.data.clone().into(), self.index)
    }

    /// The width of `text` at `size`, from the font's advances.
    fn width(&self, text: &str, size: f32) -> f32 {
        let Ok(face) = ttf_parser::Face::parse(&self.data, self.index) else {
            return 0.0;
        };
        let units: u32 = text
            .chars()
            .map(|c| {
                face.glyph_index(c)
                    .and_then(|g| face.glyph_hor_advance(g))
                    .map_or(0, u32::from)
            })
            .sum();
        units as f32 * size / f32::from(face.units_per_em())
    }
}

/// One sheet as the document prints it.
pub struct SheetView {
    pub statement: CertificateStatement,
    /// Its copies' statements, in order.
    pub copies: Vec<CopyStatement>,
    pub payload: String,
    pub qr: QrCode,
}

/// A certificate to print.
pub struct CertificateDocument<'a> {
    pub issuer: &'a ArchiveEntry,
    /// Every archive named, by domain code, as the trust list names them.
    pub archives: &'a BTreeMap<String, ArchiveEntry>,
    pub sheets: &'a [SheetView],
    /// The issuing archive's seal, as a PNG, printed beside its name.
    pub seal_image: Option<&'a [u8]>,
}

/// The key type's name as a person reads it.
fn searched_by_words(key_type: &str) -> String {
    match key_type {
        "id_card" => "居民身份证号 · identity card number".into(),
        "name_birth" => "姓名与出生日期 · name and date of birth".into(),
        other => other.to_owned(),
    }
}

fn why_words(n: &NotProvided) -> String {
    match n.why.as_str() {
        "refused" => format!(
            "拒绝提供 Refused: {}",
            n.reason.as_deref().unwrap_or_default()
        ),
        "not_held" => "该馆未保存 Not held there".into(),
        "held_nowhere" => "各馆均未保存 Held by no archive".into(),
        other => other.to_owned(),
    }
}

/// Draws text on a page, keeping the pen.
struct Pen<'f, 's, 'p> {
    surface: &'s mut Surface<'p>,
    font: &'f CertificateFont,
    krilla: Font,
    y: f32,
}

impl Pen<'_, '_, '_> {
    fn text(&mut self, x: f32, y: f32, size: f32, text: &str) {
        if !text.is_empty() {
            self.surface.draw_text(
                Point::from_xy(x, y),
                self.krilla.clone(),
                size,
                text,
                false,
                TextDirection::Auto,
            );
        }
    }

    fn centred(&mut self, size: f32, text: &str) {
        self.y += size * 1.3;
        let x = (PAGE_W - self.font.width(text, size)) / 2.0;
        self.text(x, self.y, size, text);
    }

    /// `text` wrapped to `width` from `x`, the pen moved below it.
    fn paragraph(&mut self, x: f32, width: f32, size: f32, text: &str) {
        for line in wrap(self.font, text, size, width) {
            self.y += size * 1.45;
            self.text(x, self.y, size, &line);
        }
    }

    fn rule(&mut self, y: f32) {
        let mut path = PathBuilder::new();
        path.move_to(MARGIN, y);
        path.line_to(PAGE_W - MARGIN, y);
        path.line_to(PAGE_W - MARGIN, y + 0.6);
        path.line_to(MARGIN, y + 0.6);
        path.close();
        if let Some(path) = path.finish() {
            self.surface.draw_path(&path);
        }
    }
}

/// `text` in lines no wider than `width`: Chinese characters break
/// anywhere, other words at spaces (or anywhere, when one word is wider).
fn wrap(font: &CertificateFont, text: &str, size: f32, width: f32) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    let mut word = String::new();
    let push = |line: &mut String, piece: &str, lines: &mut Vec<String>| {
        let joined = format!("{line}{piece}");
        if font.width(&joined, size) <= width || line.is_empty() {
            *line = joined;
        } else {
            lines.push(std::mem::take(line).trim_end().to_owned());
            *line = piece.trim_start().to_owned();
        }
    };
    for c in text.chars() {
        let wide = c > '\u{2E7F}';
        if c == ' ' || wide {
            if !word.is_empty() {
                push(&mut line, &std::mem::take(&mut word), &mut lines);
            }
            push(&mut line, &c.to_string(), &mut lines);
        } else {
            word.push(c);
            if font.width(&word, size) > width {
                push(&mut line, &std::mem::take(&mut word), &mut lines);
            }
        }
    }
    if !word.is_empty() {
        push(&mut line, &word, &mut lines);
    }
    if !line.trim().is_empty() {
        lines.push(line.trim_end().to_owned());
    }
    lines
}

fn date(secs: i64) -> String {
    format_time(secs).get(..10).unwrap_or_default().to_owned()
}

/// Draws `qr` with its top-left corner at (`x`, `y`), quiet zone
/// included, each module [`MODULE`] wide: as an image of one pixel a
/// module, not interpolated (a few kilobytes, where a rectangle a run of
/// modules took 35 kB a page).
fn draw_qr(surface: &mut Surface<'_>, qr: &QrCode, x: f32, y: f32) {
    let width = qr.width();
    let side = width + 8;
    let mut pixels = vec![255u8; side * side * 4];
    for (i, color) in qr.to_colors().into_iter().enumerate() {
        if color == qrcode::Color::Dark {
            let at = ((i / width + 4) * side + i % width + 4) * 4;
            pixels[at..at + 3].fill(0);
        }
    }
    let side_px = u32::try_from(side).unwrap_or(u32::MAX);
    let image = krilla::image::Image::from_rgba8(pixels, side_px, side_px);
    let Some(size) = Size::from_wh(qr_side(qr), qr_side(qr)) else {
        return;
    };
    surface.push_transform(&Transform::from_translate(x, y));
    surface.draw_image(image, size);
    surface.pop();
}

/// The size a QR code is drawn at, quiet zone included.
fn qr_side(qr: &QrCode) -> f32 {
    (qr.width() as f32 + 8.0) * MODULE
}

/// Writes the certificate's PDF with `font`.
pub fn render(doc: &CertificateDocument<'_>, font: &CertificateFont) -> Result<Vec<u8>, PdfError> {
    let krilla_font = font
        .krilla()
        .ok_or_else(|| PdfError::Write("the font cannot be embedded".into()))?;
    let seal = doc
        .seal_image
        .map(|png| krilla::image::Image::from_png(png.to_vec().into(), true))
        .transpose()
        .map_err(PdfError::SealImage)?;
    let mut document = krilla::Document::new();
    let payloads: Vec<String> = doc.sheets.iter().map(|s| s.payload.clone()).collect();
    let first = doc.sheets.first().map(|s| &s.statement);
    document.set_metadata(
        Metadata::new()
            .title(format!(
                "档案查询证明 Certificate of archive search {}",
                first.map(|s| s.code.as_str()).unwrap_or_default()
            ))
            .creator(doc.issuer.name().to_owned())
            .producer("xarchive".into())
            .language("zh-CN".into())
            // One keyword: krilla joins several with ", ", and base45 has
            // spaces; ';' is not in its alphabet.
            .keywords(vec![payloads.join(";")]),
    );
    let size = PageSettings::from_wh(PAGE_W, PAGE_H)
        .ok_or_else(|| PdfError::Write("the page size".into()))?;
    for sheet in doc.sheets {
        let mut page = document.start_page_with(size.clone());
        let mut surface = page.surface();
        surface.set_fill(Some(Fill {
            paint: rgb::Color::new(0, 0, 0).into(),
            ..Fill::default()
        }));
        let mut pen = Pen {
            surface: &mut surface,
            font,
            krilla: krilla_font.clone(),
            y: MARGIN - 10.0,
        };
        draw_sheet(&mut pen, doc, sheet, seal.as_ref());
        surface.finish();
        page.finish();
    }
    document
        .finish()
        .map_err(|e| PdfError::Write(format!("{e:?}")))
}

fn draw_sheet(
    pen: &mut Pen<'_, '_, '_>,
    doc: &CertificateDocument<'_>,
    sheet: &SheetView,
    seal: Option<&krilla::image::Image>,
) {
    let s = &sheet.statement;
    let width = PAGE_W - 2.0 * MARGIN;
    let name = |domain: &str| {
        doc.archives
            .get(domain)
            .map_or_else(|| domain.to_owned(), |a| a.name().to_owned())
    };
    let issuer = doc.issuer.name().to_owned();
    pen.centred(15.0, &issuer);
    pen.y += 8.0;
    pen.centred(22.0, "档案查询证明");
    pen.centred(11.0, "Certificate of archive search");
    pen.y += 10.0;
    let statement_zh = if sheet.copies.is_empty() && s.not_provided.is_empty() {
        format!(
            "兹证明：应申请人 {} 的申请（用途：{}），{} 经查询本集群各档案馆，截至 {}，均未保存申请人的档案记录。",
            s.applicant_name,
            s.purpose,
            issuer,
            date(s.issued)
        )
    } else {
        format!(
            "兹证明：应申请人 {} 的申请（用途：{}），{} 受理并向馆藏档案馆查询，下列档案复制件由馆藏档案馆加盖电子印章签发，经核验无误。",
            s.applicant_name, s.purpose, issuer
        )
    };
    pen.paragraph(MARGIN, width, 10.5, &statement_zh);
    let statement_en = if sheet.copies.is_empty() && s.not_provided.is_empty() {
        format!(
            "At the request of {} (purpose: {}), {} asked every archive of the cluster: as of {}, none holds a record of the applicant.",
            s.applicant_name, s.purpose, doc.issuer.domain, date(s.issued)
        )
    } else {
        format!(
            "At the request of {} (purpose: {}), {} asked the archives holding the records below; each copy was sealed by its holding archive and checked on receipt.",
            s.applicant_name, s.purpose, doc.issuer.domain
        )
    };
    pen.paragraph(MARGIN, width, 8.5, &statement_en);
    pen.y += 8.0;
    let mut fields = vec![
        ("申请人 Applicant", s.applicant_name.clone()),
        ("用途 Purpose", s.purpose.clone()),
        ("申请编号 Request ID", s.request_id.clone()),
        ("出证日期 Date issued", date(s.issued)),
        (
            "出证机构 Issued by",
            format!("{issuer} ({})", doc.issuer.domain),
        ),
        ("核验码 Verification code", s.code.clone()),
    ];
    if let Some(key_type) = &s.searched_by {
        fields.push(("查询依据 Searched by", searched_by_words(key_type)));
    }
    for (label, value) in fields {
        pen.y += 14.0;
        let y = pen.y;
        pen.text(MARGIN, y, 9.5, label);
        for (i, line) in wrap(pen.font, &value, 9.5, width - 150.0)
            .iter()
            .enumerate()
        {
            if i > 0 {
                pen.y += 13.0;
            }
            let y = pen.y;
            pen.text(MARGIN + 150.0, y, 9.5, line);
        }
    }
    if !sheet.copies.is_empty() {
        pen.y += 22.0;
        // No. | holding archive | archive number | title | record date
        let columns = [
            (0.0, 22.0),
            (24.0, 104.0),
            (130.0, 110.0),
            (242.0, 170.0),
            (414.0, 69.0),
        ];
        let heads = [
            ("序号", "No."),
            ("馆藏档案馆", "Holding archive"),
            ("档案号", "Archive number"),
            ("题名", "Title"),
            ("形成日期", "Record date"),
        ];
        let top = pen.y;
        for ((x, _), (zh, en)) in columns.iter().zip(heads) {
            pen.text(MARGIN + x, top, 9.0, zh);
            pen.text(MARGIN + x, top + 11.0, 7.5, en);
        }
        pen.y = top + 15.0;
        pen.rule(pen.y);
        for (n, copy) in sheet.copies.iter().enumerate() {
            let cells = [
                format!("{}", n + 1),
                name(&copy.holding),
                copy.archive_number.clone(),
                copy.title.clone(),
                copy.record_date.clone().unwrap_or_else(|| "—".into()),
            ];
            let wrapped: Vec<Vec<String>> = cells
                .iter()
                .zip(columns)
                .map(|(cell, (_, w))| wrap(pen.font, cell, 9.0, w))
                .collect();
            let lines = wrapped.iter().map(Vec::len).max().unwrap_or(1);
            let row_top = pen.y;
            for (cell, (x, _)) in wrapped.iter().zip(columns) {
                for (i, line) in cell.iter().enumerate() {
                    pen.text(MARGIN + x, row_top + 12.0 + i as f32 * 12.0, 9.0, line);
                }
            }
            pen.y = row_top + 6.0 + lines as f32 * 12.0;
            pen.rule(pen.y);
        }
    }
    if !s.not_provided.is_empty() {
        pen.y += 10.0;
        pen.paragraph(MARGIN, width, 9.5, "未能提供 Not provided");
        for n in &s.not_provided {
            let holding = n.holding.as_deref().map(|h| format!("{}: ", name(h)));
            let line = format!(
                "{}{} — {}",
                holding.unwrap_or_default(),
                n.records.join(", "),
                why_words(n)
            );
            pen.paragraph(MARGIN + 10.0, width - 10.0, 9.0, &line);
        }
    }

    // The foot: how to check it, the QR code, the seal and the sheet.
    let side = qr_side(&sheet.qr);
    let qr_x = PAGE_W - MARGIN - side;
    let qr_y = PAGE_H - MARGIN - side - 10.0;
    draw_qr(pen.surface, &sheet.qr, qr_x, qr_y);
    pen.y = qr_y;
    let left = qr_x - MARGIN - 12.0;
    let url = if doc.issuer.url.is_empty() {
        String::new()
    } else {
        format!("{}#verify", doc.issuer.url.trim_end_matches('/'))
    };
    pen.paragraph(
        MARGIN,
        left,
        8.5,
        &format!(
            "核验方法：扫描右侧二维码离线核验，或在本集群任一档案馆的页面输入核验码 {}。{}",
            s.code, url
        ),
    );
    pen.paragraph(
        MARGIN,
        left,
        7.5,
        &format!(
            "To verify: scan the QR code (checked offline against the archives' trust list), or enter the verification code {} on the page of any archive of the cluster.",
            s.code
        ),
    );
    pen.y += 14.0;
    let seal_top = pen.y;
    pen.paragraph(MARGIN, left, 10.0, &issuer);
    if !doc.issuer.address.is_empty() {
        pen.paragraph(MARGIN, left, 8.5, &doc.issuer.address);
    }
    pen.paragraph(
        MARGIN,
        left,
        8.5,
        &format!("{}（印章 Seal）", date(s.issued)),
    );
    if let Some(seal) = seal {
        let seal_side = 96.0;
        pen.surface
            .push_transform(&Transform::from_translate(MARGIN + 120.0, seal_top - 30.0));
        if let Some(size) = Size::from_wh(seal_side, seal_side) {
            pen.surface.draw_image(seal.clone(), size);
        }
        pen.surface.pop();
    }
    let sheet_words = format!(
        "第 {} 页，共 {} 页 · Sheet {} of {}",
        s.sheet, s.sheets, s.sheet, s.sheets
    );
    let x = qr_x + (side - pen.font.width(&sheet_words, 8.0)) / 2.0;
    pen.text(x, qr_y + side + 10.0, 8.0, &sheet_words);
}

/// The payloads of a certificate's PDF, one per sheet, as [`render`] put
/// them in its keywords (separated by `;`).
pub fn payloads(pdf: &[u8]) -> Result<Vec<String>, PdfError> {
    let document =
        lopdf::Document::load_mem(pdf).map_err(|e| PdfError::NotACertificate(e.to_string()))?;
    let info = document
        .trailer
        .get(b"Info")
        .and_then(|info| document.dereference(info))
        .and_then(|(_, info)| info.as_dict())
        .map_err(|_| PdfError::NotACertificate("it has no document information".into()))?;
    let keywords = info
        .get(b"Keywords")
        .map_err(|_| PdfError::NotACertificate("it has no keywords".into()))?;
    let text = match keywords {
        lopdf::Object::String(bytes, _) => lopdf::decode_text_string(keywords)
            .unwrap_or_else(|_| String::from_utf8_lossy(bytes).into_owned()),
        _ => {
            return Err(PdfError::NotACertificate(
                "its keywords are not text".into(),
            ))
        }
    };
    let found: Vec<String> = text
        .split(';')
        .filter(|p| p.starts_with(crate::certificate::PREFIX))
        .map(str::to_owned)
        .collect();
    if found.is_empty() || found.iter().any(|p| Payload::parse(p).is_err()) {
        return Err(PdfError::NotACertificate(
            "its keywords hold no certificate payload".into(),
        ));
    }
    Ok(found)
}
