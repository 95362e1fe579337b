//! What this crate makes, read by tools nobody here wrote: OpenSSL 3
//! checks an SM2 seal, poppler reads the certificate's PDF (its Chinese
//! text, and its pages as images), zbar decodes the QR code back into the
//! payload, which then verifies. Debian's packages (scripts/install-deps.sh).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use xarchive_seal::certificate::{new_code, seal_sheets, MAX_QR_VERSION};
use xarchive_seal::key::signature_der;
use xarchive_seal::pdf::{self, CertificateDocument, CertificateFont, SheetView};
use xarchive_seal::statement::{
    sealed_title, sha256, CertificateStatement, CopyStatement, NotProvided,
};
use xarchive_seal::trust::{ArchiveEntry, KeyRecord, TrustList};
use xarchive_seal::{seal, verify_certificate, Algorithm, Opened, SecretKey};

fn run(program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program} does not run: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn openssl_verifies_an_sm2_seal_made_here_with_the_standard_s_signer_id() {
    let dir = tempfile::tempdir().unwrap();
    let key = SecretKey::generate(Algorithm::Sm2Sm3);
    let message = "兹证明 the copy".as_bytes();
    let signature = signature_der(Algorithm::Sm2Sm3, &key.sign(message)).unwrap();
    let public = dir.path().join("public.pem");
    let data = dir.path().join("message");
    let sig = dir.path().join("signature.der");
    std::fs::write(&public, key.public().to_pem()).unwrap();
    std::fs::write(&data, message).unwrap();
    std::fs::write(&sig, &signature).unwrap();
    let said = run(
        "openssl",
        &[
            "pkeyutl",
            "-verify",
            "-pubin",
            "-inkey",
            path(&public),
            "-rawin",
            "-digest",
            "sm3",
            "-pkeyopt",
            "distid:1234567812345678",
            "-in",
            path(&data),
            "-sigfile",
            path(&sig),
        ],
    );
    assert!(said.contains("Signature Verified Successfully"), "{said}");
    // And a key OpenSSL made is read here.
    let theirs = dir.path().join("theirs.pem");
    run(
        "openssl",
        &["genpkey", "-algorithm", "SM2", "-out", path(&theirs)],
    );
    let read = SecretKey::from_pkcs8_pem(&std::fs::read_to_string(&theirs).unwrap()).unwrap();
    assert_eq!(read.algorithm(), Algorithm::Sm2Sm3);
}

/// A seal's image: a red ring, 60 pixels square, as a PNG.
fn seal_png() -> Vec<u8> {
    let mut bytes = Vec::new();
    {
        let mut encoder = png::Encoder::new(&mut bytes, 60, 60);
        encoder.set_color(png::ColorType::Rgba);
        let mut writer = encoder.write_header().unwrap();
        let pixels: Vec<u8> = (0..60 * 60_i32)
            .flat_map(|i| {
                let (x, y) = (i % 60 - 30, i / 60 - 30);
                let d = x * x + y * y;
                if (500..900).contains(&d) {
                    [200, 30, 30, 255]
                } else {
                    [0, 0, 0, 0]
                }
            })
            .collect();
        writer.write_image_data(&pixels).unwrap();
    }
    bytes
}

fn copy(holding: &SecretKey, n: usize) -> Vec<u8> {
    let (title, title_sha256) = sealed_title(&format!("婚姻登记档案（第{n}件）"));
    seal(
        holding,
        CopyStatement {
            holding: "B".into(),
            receiving: "A".into(),
            request_id: "0123456789abcdef0123456789abcdef".into(),
            archive_number: format!("J201-HY·2007-Y-{n:05}"),
            title,
            title_sha256,
            record_date: Some("2007-05-01".into()),
            released: 1_800_000_000,
            content_sha256: Some(sha256(b"scan")),
            metadata_sha256: sha256(b"{}"),
        }
        .encode(),
    )
}

fn entry(domain: &str, name: &str, key: &SecretKey) -> ArchiveEntry {
    ArchiveEntry {
        domain: domain.into(),
        display_name: name.into(),
        address: "贵州省兴义市桔山大道 1 号".into(),
        url: "https://a.example.cn/".into(),
        keys: vec![KeyRecord::new(
            &key.public(),
            time::OffsetDateTime::from_unix_timestamp(1_700_000_000).unwrap(),
        )],
    }
}

