//! Which column of a table (CSV or spreadsheet) gives which part of a
//! record: xarchive's own headers (`id`, `title`, `metadata`, `content`,
//! `key:TYPE`, `metadata.NAME`), the usual headers of a Chinese archival
//! catalogue (DA/T 22 and DA/T 46: 档号, 题名, 年度, 保管期限, …), and the
//! user's `--map`; and one row made a record, or refused with a reason.
//!
//! A person's name and birth date, two columns in a catalogue (姓名,
//! 出生日期), make one private `name_birth` key (`name|date`), found by a
//! search and never kept in clear as metadata unless a `--map` says so:
//! together they single a person out as surely as an identity number.

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
    /// One half of a key of a name-and-birth-date type: the other half
    /// comes from another column.
    KeyPart(String, KeyPart),
    /// Nothing: the column is left out.
    Skip,
}

/// Which half of a `name|date` key a column gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum KeyPart {
    Name,
    Date,
}

impl KeyPart {
    fn suffix(self) -> &'static str {
        match self {
            KeyPart::Name => "name",
            KeyPart::Date => "date",
        }
    }
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
            Target::KeyPart(t, part) => write!(f, "key:{t}.{}", part.suffix()),
            Target::Skip => f.write_str("-"),
        }
    }
}

impl Target {
    /// `id`, `title`, `content`, `metadata`, `metadata.NAME`, `key:TYPE`,
    /// `key:TYPE.name` and `key:TYPE.date` (a name and a birth date from
    /// two columns), or `-` (leave the column out).
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
                    key_target(t)
                } else {
                    return Err(format!(
                        "{text:?} is not a target: id, title, content, metadata, metadata.NAME, key:TYPE, key:TYPE.name, key:TYPE.date or -"
                    ));
                }
            }
        };
        Ok(target)
    }
}

/// `key:TYPE`, or half of one: `key:TYPE.name`, `key:TYPE.date` (type
/// names have no dot: [a-z0-9_]).
fn key_target(text: &str) -> Target {
    for part in [KeyPart::Name, KeyPart::Date] {
        if let Some(t) = text
            .strip_suffix(part.suffix())
            .and_then(|t| t.strip_suffix('.'))
            .filter(|t| !t.is_empty())
        {
            return Target::KeyPart(t.to_owned(), part);
        }
    }
    Target::Key(text.to_owned())
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
    (
        &["姓名", "人员姓名", "当事人姓名"],
        ProfileTarget::KeyPart("name_birth", KeyPart::Name),
    ),
    (
        &[
            "出生日期",
            "出生年月",
            "出生年月日",
            "出生时间",
            "出生日",
            "生日",
        ],
        ProfileTarget::KeyPart("name_birth", KeyPart::Date),
    ),
];

