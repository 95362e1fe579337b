//! What a county archive's catalogue and the files made from it must not
//! do, against a real domain: names with birth dates kept in clear, a
//! spreadsheet running an exported title as a formula, identity numbers in
//! files others can read, a repeated archive number replacing its first
//! line without a word, a few bytes of spreadsheet taking the client's
//! memory. Every file is made here: CSV in UTF-8 and GB18030, .xlsx, .xls.

use crate::common::{bin, text, xarchive};

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use proptest::prelude::*;
use xarchive_node::wire::SearchBody;
use xarchive_node::Record;
use xarchive_testkit::{tempdir, Spawn};

fn get(server: &str, id: &str) -> Option<Record> {
    let out = xarchive(&["get", id], server);
    match out.status.code() {
        Some(0) => Some(serde_json::from_slice(&out.stdout).expect("a record")),
        Some(3) => None,
        _ => panic!("get {id}: {}", text(&out)),
    }
}

/// The IDs of the records a search by `key` (TYPE=VALUE) finds.
fn search(server: &str, key: &str) -> Vec<String> {
    let out = xarchive(&["search", "--key", key, "--json"], server);
    assert!(out.status.success(), "{}", text(&out));
    let found: SearchBody = serde_json::from_slice(&out.stdout).expect("a search answer");
    let mut ids: Vec<String> = found.records.iter().map(|r| r.id.to_string()).collect();
    ids.sort();
    ids
}

fn import(file: &Path, extra: &[&str], server: &str) -> Output {
    let mut args = vec!["import", file.to_str().unwrap()];
    args.extend(extra);
    xarchive(&args, server)
}

/// A minimal .xls (BIFF8 in a compound file, as Excel 97–2003 writes it):
/// one sheet, every cell a text (LABEL) record.
fn write_xls(path: &Path, rows: &[&[&str]]) {
    fn record(out: &mut Vec<u8>, kind: u16, data: &[u8]) {
        out.extend(kind.to_le_bytes());
        out.extend(u16::try_from(data.len()).unwrap().to_le_bytes());
        out.extend(data);
    }
    fn utf16(s: &str) -> Vec<u8> {
        s.encode_utf16().flat_map(u16::to_le_bytes).collect()
    }
    let bof = |kind: u16| {
        let mut data = vec![0x00, 0x06];
        data.extend(kind.to_le_bytes());
        data.extend([0u8; 12]);
        data
    };
    let name = "目录";
    let mut sheet = Vec::new();
    record(&mut sheet, 0x0809, &bof(0x0010));
    for (r, row) in rows.iter().enumerate() {
        for (c, cell) in row.iter().enumerate() {
            let mut data = Vec::new();
            data.extend(u16::try_from(r).unwrap().to_le_bytes());
            data.extend(u16::try_from(c).unwrap().to_le_bytes());
            data.extend(0u16.to_le_bytes());
            data.extend(
                u16::try_from(cell.encode_utf16().count())
                    .unwrap()
                    .to_le_bytes(),
            );
            data.push(1);
            data.extend(utf16(cell));
            record(&mut sheet, 0x0204, &data);
        }
    }
    record(&mut sheet, 0x000A, &[]);
    let mut globals = Vec::new();
    record(&mut globals, 0x0809, &bof(0x0005));
    record(&mut globals, 0x0042, &1200u16.to_le_bytes());
    // The BoundSheet8 record (its header, then 8 bytes and the name), then EOF.
    let bound_len = 4 + 8 + utf16(name).len();
    let sheet_at = globals.len() + bound_len + 4;
    let mut bound = u32::try_from(sheet_at).unwrap().to_le_bytes().to_vec();
    bound.extend([0, 0, u8::try_from(name.chars().count()).unwrap(), 1]);
    bound.extend(utf16(name));
    record(&mut globals, 0x0085, &bound);
    record(&mut globals, 0x000A, &[]);
    assert_eq!(globals.len(), sheet_at);
    globals.extend(sheet);
    // Past the last EOF nothing is read: the stream is made long enough to
    // be a regular stream of the compound file, as Excel's are.
    globals.resize(globals.len().max(8192), 0);
    // Version 3 (512-byte sectors), as Excel writes them.
    let mut file = cfb::CompoundFile::create_with_version(
        cfb::Version::V3,
        std::fs::File::create(path).unwrap(),
    )
    .unwrap();
    let mut stream = file.create_stream("Workbook").unwrap();
    stream.write_all(&globals).unwrap();
    stream.flush().unwrap();
    drop(stream);
    file.flush().unwrap();
}

