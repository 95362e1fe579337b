//! Which column of a table (CSV or spreadsheet) gives which part of a
//! record: xarchive's own headers (`id`, `title`, `metadata`, `content`,
//! `key:TYPE`, `metadata.NAME`), the usual headers of a Chinese archival
//! catalogue (DA/T 22 and DA/T 46: 档号, 题名, 年度, 保管期限, …), and the
//! user's `--map`; and one row made a record, or refused with a reason.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::{Map, Value};
use unicode_normalization::UnicodeNormalization;

/// What a column gives.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Target {
    Id,
    Title,
    /// Base64 content.
    Content,
    /// A JSON object of metadata fields.
    Metadata,
    /// One metadata field.
    Field(String),
    /// A key of this type.
    Key(String),
    /// Nothing: the column is left out.
    Skip,
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Id => f.write_str("id"),
            Target::Title => f.write_str("title"),
            Target::Content => f.write_str("content"),
            Target::Metadata => f.write_str("metadata"),
            Target::Field(name) => write!(f, "metadata.{name}"),
            Target::Key(t) => write!(f, "key:{t}"),
            Target::Skip => f.write_str("-"),
        }
    }
}

impl Target {
    /// `id`, `title`, `content`, `metadata`, `metadata.NAME`, `key:TYPE`,
    /// or `-` (leave the column out).
    pub fn parse(text: &str) -> Result<Target, String> {
        let text = text.trim();
        let target = match text {
            "id" => Target::Id,
            "title" => Target::Title,
            "content" => Target::Content,
            "metadata" => Target::Metadata,
            "-" | "skip" => Target::Skip,
            _ => {
                if let Some(name) = text.strip_prefix("metadata.").filter(|n| !n.is_empty()) {
                    Target::Field(name.to_owned())
                } else if let Some(t) = text.strip_prefix("key:").filter(|t| !t.is_empty()) {
                    Target::Key(t.to_owned())
                } else {
                    return Err(format!(
                        "{text:?} is not a target: id, title, content, metadata, metadata.NAME, key:TYPE or -"
                    ));
                }
            }
        };
        Ok(target)
    }
}

/// One `--map COLUMN=TARGET`.
#[derive(Clone, Debug)]
pub struct MapEntry {
    pub column: String,
    pub target: Target,
}

/// For clap: `COLUMN=TARGET`.
pub fn parse_map_entry(text: &str) -> Result<MapEntry, String> {
    let (column, target) = text
        .rsplit_once('=')
        .ok_or_else(|| format!("{text:?} is not COLUMN=TARGET, such as 年度=metadata.year"))?;
    if column.trim().is_empty() {
        return Err(format!("{text:?} names no column"));
    }
    Ok(MapEntry {
        column: column.trim().to_owned(),
        target: Target::parse(target)?,
    })
}

/// How headers are compared: NFKC (full-width letters and brackets become
/// ASCII), white space removed (forms pad headers: 题　　名), ASCII
/// lower-cased, and a required-field star at either end taken off.
pub fn header_key(header: &str) -> String {
    let key: String = header
        .nfkc()
        .filter(|c| !c.is_whitespace())
        .map(|c| c.to_ascii_lowercase())
        .collect();
    key.trim_matches('*').to_owned()
}

