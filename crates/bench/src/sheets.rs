//! The client's memory while `xarchive import` reads hostile spreadsheets:
//! a workbook of a kilobyte and a half whose dimension claims every cell
//! (A1:XFD1048576), and two of some 5 MB that expand to gigabytes of XML,
//! one in the sheet (rows of styled empty cells), one in the shared
//! strings. The import's own process and its spreadsheet reader child are
//! both measured (`VmHWM` of each, read every few milliseconds until it
//! ends: the high-water mark only grows, so the last reading is its peak
//! but for what a last few milliseconds might add), and their sum is the
//! client's memory. The hostile ones are sent nowhere (the import is
//! pointed at a closed port: reading is what is measured); beside them, a
//! catalogue of the usual shape (档号, 题名, 年度, 保管期限, 责任者, 姓名,
//! 出生日期; its text in shared strings, as Excel writes it) is imported
//! into a real domain.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Serialize;

use super::child::{parse_status, xarchive_beside, ServeChild};

#[derive(clap::Args)]
pub struct SheetsBenchArgs {
    /// Where the workbooks are written (default: a temporary directory).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// The XML each bomb expands to, in MiB.
    #[arg(long, default_value_t = 1536)]
    expand_mib: u64,
    /// The reader's memory bound given to the import, in MiB.
    #[arg(long, default_value_t = 128)]
    sheet_memory: u64,
    /// Rows of the real-shaped catalogue imported into a real domain.
    #[arg(long, default_value_t = 200_000)]
    catalogue_rows: u64,
}

/// One workbook read.
#[derive(Serialize)]
struct Measured {
    workbook: &'static str,
    file_bytes: u64,
    expands_to_bytes: u64,
    import_peak_bytes: u64,
    /// None: the reader ended before its memory was first read.
    reader_peak_bytes: Option<u64>,
    client_peak_bytes: u64,
    seconds: f64,
    exit_code: Option<i32>,
    said: String,
}

const MIB: u64 = 1 << 20;

pub async fn run(args: SheetsBenchArgs) -> anyhow::Result<ExitCode> {
    let temp = tempfile::tempdir()?;
    let dir = args.dir.clone().unwrap_or_else(|| temp.path().to_owned());
    std::fs::create_dir_all(&dir)?;
    let exe = xarchive_beside(&std::env::current_exe()?)?;
    let expand = args.expand_mib * MIB;

    let claims = dir.join("claims-every-cell.xlsx");
    let claims_expands = write_workbook(&claims, claims_sheet, None)?;
    let sheet_bomb = dir.join("sheet-bomb.xlsx");
    let sheet_expands = write_workbook(&sheet_bomb, |out| empty_rows(out, expand), None)?;
    let strings_bomb = dir.join("shared-strings-bomb.xlsx");
    let strings_expands = write_workbook(
        &strings_bomb,
        |out| {
            out.write_all(
                format!("{SHEET_OPEN}<sheetData><row r=\"1\"><c r=\"A1\" t=\"s\"><v>0</v></c></row></sheetData></worksheet>").as_bytes(),
            )?;
            Ok(0)
        },
        Some(&|out: &mut dyn Write| one_long_string(out, expand)),
    )?;

    let catalogue = dir.join("catalogue.xlsx");
    let rows = args.catalogue_rows;
    let catalogue_expands = write_workbook(
        &catalogue,
        |out| catalogue_sheet(out, rows),
        Some(&|out: &mut dyn Write| catalogue_strings(out, rows)),
    )?;
    let domain = ServeChild::start("S", &dir.join("S"), &[], &dir.join("S.log")).await?;

    let mut results = Vec::new();
    for (name, path, expands, server) in [
        ("claims A1:XFD1048576", &claims, claims_expands, CLOSED),
        (
            "sheet of styled empty cells",
            &sheet_bomb,
            sheet_expands,
            CLOSED,
        ),
        ("one shared string", &strings_bomb, strings_expands, CLOSED),
        (
            "a catalogue, into a domain",
            &catalogue,
            catalogue_expands,
            domain.url.as_str(),
        ),
    ] {
        let measured = measure(&exe, name, path, expands, args.sheet_memory, server).await?;
        let reader = measured.reader_peak_bytes.map_or_else(
            || "(ended unread)".to_owned(),
            |b| format!("{:.1} MB", b as f64 / 1e6),
        );
        println!(
            "{:<28} {:>9.2} MB → {:>8.1} MB of XML: import {:>6.1} MB + reader {reader} = {:>6.1} MB peak, {:.1} s, exit {:?}: {}",
            measured.workbook,
            measured.file_bytes as f64 / 1e6,
            measured.expands_to_bytes as f64 / 1e6,
            measured.import_peak_bytes as f64 / 1e6,
            measured.client_peak_bytes as f64 / 1e6,
            measured.seconds,
            measured.exit_code,
            measured.said,
        );
        results.push(measured);
    }
    println!("{}", serde_json::to_string_pretty(&results)?);
    domain.stop().await?;
    Ok(ExitCode::SUCCESS)
}