/// A catalogue with people in it, in every shape an archive has one.
const PEOPLE: [(&str, &str, &str, &str); 4] = [
    ("RS-1", "王7华同志任职的通知", "王7华", "1960-08-17"),
    ("RS-2", "李四同志退休的通知", "李四", "1955.3.9"),
    ("RS-3", "张三同志调动的通知", "张三", "1948年10月1日"),
    ("RS-4", "赵六同志的档案", "赵六", "19700102"),
];

#[test]
fn names_with_birth_dates_become_the_private_key_from_csv_gb18030_xlsx_and_xls() {
    let dir = tempdir().unwrap();
    let domain = Spawn::new(bin(), "A", &dir.path().join("A")).start();
    let url = domain.url.as_str();

    let mut csv = String::from("档号,题名,姓名,出生日期\n");
    for (id, title, name, born) in PEOPLE {
        csv.push_str(&format!("{id},{title},{name},{born}\n"));
    }
    csv.push_str("RS-5,无名氏的档案,钱七,\n");
    let utf8 = dir.path().join("people.csv");
    std::fs::write(&utf8, &csv).unwrap();
    let out = import(&utf8, &[], url);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("姓名 → key:name_birth.name, 出生日期 → key:name_birth.date"),
        "{said}"
    );
    assert!(said.contains("imported 4 records (4 created"), "{said}");
    assert!(
        said.contains("line 6: invalid_row: has a name in column \"姓名\" but no birth date in column \"出生日期\""),
        "{said}"
    );
    assert!(!said.contains("钱七"), "{said}");
    for (id, _, _, born) in PEOPLE {
        // The name is in the title, as catalogues write it; the birth date
        // nowhere a read token reaches.
        let record = get(url, id).expect("imported");
        assert_eq!(record.keys_withheld, ["name_birth"], "{id}");
        assert!(record.metadata.is_empty(), "{id}: {:?}", record.metadata);
        let shown = serde_json::to_string(&record).unwrap();
        assert!(!shown.contains(born), "{shown}");
    }
    // Found by a search, in any spelling of the date.
    assert_eq!(search(url, "name_birth=王7华|1960-08-17"), ["RS-1"]);
    assert_eq!(search(url, "name_birth=李四|1955年3月9日"), ["RS-2"]);
    assert_eq!(search(url, "name_birth=张三|19481001"), ["RS-3"]);
    assert_eq!(search(url, "name_birth=赵六|1970/1/2"), ["RS-4"]);

    // GB18030, with 出生年月 and the dates of a spreadsheet saved as text.
    let gb = "档号,题名,人员姓名,出生年月\nGB-1,甲的档案,孙八,1960/8/17 0:00\nGB-2,乙的档案,周九,1962.05\n";
    let path = dir.path().join("people-gb18030.csv");
    std::fs::write(&path, encoding_rs::GB18030.encode(gb).0).unwrap();
    let out = import(&path, &[], url);
    let said = text(&out);
    assert!(said.contains("imported 1 records"), "{said}");
    assert!(
        said.contains("line 3: invalid_record: key name_birth is not a valid name and birth date: it has a birth year and month but no day"),
        "{said}"
    );
    assert_eq!(search(url, "name_birth=孙八|1960-08-17"), ["GB-1"]);

    // A spreadsheet: the birth date a date cell, under 生日.
    let xlsx = dir.path().join("people.xlsx");
    {
        use rust_xlsxwriter::{ExcelDateTime, Format, Workbook};
        let mut workbook = Workbook::new();
        let sheet = workbook.add_worksheet();
        for (col, h) in ["档号", "题名", "姓名", "生日"].iter().enumerate() {
            sheet
                .write_string(0, u16::try_from(col).unwrap(), *h)
                .unwrap();
        }
        sheet.write_string(1, 0, "XL-1").unwrap();
        sheet.write_string(1, 1, "丙的档案").unwrap();
        sheet.write_string(1, 2, "吴十").unwrap();
        let date = Format::new().set_num_format("yyyy年m月d日");
        let born = ExcelDateTime::from_ymd(1966, 6, 1).unwrap();
        sheet
            .write_datetime_with_format(1, 3, &born, &date)
            .unwrap();
        workbook.save(&xlsx).unwrap();
    }
    let out = import(&xlsx, &[], url);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(search(url, "name_birth=吴十|1966-06-01"), ["XL-1"]);

    // An .xls, a --map keeping the name in clear too.
    let xls = dir.path().join("people.xls");
    write_xls(
        &xls,
        &[
            &["档号", "题名", "姓名", "出生日期"],
            &["XS-1", "丁的档案", "郑十一", "1950年11月25日"],
        ],
    );
    let out = import(
        &xls,
        &["--map", "姓名=key:name_birth.name,姓名=metadata.name"],
        url,
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(search(url, "name_birth=郑十一|1950-11-25"), ["XS-1"]);
    let record = get(url, "XS-1").expect("imported");
    assert_eq!(
        serde_json::Value::Object(record.metadata),
        serde_json::json!({"name": "郑十一"})
    );

    // An export says it left them out, and carries none.
    let exported = dir.path().join("all.csv");
    let out = xarchive(&["export", exported.to_str().unwrap()], url);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("hold private keys (identity numbers, names with birth dates)"),
        "{}",
        text(&out)
    );
    let written = std::fs::read_to_string(&exported).unwrap();
    for (_, _, _, born) in PEOPLE {
        assert!(!written.contains(born), "{written}");
    }
    assert!(!written.contains("1966-06-01"), "{written}");
}