/// The usual headers of a Chinese archival catalogue (the items of
/// DA/T 22-2015 归档文件整理规则 and DA/T 46 文书类电子文件元数据方案,
/// and their common variants), and what each gives. Metadata names are
/// those the sample records use.
const PROFILE: &[(&[&str], ProfileTarget)] = &[
    (&["档号", "档案号", "档案编号"], ProfileTarget::Id),
    (
        &["题名", "文件题名", "案卷题名", "标题"],
        ProfileTarget::Title,
    ),
    (&["全宗号"], ProfileTarget::Field("fonds")),
    (&["全宗名称"], ProfileTarget::Field("fonds_name")),
    (&["年度"], ProfileTarget::Field("year")),
    (&["保管期限"], ProfileTarget::Field("retention")),
    (
        &["机构(问题)", "机构问题", "机构", "问题", "部门"],
        ProfileTarget::Field("department"),
    ),
    (&["门类", "类别"], ProfileTarget::Field("category")),
    (&["分类号", "类别号"], ProfileTarget::Field("category_code")),
    (&["案卷号"], ProfileTarget::Field("file_number")),
    (&["件号"], ProfileTarget::Field("item_number")),
    (&["盒号"], ProfileTarget::Field("box_number")),
    (
        &["文号", "文件编号"],
        ProfileTarget::Field("document_number"),
    ),
    (&["责任者"], ProfileTarget::Field("creator")),
    (
        &["日期", "文件日期", "形成日期", "成文日期"],
        ProfileTarget::Field("date"),
    ),
    (&["页数"], ProfileTarget::Field("pages")),
    (&["密级"], ProfileTarget::Field("classification")),
    (&["备注"], ProfileTarget::Field("note")),
    (&["归档日期"], ProfileTarget::Field("archived_on")),
    (
        &[
            "身份证号",
            "身份证号码",
            "公民身份号码",
            "居民身份证号码",
            "身份证",
        ],
        ProfileTarget::Key("id_card"),
    ),
];

#[derive(Clone, Copy)]
enum ProfileTarget {
    Id,
    Title,
    Field(&'static str),
    Key(&'static str),
}

impl ProfileTarget {
    fn target(self) -> Target {
        match self {
            ProfileTarget::Id => Target::Id,
            ProfileTarget::Title => Target::Title,
            ProfileTarget::Field(name) => Target::Field(name.to_owned()),
            ProfileTarget::Key(t) => Target::Key(t.to_owned()),
        }
    }
}

/// What the built-in names give a header: xarchive's own names, then (with
/// `profile`) the catalogue's.
fn built_in(header: &str, profile: bool) -> Option<Target> {
    let trimmed = header.trim();
    let key = header_key(header);
    match key.as_str() {
        "id" => return Some(Target::Id),
        "title" => return Some(Target::Title),
        "content" => return Some(Target::Content),
        "metadata" => return Some(Target::Metadata),
        _ => {}
    }
    if let Some(t) = key.strip_prefix("key:").filter(|t| !t.is_empty()) {
        return Some(Target::Key(t.to_owned()));
    }
    if trimmed.len() > "metadata.".len()
        && trimmed.is_char_boundary("metadata.".len())
        && trimmed[.."metadata.".len()].eq_ignore_ascii_case("metadata.")
    {
        return Some(Target::Field(trimmed["metadata.".len()..].to_owned()));
    }
    if !profile {
        return None;
    }
    PROFILE
        .iter()
        .find(|(names, _)| names.iter().any(|n| header_key(n) == key))
        .map(|(_, t)| t.target())
}

/// Why a header row cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ColumnsError {
    Missing {
        what: &'static str,
        names: &'static str,
        target: &'static str,
        header: String,
    },
    Twice {
        target: String,
        first: String,
        second: String,
    },
    UnknownColumn {
        column: String,
        header: String,
    },
}

impl fmt::Display for ColumnsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ColumnsError::Missing {
                what,
                names,
                target,
                header,
            } => write!(
                f,
                "no column gives {what}: name one {names}, or say --map COLUMN={target} (the header has: {header})"
            ),
            ColumnsError::Twice {
                target,
                first,
                second,
            } => write!(
                f,
                "columns {first:?} and {second:?} both give {target}: say which with --map (--map {second:?}=- leaves one out)"
            ),
            ColumnsError::UnknownColumn { column, header } => write!(
                f,
                "--map names a column {column:?} that the header does not have (it has: {header})"
            ),
        }
    }
}

/// A cell of a row: text, or what a spreadsheet held that is not text.
#[derive(Clone, Debug, PartialEq)]
pub enum Cell {
    Text(String),
    /// A formula's error (`#N/A`, `#REF!`).
    SpreadsheetError(String),
    /// A number of 16 or more digits, shown as the sheet holds it: a
    /// spreadsheet keeps 15 significant digits, so an identity number
    /// typed into a number cell has lost its last ones.
    LongNumber(String),
}

