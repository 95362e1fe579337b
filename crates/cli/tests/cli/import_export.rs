//! `xarchive import` and `xarchive export` against a real domain: the
//! encodings, spreadsheets and column names archives actually hold, rejected
//! and stopping lines named by their numbers, and an export imported again.

use crate::common::{bin, run, text, xarchive};

use std::path::{Path, PathBuf};

use xarchive_node::wire::SearchBody;
use xarchive_node::Record;
use xarchive_testkit::{tempdir, Spawn};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn get(server: &str, id: &str) -> Option<Record> {
    let out = xarchive(&["get", id], server);
    match out.status.code() {
        Some(0) => Some(serde_json::from_slice(&out.stdout).expect("a record")),
        Some(3) => None,
        _ => panic!("get {id}: {}", text(&out)),
    }
}

fn search_id_card(server: &str, value: &str) -> Vec<String> {
    let key = format!("id_card={value}");
    let out = xarchive(&["search", "--key", &key, "--json"], server);
    assert!(out.status.success(), "{}", text(&out));
    let found: SearchBody = serde_json::from_slice(&out.stdout).expect("a search answer");
    found.records.iter().map(|r| r.id.to_string()).collect()
}

/// The catalogue's fifth line's number has a wrong check digit.
const CATALOGUE_IDS: [&str; 4] = [
    "J001-WS·2023-Y-0001",
    "J001-WS·2023-Y-0002",
    "J001-RS·2023-Y-0003",
    "J001-RS·2023-Y-0004",
];

#[test]
fn the_encoded_fixtures_are_the_catalogue_encoded() {
    let source = std::fs::read_to_string(fixture("catalogue.csv")).unwrap();
    let mut bom = b"\xef\xbb\xbf".to_vec();
    bom.extend_from_slice(source.as_bytes());
    assert_eq!(std::fs::read(fixture("catalogue-bom.csv")).unwrap(), bom);
    let (gbk, _, unmappable) = encoding_rs::GBK.encode(&source);
    assert!(!unmappable);
    assert_eq!(
        std::fs::read(fixture("catalogue-gbk.csv")).unwrap(),
        &gbk[..]
    );
    let more = format!(
        "{source}J001-WS·2023-Y-0006,J001,2023,永久,办公室,6,关于“𠀀”字的说明,办公室,2023-08-01,1,,\n"
    );
    let (gb18030, _, unmappable) = encoding_rs::GB18030.encode(&more);
    assert!(!unmappable);
    assert_eq!(
        std::fs::read(fixture("catalogue-gb18030.csv")).unwrap(),
        &gb18030[..]
    );
}

#[test]
fn a_catalogue_in_utf8_with_or_without_a_bom_gbk_or_gb18030_imports_alike_without_any_flag() {
    let dir = tempdir().unwrap();
    let domain = Spawn::new(bin(), "A", &dir.path().join("A")).start();
    let url = domain.url.as_str();
    let rejects = dir.path().join("rejects.csv");

    let path = fixture("catalogue.csv");
    let out = xarchive(
        &[
            "import",
            path.to_str().unwrap(),
            "--rejects",
            rejects.to_str().unwrap(),
        ],
        url,
    );
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("imported 4 records (4 created, 0 replaced)"),
        "{said}"
    );
    assert!(
        said.contains("line 6: invalid_record: key id_card is not a valid identity number: it has a wrong check digit"),
        "{said}"
    );
    assert!(said.contains("档号 → id"), "{said}");
    // The rejected line, with its number, why, and its own fields.
    let written = std::fs::read_to_string(&rejects).unwrap();
    let mut lines = written.lines();
    assert_eq!(
        lines.next(),
        Some("\u{feff}line,reason,档号,全宗号,年度,保管期限,机构（问题）,件号,题名,责任者,日期,页数,备注,公民身份号码")
    );
    assert_eq!(
        lines.next(),
        Some("6,invalid_record: key id_card is not a valid identity number: it has a wrong check digit,J001-RS·2023-Y-0005,J001,2023,30年,人事处,5,李四同志退休的通知,人事处,2023-07-01,2,,110105194912310021")
    );
    assert_eq!(lines.next(), None);

    let record = get(url, "J001-WS·2023-Y-0002").expect("imported");
    assert_eq!(record.title, "关于印发《档案管理办法》的通知,附件");
    assert_eq!(
        serde_json::Value::Object(record.metadata.clone()),
        serde_json::json!({
            "fonds": "J001", "year": "2023", "retention": "永久", "department": "办公室",
            "item_number": "2", "creator": "办公室", "date": "2023-04-01", "pages": "12",
            "note": "附件一份",
        })
    );
    // The 15-digit and the 18-digit number are one person's.
    assert_eq!(
        search_id_card(url, "11010519491231002X"),
        ["J001-RS·2023-Y-0003", "J001-RS·2023-Y-0004"]
    );
    let before: Vec<Record> = CATALOGUE_IDS
        .iter()
        .map(|id| get(url, id).expect("imported"))
        .collect();

    for (name, created) in [
        ("catalogue-bom.csv", 0),
        ("catalogue-gbk.csv", 0),
        ("catalogue-gb18030.csv", 1),
    ] {
        let path = fixture(name);
        let out = xarchive(&["import", path.to_str().unwrap()], url);
        let said = text(&out);
        assert_eq!(out.status.code(), Some(1), "{name}: {said}");
        let expected = format!(
            "imported {} records ({created} created, 4 replaced)",
            4 + created
        );
        assert!(said.contains(&expected), "{name}: {said}");
        assert!(said.contains("line 6: invalid_record"), "{name}: {said}");
        for (id, was) in CATALOGUE_IDS.iter().zip(&before) {
            let now = get(url, id).expect("still there");
            assert_eq!(
                (&now.title, &now.metadata),
                (&was.title, &was.metadata),
                "{name}"
            );
        }
    }
    let record = get(url, "J001-WS·2023-Y-0006").expect("imported from GB18030");
    assert_eq!(record.title, "关于“𠀀”字的说明");
}