/// Titles a spreadsheet would run, and their near misses (never blank:
/// a blank title is refused on import).
fn hostile_title() -> impl Strategy<Value = String> {
    (
        prop::sample::select(vec![
            "=",
            "+",
            "-",
            "@",
            "\t",
            "\r",
            "'",
            "''",
            "＝",
            " =",
            "=HYPERLINK(",
            "@SUM(",
        ]),
        "[a-zA-Z0-9\"',()=+\\-@:/. 点此档案\n]{0,16}",
    )
        .prop_map(|(head, rest)| format!("{head}{rest}题"))
}

/// A CSV export (UTF-8 and GB18030) that a spreadsheet opens shows every
/// hostile cell as text, and imports back to the same records: a property
/// over titles and metadata, between two domains kept for every case.
#[test]
fn a_csv_export_runs_no_formula_and_imports_back_to_the_same_records() {
    let dir = tempdir().unwrap();
    let source = Spawn::new(bin(), "A", &dir.path().join("A")).start();
    let target = Spawn::new(bin(), "B", &dir.path().join("B")).start();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let client =
        xarchive_node::ApiClient::new(&source.url, std::time::Duration::from_secs(10)).unwrap();
    let case = std::cell::Cell::new(0u32);
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(12));
    let cases = (
        prop::collection::vec(hostile_title(), 1..4),
        hostile_title(),
    );
    let outcome = runner.run(&cases, |(titles, note)| {
        case.set(case.get() + 1);
        let case = case.get();
        let mut before = Vec::new();
        for (i, title) in titles.iter().enumerate() {
            let id = format!("C{case}-{i}");
            let body = serde_json::json!({
                "title": title,
                "metadata": {"case": case.to_string(), "note": note},
            });
            runtime.block_on(client.put(&id, &body)).unwrap();
            before.push(get(&source.url, &id).expect("put"));
        }
        let filter = format!("metadata.case={case}");
        for encoding in ["utf-8", "gb18030"] {
            let file = dir.path().join(format!("case-{case}-{encoding}.csv"));
            let out = xarchive(
                &[
                    "export",
                    file.to_str().unwrap(),
                    "--filter",
                    &filter,
                    "--encoding",
                    encoding,
                ],
                &source.url,
            );
            prop_assert!(out.status.success(), "{}", text(&out));
            let bytes = std::fs::read(&file).unwrap();
            let written = if encoding == "gb18030" {
                encoding_rs::GB18030.decode(&bytes).0.into_owned()
            } else {
                String::from_utf8(bytes).unwrap()
            };
            let mut reader = csv::ReaderBuilder::new()
                .has_headers(false)
                .from_reader(written.trim_start_matches('\u{feff}').as_bytes());
            for row in reader.records() {
                for cell in &row.unwrap() {
                    prop_assert!(
                        !cell.starts_with(['=', '+', '-', '@', '\t', '\r', '＝']),
                        "a cell a spreadsheet would run: {cell:?}"
                    );
                }
            }
            let out = import(&file, &[], &target.url);
            prop_assert!(out.status.success(), "{}", text(&out));
            for was in &before {
                let now = get(&target.url, &was.id.to_string()).expect("imported");
                prop_assert_eq!(&now.title, &was.title);
                prop_assert_eq!(&now.metadata, &was.metadata);
            }
        }
        Ok(())
    });
    if let Err(e) = outcome {
        panic!("{e}");
    }
}