impl Cell {
    pub fn text(&self) -> &str {
        match self {
            Cell::Text(t) | Cell::SpreadsheetError(t) | Cell::LongNumber(t) => t,
        }
    }
}

/// The header's columns and what each gives.
#[derive(Clone, Debug)]
pub struct Columns {
    headers: Vec<String>,
    targets: Vec<Target>,
}

/// The header as messages show it: at most 20 names.
fn shown(header: &[String]) -> String {
    let mut names: Vec<&str> = header.iter().take(20).map(|h| h.trim()).collect();
    if header.len() > 20 {
        names.push("…");
    }
    names.join(", ")
}

impl Columns {
    /// What each column of `header` gives: the `--map` entries, then the
    /// built-in names, then metadata under the column's own name (a
    /// column with no name: `column N`).
    pub fn resolve(
        header: &[String],
        map: &[MapEntry],
        profile: bool,
    ) -> Result<Columns, ColumnsError> {
        let keys: Vec<String> = header.iter().map(|h| header_key(h)).collect();
        let mut targets: Vec<Option<Target>> = vec![None; header.len()];
        for entry in map {
            let wanted = header_key(&entry.column);
            let Some(i) = keys.iter().position(|k| *k == wanted) else {
                return Err(ColumnsError::UnknownColumn {
                    column: entry.column.clone(),
                    header: shown(header),
                });
            };
            targets[i] = Some(entry.target.clone());
        }
        let mapped: Vec<Target> = targets.iter().flatten().cloned().collect();
        let targets: Vec<Target> = targets
            .into_iter()
            .zip(header)
            .enumerate()
            .map(|(i, (target, name))| {
                target.unwrap_or_else(|| {
                    let own = || {
                        let name = name.trim();
                        Target::Field(if name.is_empty() {
                            format!("column {}", i + 1)
                        } else {
                            name.to_owned()
                        })
                    };
                    match built_in(name, profile) {
                        // What --map gave another column is not taken
                        // from this one too: it stays metadata.
                        Some(t) if mapped.contains(&t) => own(),
                        Some(t) => t,
                        None => own(),
                    }
                })
            })
            .collect();
        let mut seen: BTreeMap<&Target, usize> = BTreeMap::new();
        for (i, t) in targets.iter().enumerate() {
            if *t == Target::Skip {
                continue;
            }
            if let Some(&first) = seen.get(t) {
                return Err(ColumnsError::Twice {
                    target: t.to_string(),
                    first: header[first].trim().to_owned(),
                    second: header[i].trim().to_owned(),
                });
            }
            seen.insert(t, i);
        }
        for (target, what, names, spelt) in [
            (Target::Id, "the archive number", "id or 档号", "id"),
            (Target::Title, "the title", "title or 题名", "title"),
        ] {
            if !seen.contains_key(&target) {
                return Err(ColumnsError::Missing {
                    what,
                    names,
                    target: spelt,
                    header: shown(header),
                });
            }
        }
        Ok(Columns {
            headers: header.iter().map(|h| h.trim().to_owned()).collect(),
            targets,
        })
    }

    /// The header as given (trimmed).
    pub fn headers(&self) -> &[String] {
        &self.headers
    }

    /// What each column gives, for `--dry-run`-like reports and tests.
    pub fn targets(&self) -> impl Iterator<Item = (&str, &Target)> {
        self.headers.iter().map(String::as_str).zip(&self.targets)
    }