#[test]
fn a_short_row_deep_in_a_file_is_rejected_by_its_line_and_the_rest_imported() {
    let dir = tempdir().unwrap();
    let domain = Spawn::new(bin(), "A", &dir.path().join("A")).start();
    let mut csv = String::from("id,title,year,note\n");
    for line in 2..=3001 {
        if line == 2500 {
            csv.push_str(&format!("S-{line},short row,2024\n"));
        } else {
            csv.push_str(&format!("S-{line},标题 {line},2024,\n"));
        }
    }
    let path = dir.path().join("long.csv");
    std::fs::write(&path, csv).unwrap();
    let rejects = dir.path().join("rejects.csv");
    let out = xarchive(
        &[
            "import",
            path.to_str().unwrap(),
            "--chunk",
            "500",
            "--rejects",
            rejects.to_str().unwrap(),
        ],
        &domain.url,
    );
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("imported 2999 records (2999 created"),
        "{said}"
    );
    assert!(
        said.contains("line 2500: invalid_row: has 3 fields where the header has 4"),
        "{said}"
    );
    assert!(said.contains("1 rejected lines written to"), "{said}");
    assert_eq!(
        std::fs::read_to_string(&rejects).unwrap(),
        "\u{feff}line,reason,id,title,year,note\n2500,invalid_row: has 3 fields where the header has 4,S-2500,short row,2024\n"
    );
    assert!(get(&domain.url, "S-2500").is_none());
    assert_eq!(
        get(&domain.url, "S-3001").expect("imported").title,
        "标题 3001"
    );
}

#[test]
fn a_line_in_another_encoding_stops_the_import_naming_it_and_what_was_committed() {
    let dir = tempdir().unwrap();
    let domain = Spawn::new(bin(), "A", &dir.path().join("A")).start();
    let mut bytes = "id,title\n".as_bytes().to_vec();
    for line in 2..=2000 {
        let row = format!("E-{line},关于第{line}号文件\n");
        if line == 1500 {
            bytes.extend_from_slice(&encoding_rs::GBK.encode(&row).0);
        } else {
            bytes.extend_from_slice(row.as_bytes());
        }
    }
    let path = dir.path().join("mixed.csv");
    std::fs::write(&path, bytes).unwrap();
    let out = xarchive(
        &["import", path.to_str().unwrap(), "--chunk", "100"],
        &domain.url,
    );
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("line 1500 is not valid UTF-8"), "{said}");
    assert!(said.contains("--encoding gb18030"), "{said}");
    assert!(
        said.contains(
            "import stopped at line 1500: 1498 records were committed, from the lines before it"
        ),
        "{said}"
    );
    assert!(get(&domain.url, "E-1499").is_some());
    assert!(get(&domain.url, "E-1501").is_none());
}