/// Runs `xarchive args` with umask 000, as a careless shell would.
fn with_open_umask(args: &[&str], server: &str) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg("umask 000; exec \"$0\" \"$@\"")
        .arg(bin())
        .args(args)
        .env("XARCHIVE_SERVER", server)
        .stdin(Stdio::null())
        .output()
        .expect("sh runs")
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn exports_rejects_and_backups_are_readable_by_their_owner_alone_whatever_the_umask() {
    let dir = tempdir().unwrap();
    let domain = Spawn::new(bin(), "A", &dir.path().join("A")).start();
    let url = domain.url.as_str();
    let catalogue = dir.path().join("catalogue.csv");
    std::fs::write(
        &catalogue,
        "档号,题名,身份证号\nP-1,甲,11010519491231002X\nP-2,乙,110105194912310021\n",
    )
    .unwrap();
    let rejects = dir.path().join("rejects.csv");
    // One already there, readable by all: replaced, not reused.
    std::fs::write(&rejects, "old").unwrap();
    std::fs::set_permissions(&rejects, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = with_open_umask(
        &[
            "import",
            catalogue.to_str().unwrap(),
            "--rejects",
            rejects.to_str().unwrap(),
        ],
        url,
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(std::fs::read_to_string(&rejects)
        .unwrap()
        .contains("110105194912310021"));
    assert_eq!(mode(&rejects), 0o600);

    for file in ["all.ndjson", "all.csv", "all.xlsx"] {
        let path = dir.path().join(file);
        let out = with_open_umask(&["export", path.to_str().unwrap()], url);
        assert!(out.status.success(), "{file}: {}", text(&out));
        assert_eq!(mode(&path), 0o600, "{file}");
    }
    let backup = dir.path().join("A.xarchive-backup");
    let out = with_open_umask(&["backup", "--to", backup.to_str().unwrap()], url);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(mode(&backup), 0o600);
    // Restored into a directory made beforehand, readable by all, with
    // the domain's own backup key (it has no cluster secret), which the
    // restored directory keeps too.
    let data = dir.path().join("restored");
    std::fs::create_dir(&data).unwrap();
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();
    let key = dir.path().join("A").join("seal").join("backup.key");
    assert_eq!(mode(&key), 0o600);
    let out = with_open_umask(
        &[
            "restore",
            backup.to_str().unwrap(),
            "--data",
            data.to_str().unwrap(),
            "--backup-key-file",
            key.to_str().unwrap(),
        ],
        url,
    );
    assert!(out.status.success(), "{}", text(&out));
    let restored: Vec<_> = std::fs::read_dir(&data)
        .unwrap()
        .filter_map(Result::ok)
        .collect();
    assert!(!restored.is_empty());
    // Files its owner's alone; folders (the seal's) its owner's to enter.
    for file in restored {
        let path = file.path();
        let owner_only = if path.is_dir() { 0o700 } else { 0o600 };
        assert_eq!(mode(&path), owner_only, "{}", path.display());
        if path.is_dir() {
            for inner in std::fs::read_dir(&path).unwrap().filter_map(Result::ok) {
                assert_eq!(mode(&inner.path()), 0o600, "{}", inner.path().display());
            }
        }
    }
    // Nothing half-written is left beside them.
    let partial = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().ends_with(".partial"))
        .count();
    assert_eq!(partial, 0);
}

#[test]
fn an_archive_number_twice_in_a_file_rejects_the_later_line_and_importing_again_replaces() {
    let dir = tempdir().unwrap();
    let domain = Spawn::new(bin(), "A", &dir.path().join("A")).start();
    let url = domain.url.as_str();
    let csv = dir.path().join("twice.csv");
    std::fs::write(
        &csv,
        "档号,题名\nD-1,第一次\nD-2,另一件\nD-1,第二次\nD-3,\nD-2 ,又一次\n",
    )
    .unwrap();
    let rejects = dir.path().join("rejects.csv");
    let out = import(&csv, &["--rejects", rejects.to_str().unwrap()], url);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("imported 2 records (2 created, 0 replaced)"),
        "{said}"
    );
    assert!(
        said.contains("line 4: duplicate_id: the archive number of line 2 again: a file gives each record once"),
        "{said}"
    );
    assert!(
        said.contains("line 5: invalid_row: has no title (column \"题名\" is empty)"),
        "{said}"
    );
    assert!(
        said.contains("line 6: duplicate_id: the archive number of line 3 again"),
        "{said}"
    );
    assert_eq!(get(url, "D-1").expect("imported").title, "第一次");
    assert!(get(url, "D-3").is_none());
    let written = std::fs::read_to_string(&rejects).unwrap();
    assert!(
        written.contains("4,duplicate_id: the archive number of line 2 again"),
        "{written}"
    );

    // Importing the same file again is another import: each line
    // replaces its record, as before.
    std::fs::write(&csv, "档号,题名\nD-1,改过的题名\nD-3,\n").unwrap();
    let out = import(&csv, &["--allow-empty-title"], url);
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("(1 created, 1 replaced)"), "{said}");
    assert_eq!(get(url, "D-1").expect("replaced").title, "改过的题名");
    assert_eq!(get(url, "D-3").expect("allowed").title, "");

    // NDJSON alike.
    let ndjson = dir.path().join("twice.ndjson");
    std::fs::write(
        &ndjson,
        "{\"id\":\"N-1\",\"title\":\"a\"}\n{\"id\":\"N-1\",\"title\":\"b\"}\n{\"id\":\"N-2\",\"title\":\" \"}\n",
    )
    .unwrap();
    let out = import(&ndjson, &[], url);
    let said = text(&out);
    assert!(
        said.contains("line 2: duplicate_id: the archive number of line 1 again"),
        "{said}"
    );
    assert!(said.contains("line 3: invalid_row: has no title"), "{said}");
    assert_eq!(get(url, "N-1").expect("imported").title, "a");
}