#[derive(Clone, Copy)]
enum ProfileTarget {
    Id,
    Title,
    Field(&'static str),
    Key(&'static str),
    KeyPart(&'static str, KeyPart),
}

impl ProfileTarget {
    fn target(self) -> Target {
        match self {
            ProfileTarget::Id => Target::Id,
            ProfileTarget::Title => Target::Title,
            ProfileTarget::Field(name) => Target::Field(name.to_owned()),
            ProfileTarget::Key(t) => Target::Key(t.to_owned()),
            ProfileTarget::KeyPart(t, part) => Target::KeyPart(t.to_owned(), part),
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
        return Some(key_target(t));
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
    /// `--map` gave one half of a name-and-birth-date key, and no column
    /// gives the other.
    HalfKey {
        column: String,
        given: String,
        missing: String,
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
            ColumnsError::HalfKey {
                column,
                given,
                missing,
            } => write!(
                f,
                "--map makes column {column:?} {given}, but no column gives {missing}: a name and a birth date make the key together (--map COLUMN={missing})"
            ),
        }
    }
}

/// A cell of a row: text, or what a spreadsheet held that is not text.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
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
    /// (column, what it gives), in the header's order; a column that
    /// several `--map` entries name gives each of their targets.
    targets: Vec<(usize, Target)>,
    /// Whether a line with an empty title is imported (else refused).
    empty_titles: bool,
}

/// Why a line without a title (in `column`, for a table) is refused.
pub fn no_title(column: Option<&str>) -> String {
    let what = match column {
        Some(column) => format!(" (column {column:?} is empty)"),
        None => String::new(),
    };
    format!(
        "has no title{what}: archival description requires one (--allow-empty-title imports such lines)"
    )
}

/// The header as messages show it: at most 20 names.
fn shown(header: &[String]) -> String {
    let mut names: Vec<&str> = header.iter().take(20).map(|h| h.trim()).collect();
    if header.len() > 20 {
        names.push("…");
    }
    names.join(", ")
}

/// What column `i` named `name` gives when nothing else does: metadata
/// under its own name (a column with no name: `column N`).
fn own_field(i: usize, name: &str) -> Target {
    let name = name.trim();
    Target::Field(if name.is_empty() {
        format!("column {}", i + 1)
    } else {
        name.to_owned()
    })
}

impl Columns {
    /// What each column of `header` gives: the `--map` entries, then the
    /// built-in names, then metadata under the column's own name. The
    /// catalogue's name and birth-date columns make a key only together:
    /// one without the other is metadata, as any column (or, named by
    /// `--map`, refused).
    pub fn resolve(
        header: &[String],
        map: &[MapEntry],
        profile: bool,
    ) -> Result<Columns, ColumnsError> {
        let keys: Vec<String> = header.iter().map(|h| header_key(h)).collect();
        let mut mapped: Vec<Vec<Target>> = vec![Vec::new(); header.len()];
        for entry in map {
            let wanted = header_key(&entry.column);
            let Some(i) = keys.iter().position(|k| *k == wanted) else {
                return Err(ColumnsError::UnknownColumn {
                    column: entry.column.clone(),
                    header: shown(header),
                });
            };
            if !mapped[i].contains(&entry.target) {
                mapped[i].push(entry.target.clone());
            }
        }
        let given: Vec<Target> = mapped.iter().flatten().cloned().collect();
        // (column, target, whether --map said it)
        let mut targets: Vec<(usize, Target, bool)> = Vec::new();
        for (i, name) in header.iter().enumerate() {
            if !mapped[i].is_empty() {
                targets.extend(mapped[i].iter().map(|t| (i, t.clone(), true)));
                continue;
            }
            let target = match built_in(name, profile) {
                // What --map gave another column is not taken from this
                // one too: it stays metadata.
                Some(t) if given.contains(&t) => own_field(i, name),
                Some(t) => t,
                None => own_field(i, name),
            };
            targets.push((i, target, false));
        }
        let halves: Vec<Target> = targets
            .iter()
            .filter(|(_, t, _)| matches!(t, Target::KeyPart(..)))
            .map(|(_, t, _)| t.clone())
            .collect();
        for (i, target, said) in &mut targets {
            let Target::KeyPart(key_type, part) = target else {
                continue;
            };
            let other = match part {
                KeyPart::Name => KeyPart::Date,
                KeyPart::Date => KeyPart::Name,
            };
            let missing = Target::KeyPart(key_type.clone(), other);
            if halves.contains(&missing) {
                continue;
            }
            if *said {
                return Err(ColumnsError::HalfKey {
                    column: header[*i].trim().to_owned(),
                    given: target.to_string(),
                    missing: missing.to_string(),
                });
            }
            *target = own_field(*i, &header[*i]);
        }
        // Two columns may not give one thing; a key's halves count as
        // the key itself.
        let slot = |t: &Target| match t {
            Target::KeyPart(key_type, _) => Target::Key(key_type.clone()),
            t => t.clone(),
        };
        let mut seen: BTreeMap<Target, usize> = BTreeMap::new();
        for (i, t, _) in &targets {
            if *t == Target::Skip {
                continue;
            }
            if let Some(&first) = seen.get(t) {
                return Err(ColumnsError::Twice {
                    target: t.to_string(),
                    first: header[first].trim().to_owned(),
                    second: header[*i].trim().to_owned(),
                });
            }
            seen.insert(t.clone(), *i);
        }
        for (i, t, _) in &targets {
            let Target::KeyPart(..) = t else { continue };
            if let Some(&whole) = seen.get(&slot(t)) {
                return Err(ColumnsError::Twice {
                    target: slot(t).to_string(),
                    first: header[whole].trim().to_owned(),
                    second: header[*i].trim().to_owned(),
                });
            }
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
            targets: targets.into_iter().map(|(i, t, _)| (i, t)).collect(),
            empty_titles: false,
        })
    }

    /// Whether a line whose title is empty is imported (`--allow-empty-title`)
    /// rather than refused.
    pub fn allowing_empty_titles(mut self, allowed: bool) -> Columns {
        self.empty_titles = allowed;
        self
    }

    /// The header as given (trimmed).
    pub fn headers(&self) -> &[String] {
        &self.headers
    }

    /// What each column gives, in the header's order, as the import
    /// prints it.
    pub fn targets(&self) -> impl Iterator<Item = (&str, &Target)> {
        self.targets
            .iter()
            .map(|(i, t)| (self.headers[*i].as_str(), t))
    }

    /// The record a row gives, as an NDJSON line's object; or why the row
    /// is refused (naming columns, never quoting a value). Empty cells
    /// give nothing (no metadata field, no key); the archive number, keys
    /// and fields are trimmed, the title is not.
    pub fn record(&self, cells: &[Cell]) -> Result<Map<String, Value>, String> {
        let width = self.headers.len();
        if cells.len() < width || cells[width..].iter().any(|c| !c.text().trim().is_empty()) {
            return Err(format!(
                "has {} fields where the header has {width}",
                cells.len()
            ));
        }
        let (mut metadata, mut fields, mut keys) = (Map::new(), Map::new(), Map::new());
        // Each name-and-birth-date key's halves: (column, value).
        let mut halves: BTreeMap<&str, [Option<(&str, &str)>; 2]> = BTreeMap::new();
        let mut record = Map::new();
        for (i, target) in &self.targets {
            let (cell, header) = (&cells[*i], &self.headers[*i]);
            if *target == Target::Skip {
                continue;
            }
            let text = match cell {
                Cell::Text(t) => t.as_str(),
                Cell::SpreadsheetError(e) => {
                    return Err(format!("column {header:?} holds the spreadsheet error {e}"));
                }
                Cell::LongNumber(t) => match target {
                    Target::Id | Target::Key(_) | Target::KeyPart(..) => {
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
                    if trimmed.is_empty() && !self.empty_titles {
                        return Err(no_title(Some(header)));
                    }
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
                Target::KeyPart(t, part) => {
                    let at = usize::from(*part == KeyPart::Date);
                    halves.entry(t.as_str()).or_default()[at] = Some((header, trimmed));
                }
                _ => {}
            }
        }
        for (key_type, [name, date]) in halves {
            // Both halves are there: `resolve` keeps a half only with
            // its other half.
            let (Some((name_column, name)), Some((date_column, date))) = (name, date) else {
                continue;
            };
            match (name.is_empty(), date.is_empty()) {
                (true, true) => {}
                (false, true) => {
                    return Err(format!(
                        "has a name in column {name_column:?} but no birth date in column {date_column:?}: a {key_type} key needs both"
                    ));
                }
                (true, false) => {
                    return Err(format!(
                        "has a birth date in column {date_column:?} but no name in column {name_column:?}: a {key_type} key needs both"
                    ));
                }
                (false, false) => {
                    for (column, value) in [(name_column, name), (date_column, date)] {
                        if value.contains(['|', '｜']) {
                            return Err(format!(
                                "column {column:?} holds a |, which separates the name from the birth date in a {key_type} key"
                            ));
                        }
                    }
                    keys.insert(key_type.to_owned(), format!("{name}|{date}").into());
                }
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
                (String::new(), Target::Field("column 6".into())),
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

    #[test]
    fn a_name_and_a_birth_date_make_the_private_key_and_are_not_kept_as_metadata() {
        let columns =
            Columns::resolve(&header(&["档号", "题名", "姓名", "出生年月"]), &[], true).unwrap();
        let shown: Vec<String> = columns
            .targets()
            .map(|(h, t)| format!("{h} → {t}"))
            .collect();
        assert_eq!(
            shown,
            [
                "档号 → id",
                "题名 → title",
                "姓名 → key:name_birth.name",
                "出生年月 → key:name_birth.date",
            ]
        );
        let record = columns
            .record(&text(&["J-1", "t", " 王7华 ", "1960.8.17"]))
            .unwrap();
        assert_eq!(
            Value::Object(record),
            serde_json::json!({
                "id": "J-1", "title": "t", "metadata": {},
                "keys": {"name_birth": "王7华|1960.8.17"},
            })
        );
        // Neither: no key; one without the other: refused, naming columns.
        let record = columns.record(&text(&["J-2", "t", "", ""])).unwrap();
        assert!(!record.contains_key("keys"));
        let e = columns
            .record(&text(&["J-3", "t", "王7华", ""]))
            .unwrap_err();
        assert!(e.contains("no birth date in column \"出生年月\""), "{e}");
        assert!(!e.contains("王7华"), "{e}");
        let e = columns
            .record(&text(&["J-3", "t", "", "1960-08-17"]))
            .unwrap_err();
        assert!(e.contains("no name in column \"姓名\""), "{e}");
        assert!(!e.contains("1960"), "{e}");
        let e = columns
            .record(&text(&["J-3", "t", "王|华", "1960-08-17"]))
            .unwrap_err();
        assert!(e.contains("holds a |"), "{e}");
    }

    #[test]
    fn a_name_without_a_birth_date_column_is_metadata_and_a_map_may_keep_both() {
        assert_eq!(
            resolved(&["档号", "题名", "姓名"])[2],
            ("姓名".into(), Target::Field("姓名".into()))
        );
        let map = ["姓名=key:name_birth.name", "姓名=metadata.name"]
            .map(|e| parse_map_entry(e).expect("valid"));
        let columns =
            Columns::resolve(&header(&["档号", "题名", "姓名", "生日"]), &map, true).unwrap();
        let record = columns
            .record(&text(&["J-1", "t", "王7华", "1960年8月17日"]))
            .unwrap();
        assert_eq!(record["metadata"]["name"], "王7华");
        assert_eq!(record["keys"]["name_birth"], "王7华|1960年8月17日");
        // Half a key said by --map, with no other half, is refused.
        let map = [parse_map_entry("人名=key:name_birth.name").unwrap()];
        let e = Columns::resolve(&header(&["档号", "题名", "人名"]), &map, true).unwrap_err();
        assert!(
            e.to_string()
                .contains("no column gives key:name_birth.date"),
            "{e}"
        );
        // A whole key and its halves are one key given twice.
        let e = Columns::resolve(
            &header(&["档号", "题名", "key:name_birth", "姓名", "出生日期"]),
            &[],
            true,
        )
        .unwrap_err();
        assert!(e.to_string().contains("both give key:name_birth"), "{e}");
    }

    #[test]
    fn an_empty_title_is_refused_naming_its_column_unless_allowed() {
        let columns = Columns::resolve(&header(&["档号", "题名"]), &[], true).unwrap();
        let e = columns.record(&text(&["J-1", "  "])).unwrap_err();
        assert!(e.contains("has no title (column \"题名\" is empty)"), "{e}");
        let columns = columns.allowing_empty_titles(true);
        assert_eq!(columns.record(&text(&["J-1", ""])).unwrap()["title"], "");
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