#[test]
fn standard_input_and_files_without_an_extension_are_sniffed() {
    let dir = tempdir().unwrap();
    let domain = Spawn::new(bin(), "A", &dir.path().join("A")).start();
    let url = domain.url.as_str();
    let ndjson =
        "\n{\"id\":\"I-1\",\"title\":\"from a pipe\"}\n{\"id\":\"I-2\",\"title\":\"二\"}\n";
    let out = run(&["import", "-"], url, None, Some(ndjson.as_bytes()));
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("imported 2 records"), "{}", text(&out));
    assert_eq!(get(url, "I-2").expect("imported").title, "二");

    let gbk_csv = encoding_rs::GBK.encode("档号,题名\nI-3,来自管道\n").0;
    let out = run(&["import", "-"], url, None, Some(&gbk_csv));
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(get(url, "I-3").expect("imported").title, "来自管道");

    let plain = dir.path().join("records");
    std::fs::write(&plain, "{\"id\":\"I-4\",\"title\":\"t\"}\n").unwrap();
    let out = xarchive(&["import", plain.to_str().unwrap()], url);
    assert!(out.status.success(), "{}", text(&out));
    let table = dir.path().join("catalogue");
    std::fs::write(&table, "id,title\nI-5,t\n").unwrap();
    let out = xarchive(&["import", table.to_str().unwrap()], url);
    assert!(out.status.success(), "{}", text(&out));
    assert!(get(url, "I-4").is_some() && get(url, "I-5").is_some());

    let missing = dir.path().join("missing.xlsx");
    let out = xarchive(&["import", missing.to_str().unwrap()], url);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out).contains(&format!("cannot open {}", missing.display())),
        "{}",
        text(&out)
    );
}

#[test]
fn columns_are_mapped_by_name_and_a_map_naming_no_column_is_refused() {
    let dir = tempdir().unwrap();
    let domain = Spawn::new(bin(), "A", &dir.path().join("A")).start();
    let url = domain.url.as_str();
    let path = dir.path().join("own.csv");
    std::fs::write(
        &path,
        "编号,名称,年份,证件号,内部序号\nM-1,自定义的目录,1999,11010519491231002X,17\n",
    )
    .unwrap();
    let out = xarchive(
        &[
            "import",
            path.to_str().unwrap(),
            "--map",
            "编号=id,名称=title,年份=metadata.year",
            "--map",
            "证件号=key:id_card,内部序号=-",
        ],
        url,
    );
    assert!(out.status.success(), "{}", text(&out));
    let record = get(url, "M-1").expect("imported");
    assert_eq!(record.title, "自定义的目录");
    assert_eq!(
        serde_json::Value::Object(record.metadata),
        serde_json::json!({"year": "1999"})
    );
    assert_eq!(record.keys_withheld, ["id_card"]);

    let out = xarchive(&["import", path.to_str().unwrap(), "--map", "档号=id"], url);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out).contains("--map names a column \"档号\" that the header does not have"),
        "{}",
        text(&out)
    );
}

/// A catalogue as a spreadsheet: a title row above the header, a notes
/// sheet after it, years and pages as numbers, dates as date cells, one
/// identity number as text and one typed into a number cell.
fn write_catalogue_workbook(path: &Path) {
    use rust_xlsxwriter::{ExcelDateTime, Format, Workbook};
    let mut workbook = Workbook::new();
    let date = Format::new().set_num_format("yyyy-mm-dd");
    let sheet = workbook.add_worksheet();
    sheet.set_name("目录").unwrap();
    sheet
        .merge_range(0, 0, 0, 5, "文书档案目录", &Format::new())
        .unwrap();
    for (col, header) in ["档号", "题名", "年度", "日期", "页数", "身份证号"]
        .iter()
        .enumerate()
    {
        sheet
            .write_string(1, u16::try_from(col).unwrap(), *header)
            .unwrap();
    }
    let rows = [
        (
            "X-1",
            "关于表格导入的通知",
            2023.0,
            (2023u16, 3u8, 5u8),
            3.0,
        ),
        ("X-2", "王芳同志任职的通知", 1987.0, (1987, 5, 20), 1.0),
        ("X-3", "数字单元格里的身份证号", 2001.0, (2001, 1, 2), 2.0),
    ];
    for (i, (id, title, year, (y, m, d), pages)) in rows.into_iter().enumerate() {
        let row = 2 + u32::try_from(i).unwrap();
        sheet.write_string(row, 0, id).unwrap();
        sheet.write_string(row, 1, title).unwrap();
        sheet.write_number(row, 2, year).unwrap();
        let when = ExcelDateTime::from_ymd(y, m, d).unwrap();
        sheet
            .write_datetime_with_format(row, 3, &when, &date)
            .unwrap();
        sheet.write_number(row, 4, pages).unwrap();
    }
    sheet.write_string(3, 5, "110105491231002").unwrap();
    sheet.write_number(4, 5, 110105194912310021.0).unwrap();
    let notes = workbook.add_worksheet();
    notes.set_name("另一目录").unwrap();
    notes.write_string(0, 0, "档号").unwrap();
    notes.write_string(0, 1, "题名").unwrap();
    notes.write_string(1, 0, "Y-1").unwrap();
    notes.write_string(1, 1, "第二张表").unwrap();
    workbook.save(path).unwrap();
}