/// Writes one part of a workbook.
type Part<'a> = &'a dyn Fn(&mut dyn Write);

/// An .xlsx made by hand, as a hostile one is: its sheet's XML written by
/// `sheet`, and shared strings by `shared` if given.
fn write_xlsx(path: &Path, sheet: impl FnOnce(&mut dyn Write), shared: Option<Part>) {
    use zip::write::SimpleFileOptions;
    let mut zip = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    let options = SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
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
        zip.start_file(name, options).unwrap();
        zip.write_all(xml.as_bytes()).unwrap();
    }
    zip.start_file("xl/worksheets/sheet1.xml", options).unwrap();
    sheet(&mut zip);
    if let Some(shared) = shared {
        zip.start_file("xl/sharedStrings.xml", options).unwrap();
        shared(&mut zip);
    }
    zip.finish().unwrap();
}

/// A row of text cells, as inline strings.
fn xml_row(row: u32, cells: &[(&str, &str)]) -> String {
    let mut xml = format!("<row r=\"{row}\">");
    for (at, value) in cells {
        xml.push_str(&format!(
            "<c r=\"{at}\" t=\"inlineStr\"><is><t>{value}</t></is></c>"
        ));
    }
    xml.push_str("</row>");
    xml
}

const SHEET_OPEN: &str = r#"<?xml version="1.0" encoding="UTF-8"?><worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">"#;

#[test]
fn a_small_spreadsheet_claiming_every_cell_imports_the_rows_it_has() {
    let dir = tempdir().unwrap();
    let domain = Spawn::new(bin(), "A", &dir.path().join("A")).start();
    let path = dir.path().join("claims.xlsx");
    write_xlsx(
        &path,
        |out| {
            let mut xml = format!("{SHEET_OPEN}<dimension ref=\"A1:XFD1048576\"/><sheetData>");
            xml.push_str(&xml_row(1, &[("A1", "档号"), ("B1", "题名")]));
            xml.push_str(&xml_row(2, &[("A2", "H-1"), ("B2", "第一件")]));
            xml.push_str(&xml_row(3, &[("A3", "H-2"), ("B3", "第二件")]));
            // A real cell in the sheet's last: the row is too wide, no more.
            xml.push_str(&xml_row(
                1048576,
                &[("A1048576", "H-3"), ("XFD1048576", "x")],
            ));
            xml.push_str("</sheetData></worksheet>");
            out.write_all(xml.as_bytes()).unwrap();
        },
        None,
    );
    assert!(std::fs::metadata(&path).unwrap().len() < 4096);
    let out = import(&path, &[], &domain.url);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("imported 2 records (2 created"), "{said}");
    assert!(
        said.contains("line 1048576: invalid_row: has 16384 fields where the header has 2"),
        "{said}"
    );
    assert_eq!(get(&domain.url, "H-2").expect("imported").title, "第二件");
}