    /// The record a row gives, as an NDJSON line's object; or why the row
    /// is refused. Empty cells give nothing (no metadata field, no key);
    /// the archive number, keys and fields are trimmed, the title is not.
    pub fn record(&self, cells: &[Cell]) -> Result<Map<String, Value>, String> {
        let width = self.headers.len();
        if cells.len() < width {
            return Err(format!(
                "has {} fields where the header has {width}",
                cells.len()
            ));
        }
        if cells[width..].iter().any(|c| !c.text().trim().is_empty()) {
            return Err(format!(
                "has {} fields where the header has {width}",
                cells.len()
            ));
        }
        let (mut metadata, mut fields, mut keys) = (Map::new(), Map::new(), Map::new());
        let mut record = Map::new();
        for ((cell, target), header) in cells.iter().zip(&self.targets).zip(&self.headers) {
            if *target == Target::Skip {
                continue;
            }
            let text = match cell {
                Cell::Text(t) => t.as_str(),
                Cell::SpreadsheetError(e) => {
                    return Err(format!("column {header:?} holds the spreadsheet error {e}"));
                }
                Cell::LongNumber(t) => match target {
                    Target::Id | Target::Key(_) => {
                        return Err(format!(
                            "column {header:?} holds a number of {} digits, of which a spreadsheet keeps only 15: make the column text and enter the values again",
                            t.len()
                        ));
                    }
                    _ => t.as_str(),
                },
            };
            let trimmed = text.trim();
            match target {
                Target::Id => {
                    record.insert("id".into(), trimmed.into());
                }
                Target::Title => {
                    record.insert("title".into(), text.into());
                }
                Target::Content if !trimmed.is_empty() => {
                    record.insert("content".into(), trimmed.into());
                }
                Target::Metadata if !trimmed.is_empty() => match serde_json::from_str(trimmed) {
                    Ok(Value::Object(m)) => metadata = m,
                    _ => {
                        return Err(format!("column {header:?} is not a JSON object"));
                    }
                },
                Target::Field(name) if !trimmed.is_empty() => {
                    fields.insert(name.clone(), trimmed.into());
                }
                Target::Key(t) if !trimmed.is_empty() => {
                    keys.insert(t.clone(), trimmed.into());
                }
                _ => {}
            }
        }
        // Fields of their own columns over those of a metadata column.
        metadata.extend(fields);
        record.insert("metadata".into(), Value::Object(metadata));
        if !keys.is_empty() {
            record.insert("keys".into(), Value::Object(keys));
        }
        Ok(record)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn header(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| (*s).to_owned()).collect()
    }

    fn text(cells: &[&str]) -> Vec<Cell> {
        cells.iter().map(|s| Cell::Text((*s).to_owned())).collect()
    }

    fn resolved(names: &[&str]) -> Vec<(String, Target)> {
        Columns::resolve(&header(names), &[], true)
            .expect("a usable header")
            .targets()
            .map(|(h, t)| (h.to_owned(), t.clone()))
            .collect()
    }

    #[test]
    fn a_standard_catalogue_header_maps_without_any_flag() {
        let names = [
            "档号",
            "全宗号",
            "年度",
            "保管期限",
            "机构（问题）",
            "件号",
            "题名",
            "责任者",
            "文号",
            "日期",
            "页数",
            "密级",
            "备注",
            "公民身份号码",
        ];
        let targets: Vec<Target> = resolved(&names).into_iter().map(|(_, t)| t).collect();
        let field = |n: &str| Target::Field(n.to_owned());
        assert_eq!(
            targets,
            [
                Target::Id,
                field("fonds"),
                field("year"),
                field("retention"),
                field("department"),
                field("item_number"),
                Target::Title,
                field("creator"),
                field("document_number"),
                field("date"),
                field("pages"),
                field("classification"),
                field("note"),
                Target::Key("id_card".into()),
            ]
        );
    }

    #[test]
    fn xarchive_names_and_other_columns_keep_their_meaning() {
        assert_eq!(
            resolved(&["ID", "Title", "key:id_card", "metadata.年度", "fonds", ""]),
            [
                ("ID".into(), Target::Id),
                ("Title".into(), Target::Title),
                ("key:id_card".into(), Target::Key("id_card".into())),
                ("metadata.年度".into(), Target::Field("年度".into())),
                ("fonds".into(), Target::Field("fonds".into())),
                ("".into(), Target::Field("column 6".into())),
            ]
        );
    }

    #[test]
    fn map_entries_win_and_what_they_take_is_not_taken_twice() {
        let map = [
            "编号=id",
            "名称=title",
            "档号=metadata.old_number",
            "备注=-",
        ]
        .map(|e| parse_map_entry(e).expect("valid"));
        let columns =
            Columns::resolve(&header(&["编号", "名称", "档号", "备注", "id"]), &map, true).unwrap();
        let targets: Vec<Target> = columns.targets().map(|(_, t)| t.clone()).collect();
        assert_eq!(
            targets,
            [
                Target::Id,
                Target::Title,
                Target::Field("old_number".into()),
                Target::Skip,
                Target::Field("id".into()),
            ]
        );
    }