#[test]
fn a_spreadsheet_with_a_title_row_dates_and_numbers_imports_from_the_sheet_asked_for() {
    let dir = tempdir().unwrap();
    let domain = Spawn::new(bin(), "A", &dir.path().join("A")).start();
    let url = domain.url.as_str();
    let path = dir.path().join("目录.xlsx");
    write_catalogue_workbook(&path);

    let out = xarchive(&["import", path.to_str().unwrap()], url);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("the header is line 2"), "{said}");
    assert!(
        said.contains("imported 2 records (2 created, 0 replaced)"),
        "{said}"
    );
    assert!(
        said.contains("line 5: invalid_row: column \"身份证号\" holds a number of 18 digits, of which a spreadsheet keeps only 15"),
        "{said}"
    );
    let record = get(url, "X-1").expect("imported");
    assert_eq!(record.title, "关于表格导入的通知");
    assert_eq!(
        serde_json::Value::Object(record.metadata),
        serde_json::json!({"year": "2023", "date": "2023-03-05", "pages": "3"})
    );
    assert_eq!(search_id_card(url, "11010519491231002X"), ["X-2"]);

    let out = xarchive(
        &["import", path.to_str().unwrap(), "--sheet", "另一目录"],
        url,
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(get(url, "Y-1").expect("imported").title, "第二张表");

    let out = xarchive(
        &["import", path.to_str().unwrap(), "--sheet", "Sheet1"],
        url,
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out).contains("has no sheet \"Sheet1\" (it has: 目录, 另一目录)"),
        "{}",
        text(&out)
    );
}

#[test]
fn a_request_that_fails_stops_the_import_naming_its_lines_and_what_was_committed() {
    let dir = tempdir().unwrap();
    let path = dir.path().join("catalogue.csv");
    std::fs::write(&path, "id,title\nF-1,a\nF-2,b\nF-3,c\n").unwrap();
    // Nothing listens on port 1.
    let out = xarchive(
        &["import", path.to_str().unwrap(), "--chunk", "2"],
        "http://127.0.0.1:1",
    );
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("import stopped at line 2: the request carrying lines 2–3 failed. 0 records were committed"),
        "{said}"
    );
    assert!(said.contains("cannot reach"), "{said}");
}

/// Domains declaring a public key type beside the private identity number.
const KEYS_CONFIG: &str = r#"
[[keys]]
name = "id_card"
visibility = "private"
format = "id_card"

[[keys]]
name = "cert"
visibility = "public"
"#;

fn keyed_domain(dir: &Path, name: &str) -> xarchive_testkit::DomainProcess {
    let config = dir.join("keys.toml");
    std::fs::write(&config, KEYS_CONFIG).unwrap();
    Spawn::new(bin(), name, &dir.join(name))
        .arg("--config")
        .arg(config.to_str().unwrap())
        .start()
}

/// Records of the kinds an export must carry whole: quotes, commas and a
/// line break in a title, nested metadata of every JSON type, binary
/// content, a private and a public key.
fn originals() -> Vec<(&'static str, serde_json::Value)> {
    use base64::Engine;
    let every_byte: Vec<u8> = (0..=255).collect();
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    vec![
        (
            "J001-WS·2023-Y-0001",
            serde_json::json!({
                "title": "关于“档案”工作的通知, 第1号",
                "metadata": {"year": 2023, "fonds": "J001", "tags": ["甲", "b"],
                             "nested": {"k": 1.5, "ok": true, "none": null}},
                "content": b64(&every_byte),
                "keys": {"id_card": "11010519491231002X", "cert": "证-001"},
            }),
        ),
        (
            "档案/2024/002",
            serde_json::json!({
                "title": "多行\n标题 with \"quotes\", and commas",
                "metadata": {"year": "2023"},
            }),
        ),
        (
            "X-3",
            serde_json::json!({"title": "plain", "metadata": {}, "content": b64(b"%PDF-1.7")}),
        ),
        (
            "Y-4",
            serde_json::json!({"title": "不导出", "metadata": {"year": 2024}}),
        ),
    ]
}