#[test]
fn rows_and_cells_past_a_spreadsheets_limits_stop_the_import_saying_so() {
    let dir = tempdir().unwrap();
    let domain = Spawn::new(bin(), "A", &dir.path().join("A")).start();
    let past = dir.path().join("past.xlsx");
    write_xlsx(
        &past,
        |out| {
            let mut xml = format!("{SHEET_OPEN}<sheetData>");
            xml.push_str(&xml_row(1, &[("A1", "档号"), ("B1", "题名")]));
            xml.push_str(&xml_row(2, &[("A2", "L-1"), ("B2", "在界内")]));
            xml.push_str(&xml_row(
                1048577,
                &[("A1048577", "L-2"), ("B1048577", "界外")],
            ));
            xml.push_str("</sheetData></worksheet>");
            out.write_all(xml.as_bytes()).unwrap();
        },
        None,
    );
    let out = import(&past, &[], &domain.url);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("row 1048577 is past the last row a spreadsheet has (1048576)"),
        "{said}"
    );
    assert!(said.contains("1 records were committed before"), "{said}");

    let long = dir.path().join("long.xlsx");
    let title = "档".repeat(32_768);
    write_xlsx(
        &long,
        |out| {
            let mut xml = format!("{SHEET_OPEN}<sheetData>");
            xml.push_str(&xml_row(1, &[("A1", "档号"), ("B1", "题名")]));
            xml.push_str(&xml_row(2, &[("A2", "L-3"), ("B2", &title)]));
            xml.push_str("</sheetData></worksheet>");
            out.write_all(xml.as_bytes()).unwrap();
        },
        None,
    );
    let out = import(&long, &[], &domain.url);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("row 2, column 2 holds more than 32767 characters"),
        "{said}"
    );
    assert!(!said.contains("档档"), "{said}");

    // A zip that is no workbook is told as such.
    let broken = dir.path().join("broken.xlsx");
    std::fs::write(&broken, b"PK\x03\x04 not a workbook").unwrap();
    let out = import(&broken, &[], &domain.url);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains(&format!(
            "cannot read {} as a spreadsheet",
            broken.display()
        )),
        "{said}"
    );
}

#[test]
fn a_spreadsheet_expanding_to_far_more_than_its_bytes_is_read_or_refused_within_the_readers_memory()
{
    let dir = tempdir().unwrap();
    let path = dir.path().join("bomb.xlsx");
    // 256 MiB of shared strings, in a few hundred kilobytes.
    let shared = |out: &mut dyn Write| {
        out.write_all(
            br#"<?xml version="1.0" encoding="UTF-8"?><sst xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" count="1" uniqueCount="1"><si><t>"#,
        )
        .unwrap();
        let block = vec![b'a'; 1 << 20];
        for _ in 0..256 {
            out.write_all(&block).unwrap();
        }
        out.write_all(b"</t></si></sst>").unwrap();
    };
    write_xlsx(
        &path,
        |out| {
            let xml = format!(
                "{SHEET_OPEN}<sheetData><row r=\"1\"><c r=\"A1\" t=\"s\"><v>0</v></c></row></sheetData></worksheet>"
            );
            out.write_all(xml.as_bytes()).unwrap();
        },
        Some(&shared),
    );
    assert!(std::fs::metadata(&path).unwrap().len() < 1 << 20);
    // No domain is needed: nothing is read far enough to be sent.
    let out = import(&path, &[], "http://127.0.0.1:1");
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("needs more than 128 MiB of memory to read"),
        "{said}"
    );

    // A sheet of 250 MiB, more than the reader may hold, is read through
    // a cell at a time: what it holds (styled empty cells) is told, not
    // the memory.
    let path = dir.path().join("wide.xlsx");
    write_xlsx(
        &path,
        |out| {
            out.write_all(format!("{SHEET_OPEN}<sheetData>").as_bytes())
                .unwrap();
            let row = format!("<row>{}</row>", "<c s=\"1\"/>".repeat(128));
            for _ in 0..200_000 {
                out.write_all(row.as_bytes()).unwrap();
            }
            out.write_all(b"</sheetData></worksheet>").unwrap();
        },
        None,
    );
    assert!(std::fs::metadata(&path).unwrap().len() < 4 << 20);
    let out = import(&path, &[], "http://127.0.0.1:1");
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("wide.xlsx has no rows"), "{said}");
}