/// A port nothing listens on: the hostile workbooks are only read.
const CLOSED: &str = "http://127.0.0.1:1";

/// Runs `xarchive import PATH` until it ends, reading the memory of it and
/// of its children every few milliseconds.
async fn measure(
    exe: &Path,
    workbook: &'static str,
    path: &Path,
    expands_to_bytes: u64,
    sheet_memory: u64,
    server: &str,
) -> anyhow::Result<Measured> {
    let started = Instant::now();
    let mut child = tokio::process::Command::new(exe)
        .arg("import")
        .arg(path)
        .args(["--sheet-memory", &sheet_memory.to_string()])
        .args(["--server", server])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot run xarchive import")?;
    let pid = child.id().context("the import has no process")?;
    let (mut import_peak, mut reader_peak) = (0u64, 0u64);
    let status = loop {
        import_peak = import_peak.max(hwm(pid).unwrap_or(0));
        for reader in children(pid) {
            reader_peak = reader_peak.max(hwm(reader).unwrap_or(0));
        }
        if let Some(status) = child.try_wait()? {
            break status;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let out = child.wait_with_output().await?;
    let said = String::from_utf8_lossy(&out.stderr)
        .lines()
        .chain(String::from_utf8_lossy(&out.stdout).lines())
        .rfind(|l| l.starts_with("error") || l.starts_with("imported"))
        .unwrap_or_default()
        .chars()
        .take(160)
        .collect();
    Ok(Measured {
        workbook,
        file_bytes: std::fs::metadata(path)?.len(),
        expands_to_bytes,
        import_peak_bytes: import_peak,
        reader_peak_bytes: (reader_peak > 0).then_some(reader_peak),
        client_peak_bytes: import_peak + reader_peak,
        seconds: started.elapsed().as_secs_f64(),
        exit_code: status.code(),
        said,
    })
}

/// `VmHWM` of a process, if it is still there.
fn hwm(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_status(&text).map(|m| m.hwm)
}

/// The children of every thread of `pid` (the reader is spawned from the
/// import's reading thread).
fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .filter_map(Result::ok)
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|list| {
            list.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

const SHEET_OPEN: &str = r#"<?xml version="1.0" encoding="UTF-8"?><worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">"#;

/// Writes one part of a workbook; how many bytes.
type Part<'a> = &'a dyn Fn(&mut dyn Write) -> std::io::Result<u64>;

/// A workbook of one sheet, its XML from `sheet` (and shared strings from
/// `shared`); how many bytes of XML those two wrote.
fn write_workbook(
    path: &Path,
    sheet: impl FnOnce(&mut dyn Write) -> std::io::Result<u64>,
    shared: Option<Part>,
) -> anyhow::Result<u64> {
    use zip::write::SimpleFileOptions;
    let mut zip = zip::ZipWriter::new(std::fs::File::create(path)?);
    let options = SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .compression_level(Some(9))
        .large_file(true);
    let parts = [
        (
            "[Content_Types].xml",
            r#"<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/><Override PartName="/xl/worksheets/sheet1.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/></Types>"#,
        ),
        (
            "_rels/.rels",
            r#"<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="xl/workbook.xml"/></Relationships>"#,
        ),
        (
            "xl/workbook.xml",
            r#"<?xml version="1.0" encoding="UTF-8"?><workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><sheets><sheet name="Sheet1" sheetId="1" r:id="rId1"/></sheets></workbook>"#,
        ),
        (
            "xl/_rels/workbook.xml.rels",
            r#"<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/></Relationships>"#,
        ),
    ];
    for (name, xml) in parts {
        zip.start_file(name, options)?;
        zip.write_all(xml.as_bytes())?;
    }
    zip.start_file("xl/worksheets/sheet1.xml", options)?;
    let mut expands = sheet(&mut zip)?;
    if let Some(shared) = shared {
        zip.start_file("xl/sharedStrings.xml", options)?;
        expands += shared(&mut zip)?;
    }
    zip.finish()?;
    Ok(expands)
}

/// A header, two rows, under a dimension claiming every cell a sheet has.
fn claims_sheet(out: &mut dyn Write) -> std::io::Result<u64> {
    let cell = |at: &str, value: &str| {
        format!("<c r=\"{at}\" t=\"inlineStr\"><is><t>{value}</t></is></c>")
    };
    let xml = format!(
        "{SHEET_OPEN}<dimension ref=\"A1:XFD1048576\"/><sheetData><row r=\"1\">{}{}</row><row r=\"2\">{}{}</row><row r=\"3\">{}{}</row></sheetData></worksheet>",
        cell("A1", "档号"),
        cell("B1", "题名"),
        cell("A2", "H-1"),
        cell("B2", "第一件"),
        cell("A3", "H-2"),
        cell("B3", "第二件"),
    );
    out.write_all(xml.as_bytes())?;
    Ok(xml.len() as u64)
}

/// Rows of styled empty cells (what a sheet formatted to its last row
/// holds), within a spreadsheet's 1,048,576 rows, `bytes` of them.
fn empty_rows(out: &mut dyn Write, bytes: u64) -> std::io::Result<u64> {
    const ROWS: u64 = 1_000_000;
    let cells = (bytes / ROWS / 10).clamp(1, 16_384);
    let row = format!("<row>{}</row>", "<c s=\"1\"/>".repeat(cells as usize));
    out.write_all(SHEET_OPEN.as_bytes())?;
    out.write_all(b"<sheetData>")?;
    for _ in 0..ROWS {
        out.write_all(row.as_bytes())?;
    }
    out.write_all(b"</sheetData></worksheet>")?;
    Ok(SHEET_OPEN.len() as u64 + 35 + ROWS * row.len() as u64)
}

/// One shared string of `bytes` letters.
fn one_long_string(out: &mut dyn Write, bytes: u64) -> std::io::Result<u64> {
    let open = br#"<?xml version="1.0" encoding="UTF-8"?><sst xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" count="1" uniqueCount="1"><si><t>"#;
    out.write_all(open)?;
    let block = vec![b'a'; usize::try_from(MIB).expect("a mebibyte")];
    for _ in 0..bytes / MIB {
        out.write_all(&block)?;
    }
    out.write_all(b"</t></si></sst>")?;
    Ok(open.len() as u64 + bytes / MIB * MIB + 15)
}

/// The catalogue's sheet: row 1 its header, then `rows` records, every
/// text a shared string (see [`catalogue_strings`] for their order).
fn catalogue_sheet(out: &mut dyn Write, rows: u64) -> std::io::Result<u64> {
    let mut written = 0u64;
    let mut put = |out: &mut dyn Write, text: &str| -> std::io::Result<()> {
        written += text.len() as u64;
        out.write_all(text.as_bytes())
    };
    put(out, SHEET_OPEN)?;
    put(out, "<sheetData><row r=\"1\">")?;
    for (col, _) in CATALOGUE_HEADER.iter().enumerate() {
        put(
            out,
            &format!("<c r=\"{}1\" t=\"s\"><v>{col}</v></c>", column(col)),
        )?;
    }
    put(out, "</row>")?;
    for n in 0..rows {
        let r = n + 2;
        // Per row: id, title, name, date as shared strings of their own;
        // year a number; retention and creator shared strings met before.
        let own = FIRST_OWN + n * 4;
        let cells = [
            format!("<c r=\"A{r}\" t=\"s\"><v>{own}</v></c>"),
            format!("<c r=\"B{r}\" t=\"s\"><v>{}</v></c>", own + 1),
            format!("<c r=\"C{r}\"><v>{}</v></c>", 1990 + n % 30),
            format!("<c r=\"D{r}\" t=\"s\"><v>{}</v></c>", 7 + n % 2),
            format!("<c r=\"E{r}\" t=\"s\"><v>{}</v></c>", 9 + n % 2),
            format!("<c r=\"F{r}\" t=\"s\"><v>{}</v></c>", own + 2),
            format!("<c r=\"G{r}\" t=\"s\"><v>{}</v></c>", own + 3),
        ];
        put(out, &format!("<row r=\"{r}\">{}</row>", cells.concat()))?;
    }
    put(out, "</sheetData></worksheet>")?;
    Ok(written)
}

const CATALOGUE_HEADER: [&str; 7] = [
    "档号",
    "题名",
    "年度",
    "保管期限",
    "责任者",
    "姓名",
    "出生日期",
];

/// A column's letters (A, B, …), for the first 26.
fn column(i: usize) -> char {
    char::from(b'A' + u8::try_from(i).expect("the first 26"))
}

/// Where each row's own shared strings begin: after the header's seven
/// and the four values rows share (永久, 30年, 办公室, 人事处).
const FIRST_OWN: u64 = 11;

/// The catalogue's shared strings: the header, the values rows share,
/// then four of each row's own.
fn catalogue_strings(out: &mut dyn Write, rows: u64) -> std::io::Result<u64> {
    const SURNAMES: [&str; 8] = ["王", "李", "张", "刘", "陈", "杨", "赵", "黄"];
    const GIVEN: [&str; 8] = ["伟", "芳", "娜", "敏", "静", "丽", "强", "磊"];
    let mut written = 0u64;
    let mut put = |out: &mut dyn Write, text: &str| -> std::io::Result<()> {
        written += text.len() as u64;
        out.write_all(text.as_bytes())
    };
    let si = |text: &str| format!("<si><t>{text}</t></si>");
    put(
        out,
        r#"<?xml version="1.0" encoding="UTF-8"?><sst xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">"#,
    )?;
    for text in CATALOGUE_HEADER
        .iter()
        .chain(&["永久", "30年", "办公室", "人事处"])
    {
        put(out, &si(text))?;
    }
    for n in 0..rows {
        let surname = SURNAMES[(n % 8) as usize];
        let given = GIVEN[(n / 8 % 8) as usize];
        put(
            out,
            &si(&format!("J{:03}-RS·{}-Y-{:06}", n % 500, 1990 + n % 30, n)),
        )?;
        put(
            out,
            &si(&format!("关于{surname}{given}同志第{n}号任免事项的通知")),
        )?;
        put(out, &si(&format!("{surname}{given}{}", n % 97)))?;
        put(
            out,
            &si(&format!(
                "{}-{:02}-{:02}",
                1940 + n % 50,
                1 + n % 12,
                1 + n % 28
            )),
        )?;
    }
    put(out, "</sst>")?;
    Ok(written)
}