/// What must come back byte for byte: the title, metadata and content.
fn essence(record: &Record) -> Vec<u8> {
    serde_json::to_vec(&(&record.title, &record.metadata, &record.content)).unwrap()
}

#[test]
fn an_export_imported_into_a_fresh_domain_gives_the_same_records_in_every_format() {
    let dir = tempdir().unwrap();
    let source = keyed_domain(dir.path(), "A");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let client =
        xarchive_node::ApiClient::new(&source.url, std::time::Duration::from_secs(10)).unwrap();
    for (id, body) in originals() {
        runtime.block_on(client.put(id, &body)).unwrap();
    }
    let before: Vec<Record> = originals()
        .iter()
        .map(|(id, _)| get(&source.url, id).expect("put"))
        .collect();

    for (i, (file, extra)) in [
        ("all.ndjson", None),
        ("all.csv", None),
        ("all-gb18030.csv", Some("gb18030")),
        ("all.xlsx", None),
    ]
    .into_iter()
    .enumerate()
    {
        let out = dir.path().join(file);
        let mut args = vec!["export", out.to_str().unwrap(), "--page", "3"];
        if let Some(encoding) = extra {
            args.extend(["--encoding", encoding]);
        }
        let exported = xarchive(&args, &source.url);
        let said = text(&exported);
        assert!(exported.status.success(), "{file}: {said}");
        assert!(said.contains("exported 4 records of 4"), "{file}: {said}");
        assert!(
            said.contains("1 of them hold private keys"),
            "{file}: {said}"
        );
        let bytes = std::fs::read(&out).unwrap();
        assert!(
            !String::from_utf8_lossy(&bytes).contains("11010519491231002X"),
            "{file} carries an identity number"
        );
        match file {
            "all.csv" => {
                assert!(bytes.starts_with(b"\xef\xbb\xbfid,title,metadata,content,key:cert\n"));
            }
            "all-gb18030.csv" => {
                let (text, _, malformed) = encoding_rs::GB18030.decode(&bytes);
                assert!(
                    !malformed && text.contains("关于“档案”工作的通知"),
                    "{text}"
                );
            }
            _ => {}
        }

        let target = keyed_domain(dir.path(), &format!("B{i}"));
        let imported = xarchive(&["import", out.to_str().unwrap()], &target.url);
        let said = text(&imported);
        assert!(imported.status.success(), "{file}: {said}");
        assert!(
            said.contains("imported 4 records (4 created"),
            "{file}: {said}"
        );
        for was in &before {
            let now = get(&target.url, &was.id.to_string()).expect("imported");
            assert_eq!(
                String::from_utf8(essence(&now)).unwrap(),
                String::from_utf8(essence(was)).unwrap(),
                "{file}"
            );
            // The public key comes along; the private one cannot.
            assert_eq!(now.keys, was.keys, "{file}");
            assert!(now.keys_withheld.is_empty(), "{file}");
        }
        let target_client =
            xarchive_node::ApiClient::new(&target.url, std::time::Duration::from_secs(10)).unwrap();
        let verified = runtime.block_on(target_client.verify()).unwrap();
        assert!(verified.consistent, "{file}: {verified:?}");
        assert_eq!(verified.store_records, 4, "{file}");
    }
}

#[test]
fn an_export_filtered_by_a_metadata_field_has_only_the_records_with_it() {
    let dir = tempdir().unwrap();
    let source = keyed_domain(dir.path(), "A");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let client =
        xarchive_node::ApiClient::new(&source.url, std::time::Duration::from_secs(10)).unwrap();
    for (id, body) in originals() {
        runtime.block_on(client.put(id, &body)).unwrap();
    }
    let out = xarchive(
        &["export", "--filter", "metadata.year=2023", "--page", "1"],
        &source.url,
    );
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("exported 2 records of 4"), "{said}");
    let ids: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).expect("an NDJSON line");
            v["id"].as_str().expect("an id").to_owned()
        })
        .collect();
    assert_eq!(ids, ["J001-WS·2023-Y-0001", "档案/2024/002"]);

    let out = xarchive(&["export", "--filter", "year=2023"], &source.url);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
}