    #[test]
    fn headers_that_cannot_be_used_are_refused_saying_how_to_fix_them() {
        let e = Columns::resolve(&header(&["档号", "id", "题名"]), &[], true).unwrap_err();
        assert!(e.to_string().contains("both give id"), "{e}");
        let e = Columns::resolve(&header(&["名称", "题名"]), &[], true).unwrap_err();
        assert!(e.to_string().contains("--map COLUMN=id"), "{e}");
        let map = [parse_map_entry("年份=metadata.year").unwrap()];
        let e = Columns::resolve(&header(&["档号", "题名"]), &map, true).unwrap_err();
        assert!(e.to_string().contains("\"年份\""), "{e}");
        assert!(parse_map_entry("年度=year").is_err());
        assert!(parse_map_entry("=id").is_err());
        // Without the profile, 档号 is only a metadata field.
        assert!(Columns::resolve(&header(&["档号", "题名"]), &[], false).is_err());
    }

    #[test]
    fn a_row_becomes_a_record_without_empty_fields_and_a_bad_row_is_refused() {
        let columns = Columns::resolve(
            &header(&["档号", "题名", "年度", "备注", "身份证号", "metadata"]),
            &[],
            true,
        )
        .unwrap();
        let record = columns
            .record(&text(&[
                " J001-WS·2023-Y-0001 ",
                "关于 A 的通知",
                "2023",
                "",
                "",
                r#"{"year":"x","pages":3}"#,
            ]))
            .unwrap();
        assert_eq!(
            Value::Object(record),
            serde_json::json!({
                "id": "J001-WS·2023-Y-0001",
                "title": "关于 A 的通知",
                "metadata": {"year": "2023", "pages": 3},
            })
        );
        let record = columns
            .record(&text(&["J-2", "t", "", "", "110105491231002", "", "", ""]))
            .unwrap();
        assert_eq!(record["keys"]["id_card"], "110105491231002");

        assert_eq!(
            columns.record(&text(&["J-3", "t", "2023"])),
            Err("has 3 fields where the header has 6".into())
        );
        assert!(columns
            .record(&text(&["J-3", "t", "", "", "", "[1]"]))
            .unwrap_err()
            .contains("not a JSON object"));
        let mut cells = text(&["J-3", "t", "", "", "", ""]);
        cells[4] = Cell::LongNumber("110105194912310000".into());
        let e = columns.record(&cells).unwrap_err();
        assert!(e.contains("keeps only 15"), "{e}");
        assert!(!e.contains("110105"), "{e}");
        cells[4] = Cell::Text(String::new());
        cells[2] = Cell::SpreadsheetError("#REF!".into());
        assert!(columns.record(&cells).unwrap_err().contains("#REF!"));
    }

    proptest! {
        /// Every way people pad or widen a catalogue header finds the same
        /// target: full-width brackets, spaces (also ideographic ones)
        /// inside and around, a required-field star.
        #[test]
        fn every_spelling_of_a_catalogue_header_gives_one_target(
            entry in 0..PROFILE.len(),
            name_at in any::<prop::sample::Index>(),
            pads in prop::collection::vec("[ \u{3000}]{0,2}", 6),
            star in any::<bool>(),
        ) {
            let (names, target) = PROFILE[entry];
            let name = names[name_at.index(names.len())];
            let widened: String = name
                .chars()
                .map(|c| match c {
                    '(' => '（',
                    ')' => '）',
                    c => c,
                })
                .collect();
            let mut padded = pads[0].clone();
            for (i, c) in widened.chars().enumerate() {
                padded.push(c);
                padded.push_str(&pads[1 + i % 4]);
            }
            padded.push_str(&pads[5]);
            if star {
                padded.insert(0, '*');
            }
            prop_assert_eq!(header_key(&padded), header_key(name));
            prop_assert_eq!(built_in(&padded, true), Some(target.target()));
        }
    }
}