#[test]
fn the_certificate_pdf_shows_its_chinese_text_to_poppler_and_its_qr_code_decodes_to_a_payload_that_verifies(
) {
    let dir = tempfile::tempdir().unwrap();
    let a = SecretKey::generate(Algorithm::Sm2Sm3);
    let b = SecretKey::generate(Algorithm::Sm2Sm3);
    let head = CertificateStatement {
        issuer: "A".into(),
        code: new_code("A"),
        request_id: "0123456789abcdef0123456789abcdef".into(),
        issued: 1_800_000_100,
        applicant_name: "王秀英".into(),
        applicant_digest: "ab".repeat(16),
        purpose: "贷款".into(),
        searched_by: Some("id_card".into()),
        copies: Vec::new(),
        not_provided: Vec::new(),
        sheet: 1,
        sheets: 1,
    };
    let copies = (1..=8).map(|n| copy(&b, n)).collect();
    let refused = NotProvided {
        holding: Some("B".into()),
        records: vec!["J201-RS·1990-C-00007".into()],
        why: "refused".into(),
        reason: Some("涉及第三人隐私".into()),
    };
    let sheets = seal_sheets(&head, copies, vec![refused], &a).unwrap();
    assert!(sheets.len() >= 2, "eight copies fill more than one sheet");
    let trust = TrustList::new(
        "c",
        true,
        vec![
            entry("A", "兴义市档案馆", &a),
            entry("B", "黔西南州档案馆", &b),
        ],
    );
    let archives: BTreeMap<String, ArchiveEntry> = trust
        .archives
        .iter()
        .map(|e| (e.domain.clone(), e.clone()))
        .collect();
    let views: Vec<SheetView> = sheets
        .into_iter()
        .map(|s| SheetView {
            copies: s
                .statement
                .copies
                .iter()
                .map(|c| CopyStatement::decode(&Opened::parse(c).unwrap().payload).unwrap())
                .collect(),
            qr: xarchive_seal::certificate::qr(&s.payload).unwrap(),
            statement: s.statement,
            payload: s.payload,
        })
        .collect();
    for v in &views {
        assert!(matches!(v.qr.version(), qrcode::Version::Normal(n) if n <= MAX_QR_VERSION));
    }
    let document = CertificateDocument {
        issuer: &archives["A"],
        archives: &archives,
        sheets: &views,
        seal_image: Some(&seal_png()),
    };
    let font = CertificateFont::find().expect("a Chinese font (fonts-wqy-microhei)");
    let bytes = pdf::render(&document, &font).unwrap();
    eprintln!("the PDF of {} sheets is {} bytes", views.len(), bytes.len());
    assert!(bytes.len() <= 200 * 1024, "{} bytes", bytes.len());
    let file = dir.path().join("certificate.pdf");
    std::fs::write(&file, &bytes).unwrap();

    // The archive's seal, printed on every page beside the QR code.
    let images = run("pdfimages", &["-list", path(&file)]);
    let pages_with_the_seal = images
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|cols| cols.get(2) == Some(&"image") && cols.get(3) == Some(&"60"))
        .count();
    assert_eq!(pages_with_the_seal, views.len(), "{images}");

    let text = run("pdftotext", &["-layout", path(&file), "-"]);
    for expected in [
        "档案查询证明",
        "王秀英",
        "黔西南州档案馆",
        "兴义市档案馆",
        "J201-HY·2007-Y-00001",
        "涉及第三人隐私",
        &views[0].statement.code,
    ] {
        assert!(
            text.contains(expected),
            "pdftotext shows no {expected:?}:\n{text}"
        );
    }
    // The payloads are read back from the file itself.
    let payloads = pdf::payloads(&bytes).unwrap();
    assert_eq!(payloads.len(), views.len());

    // Each page as an image at a printer's resolution, its QR code read
    // by zbar.
    run(
        "pdftoppm",
        &[
            "-r",
            "300",
            "-png",
            path(&file),
            path(&dir.path().join("page")),
        ],
    );
    let mut pages: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "png"))
        .collect();
    pages.sort();
    assert_eq!(pages.len(), views.len());
    for (page, view) in pages.iter().zip(&views) {
        let decoded = run("zbarimg", &["--quiet", "--raw", "-Sbinary", path(page)]);
        let decoded = decoded.trim_end_matches('\n');
        assert_eq!(decoded, view.payload);
        let verified = verify_certificate(decoded, &trust).unwrap();
        assert_eq!(verified.statement.applicant_name, "王秀英");
    }
}
