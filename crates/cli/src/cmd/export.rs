//! `xarchive export`: a domain's records, all or those whose metadata
//! match, as NDJSON, CSV (UTF-8 with a byte-order mark, or GB18030) or a
//! spreadsheet, in a form `xarchive import` reads back to the same records.
//!
//! The IDs come a page at a time from `GET /v1/archives`, each record from
//! `GET /v1/archives/{id}` (several at once, written in ID order). A record
//! read by its ID withholds the values of private keys (`keys_withheld`,
//! docs/SECURITY.md): an export carries none, only public keys.
//!
//! A file written is owner-only (0600) and put in place whole
//! (`private_file`): records may name people. A CSV's cells that a
//! spreadsheet would run as formulas are written as text
//! (`formula_cells`), which `import` reads back as they were.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context};
use base64::Engine;
use futures::{StreamExt, TryStreamExt};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use serde_json::{Map, Value};
use xarchive_node::{Record, Visibility};

use super::formula_cells::neutralised;
use super::private_file::PrivateFile;
use super::ServerArgs;

#[derive(clap::Args)]
pub struct ExportArgs {
    /// Where to write: a file, or `-` for standard output.
    #[arg(default_value = "-")]
    out: PathBuf,
    /// `ndjson` (one record a line, as `import` and `_bulk` take it), `csv`
    /// or `xlsx` (columns id, title, metadata as a JSON object, content as
    /// base64, and key:TYPE for each public key type). Default: by the
    /// file's extension, else ndjson.
    #[arg(long, value_enum)]
    format: Option<ExportFormat>,
    /// A CSV's encoding: utf-8 (with a byte-order mark, which spreadsheets
    /// need to read it as UTF-8) or gb18030.
    #[arg(long, value_enum, default_value_t = CsvEncoding::Utf8)]
    encoding: CsvEncoding,
    /// Only records whose metadata field NAME is VALUE (a text equal to it,
    /// or a number or true/false written so); repeated, all must hold.
    #[arg(long, value_name = "metadata.NAME=VALUE", value_parser = parse_filter)]
    filter: Vec<Filter>,
    /// IDs read per page.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    page: u64,
    /// Records read at once.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..=256))]
    parallel: u64,
    #[command(flatten)]
    server: ServerArgs,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    #[value(alias = "jsonl")]
    Ndjson,
    Csv,
    Xlsx,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum CsvEncoding {
    #[value(name = "utf-8", alias = "utf8")]
    Utf8,
    Gb18030,
}

/// One `--filter metadata.NAME=VALUE`.
#[derive(Clone, Debug)]
pub struct Filter {
    field: String,
    value: String,
}

fn parse_filter(text: &str) -> Result<Filter, String> {
    let (field, value) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?} is not metadata.NAME=VALUE"))?;
    let field = field
        .trim()
        .strip_prefix("metadata.")
        .filter(|f| !f.is_empty())
        .ok_or_else(|| format!("{text:?} does not name a metadata field: metadata.NAME=VALUE"))?;
    Ok(Filter {
        field: field.to_owned(),
        value: value.to_owned(),
    })
}

impl Filter {
    /// Whether the record's field is the value: a text equal to it, else
    /// the field's JSON (2024, true) equal to it.
    fn matches(&self, metadata: &Map<String, Value>) -> bool {
        match metadata.get(&self.field) {
            None => false,
            Some(Value::String(s)) => *s == self.value,
            // Not `*other == self.value`: a JSON value equals a string
            // only when it is that string.
            Some(other) => serde_json::to_string(other).is_ok_and(|json| json == self.value),
        }
    }
}

/// A record as an export line: what `import` needs to make it again.
#[derive(Serialize)]
struct Line<'a> {
    id: &'a str,
    title: &'a str,
    metadata: &'a Map<String, Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<String>,
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    keys: &'a std::collections::BTreeMap<String, String>,
}

fn content_base64(record: &Record) -> Option<String> {
    record
        .content
        .as_ref()
        .map(|c| base64::engine::general_purpose::STANDARD.encode(c))
}

/// Where records are written.
enum Sink {
    Ndjson(BufWriter<Box<dyn Write + Send>>),
    Csv {
        out: BufWriter<Box<dyn Write + Send>>,
        gb18030: bool,
        key_types: Vec<String>,
    },
    Xlsx {
        workbook: Box<rust_xlsxwriter::Workbook>,
        row: u32,
        key_types: Vec<String>,
    },
}

/// The most characters a spreadsheet cell holds.
const MAX_CELL_CHARS: usize = 32_767;

/// Where an export goes: standard output, a file made for it (owner-only,
/// in place once whole), or something already there that is not a file
/// (a pipe, a terminal, /dev/stdout), written as it is.
enum Destination {
    Stdout,
    Private(PrivateFile),
    Existing(std::fs::File),
}

impl Destination {
    fn open(out: &Path) -> anyhow::Result<Destination> {
        if out == Path::new("-") {
            return Ok(Destination::Stdout);
        }
        if std::fs::metadata(out).is_ok_and(|m| !m.is_file() && !m.is_dir()) {
            let file = std::fs::OpenOptions::new()
                .write(true)
                .open(out)
                .with_context(|| format!("cannot open {}", out.display()))?;
            return Ok(Destination::Existing(file));
        }
        Ok(Destination::Private(PrivateFile::create(out)?))
    }

    /// A writer for the records (the file's own descriptor, duplicated).
    fn writer(&self) -> anyhow::Result<Box<dyn Write + Send>> {
        Ok(match self {
            Destination::Stdout => Box::new(xarchive::output::stdout()),
            Destination::Private(file) => Box::new(
                file.file()
                    .try_clone()
                    .with_context(|| format!("cannot write {}", file.path().display()))?,
            ),
            Destination::Existing(file) => Box::new(file.try_clone()?),
        })
    }

    /// Puts a file made for the export in place.
    fn finish(self) -> anyhow::Result<()> {
        match self {
            Destination::Private(file) => file.persist(),
            Destination::Stdout | Destination::Existing(_) => Ok(()),
        }
    }
}

impl Sink {
    fn new(
        format: ExportFormat,
        encoding: CsvEncoding,
        out: &Destination,
        key_types: Vec<String>,
    ) -> anyhow::Result<Sink> {
        let header = || {
            let mut columns: Vec<String> = ["id", "title", "metadata", "content"]
                .map(String::from)
                .to_vec();
            columns.extend(key_types.iter().map(|t| format!("key:{t}")));
            columns
        };
        Ok(match format {
            ExportFormat::Ndjson => Sink::Ndjson(BufWriter::new(out.writer()?)),
            ExportFormat::Csv => {
                let mut out = BufWriter::new(out.writer()?);
                let gb18030 = encoding == CsvEncoding::Gb18030;
                if !gb18030 {
                    out.write_all(b"\xef\xbb\xbf")?;
                }
                let mut sink = Sink::Csv {
                    out,
                    gb18030,
                    key_types: key_types.clone(),
                };
                sink.csv_row(&header())?;
                sink
            }
            ExportFormat::Xlsx => {
                let mut workbook = Box::new(rust_xlsxwriter::Workbook::new());
                let sheet = workbook.add_worksheet_with_constant_memory()?;
                sheet.set_name("records")?;
                let bold = rust_xlsxwriter::Format::new().set_bold();
                for (col, name) in header().iter().enumerate() {
                    sheet.write_string_with_format(0, u16::try_from(col)?, name, &bold)?;
                }
                Sink::Xlsx {
                    workbook,
                    row: 1,
                    key_types: key_types.clone(),
                }
            }
        })
    }

    /// One CSV row, its cells neutralised, encoded, written.
    fn csv_row(&mut self, fields: &[String]) -> anyhow::Result<()> {
        let Sink::Csv { out, gb18030, .. } = self else {
            return Ok(());
        };
        // A row at a time, so that what is encoded is whole characters.
        let mut writer = csv::Writer::from_writer(Vec::new());
        let cells: Vec<_> = fields.iter().map(|f| neutralised(f)).collect();
        writer.write_record(cells.iter().map(|c| c.as_bytes()))?;
        let bytes = writer
            .into_inner()
            .map_err(|e| anyhow::anyhow!("cannot write a CSV row: {}", e.error()))?;
        if *gb18030 {
            let text = String::from_utf8(bytes).context("a CSV row is not UTF-8")?;
            // GB18030 writes every Unicode character: nothing unmappable.
            let (encoded, _, _) = encoding_rs::GB18030.encode(&text);
            out.write_all(&encoded)?;
        } else {
            out.write_all(&bytes)?;
        }
        Ok(())
    }

    fn write(&mut self, record: &Record) -> anyhow::Result<()> {
        let id = record.id.to_string();
        match self {
            Sink::Ndjson(out) => {
                let line = Line {
                    id: &id,
                    title: &record.title,
                    metadata: &record.metadata,
                    content: content_base64(record),
                    keys: &record.keys,
                };
                // Into memory first: serde_json's error would hide which
                // writer failed (a closed pipe is told by `output`).
                let mut bytes = serde_json::to_vec(&line)?;
                bytes.push(b'\n');
                out.write_all(&bytes)?;
            }
            Sink::Csv { key_types, .. } => {
                let row = table_row(record, &id, key_types);
                self.csv_row(&row)?;
            }
            Sink::Xlsx {
                workbook,
                row,
                key_types,
                ..
            } => {
                let cells = table_row(record, &id, key_types);
                let sheet = workbook.worksheet_from_index(0)?;
                for (col, cell) in cells.iter().enumerate() {
                    let chars = cell.chars().count();
                    if chars > MAX_CELL_CHARS {
                        let column = ["id", "title", "metadata", "content"]
                            .get(col)
                            .copied()
                            .unwrap_or("a key");
                        bail!(
                            "record {id}: its {column} has {chars} characters, more than a spreadsheet cell holds ({MAX_CELL_CHARS}); export it as NDJSON or CSV"
                        );
                    }
                    if !cell.is_empty() {
                        sheet.write_string(*row, u16::try_from(col)?, cell)?;
                    }
                }
                *row += 1;
            }
        }
        Ok(())
    }

    fn finish(self, to: Destination) -> anyhow::Result<()> {
        match self {
            Sink::Ndjson(mut out) | Sink::Csv { mut out, .. } => out.flush()?,
            Sink::Xlsx { mut workbook, .. } => match &to {
                Destination::Private(file) => workbook
                    .save_to_writer(file.file())
                    .with_context(|| format!("cannot write {}", file.path().display()))?,
                Destination::Stdout | Destination::Existing(_) => {
                    let bytes = workbook.save_to_buffer()?;
                    to.writer()?.write_all(&bytes)?;
                }
            },
        }
        to.finish()
    }
}

/// A record's cells: id, title, metadata (JSON), content (base64), then
/// the value of each public key type (empty when it has none).
fn table_row(record: &Record, id: &str, key_types: &[String]) -> Vec<String> {
    let mut row = vec![
        id.to_owned(),
        record.title.clone(),
        Value::Object(record.metadata.clone()).to_string(),
        content_base64(record).unwrap_or_default(),
    ];
    row.extend(
        key_types
            .iter()
            .map(|t| record.keys.get(t).cloned().unwrap_or_default()),
    );
    row
}

fn format_of(out: &Path, said: Option<ExportFormat>) -> ExportFormat {
    if let Some(format) = said {
        return format;
    }
    match out
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("csv") => ExportFormat::Csv,
        Some("xlsx") => ExportFormat::Xlsx,
        _ => ExportFormat::Ndjson,
    }
}

pub async fn run(args: ExportArgs) -> anyhow::Result<ExitCode> {
    let client = args.server.client()?;
    let format = format_of(&args.out, args.format);
    if args.encoding != CsvEncoding::Utf8 && format != ExportFormat::Csv {
        bail!("--encoding applies to CSV only");
    }
    // Public key types have columns of their own; private ones are never
    // in a record read by its ID.
    let key_types: Vec<String> = client
        .key_types()
        .await?
        .key_types
        .into_iter()
        .filter(|t| t.visibility == Visibility::Public)
        .map(|t| t.name)
        .collect();
    let total = client.stats().await?.domain.records;
    let to = Destination::open(&args.out)?;
    let mut sink = Sink::new(format, args.encoding, &to, key_types)?;
    let bar = ProgressBar::new(total).with_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] [{bar:40}] {pos}/{len} records {msg}",
        )?
        .progress_chars("=> "),
    );
    let started = Instant::now();
    let (mut read, mut written, mut withheld) = (0u64, 0u64, 0u64);
    let mut after: Option<String> = None;
    loop {
        let page = client
            .list(after.as_deref(), usize::try_from(args.page)?)
            .await?;
        let client = &client;
        let records: Vec<Option<Record>> = futures::stream::iter(page.ids.iter())
            .map(|id| async move { client.get(id).await })
            .buffered(usize::try_from(args.parallel)?)
            .try_collect()
            .await?;
        // A record deleted since its page was listed is left out.
        for record in records.into_iter().flatten() {
            read += 1;
            bar.inc(1);
            if args.filter.iter().all(|f| f.matches(&record.metadata)) {
                withheld += u64::from(!record.keys_withheld.is_empty());
                sink.write(&record)?;
                written += 1;
            }
        }
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    sink.finish(to)?;
    bar.finish_and_clear();
    let to = if args.out == Path::new("-") {
        "standard output".to_owned()
    } else {
        args.out.display().to_string()
    };
    let seconds = started.elapsed().as_secs_f64();
    let summary = serde_json::json!({
        "exported": written,
        "read": read,
        "keys_withheld": withheld,
        "to": if args.out == Path::new("-") { None } else { Some(&args.out) },
        "format": format!("{format:?}").to_lowercase(),
        "seconds": seconds,
    });
    if super::json(false) && args.out != Path::new("-") {
        super::print_json(&summary)?;
        return Ok(ExitCode::SUCCESS);
    }
    if super::json(false) {
        // Standard output is the export itself: the summary, one JSON
        // line, goes to standard error.
        xarchive::errln!("{summary}");
        return Ok(ExitCode::SUCCESS);
    }
    // On standard error: standard output may be the export itself.
    xarchive::errln!("exported {written} records of {read} to {to} in {seconds:.2} s");
    if withheld > 0 {
        xarchive::errln!(
            "{withheld} of them hold private keys (identity numbers, names with birth dates), which an export does not carry: a record read by its ID withholds them (docs/SECURITY.md)"
        );
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filter_matches_text_equal_to_it_and_numbers_written_so() {
        let f = parse_filter("metadata.year=2023").expect("valid");
        let metadata = |v: Value| {
            let mut m = Map::new();
            m.insert("year".into(), v);
            m
        };
        assert!(f.matches(&metadata(Value::from("2023"))));
        assert!(f.matches(&metadata(Value::from(2023))));
        assert!(!f.matches(&metadata(Value::from("2023 "))));
        assert!(!f.matches(&metadata(Value::from(2024))));
        assert!(!f.matches(&Map::new()));
        assert!(parse_filter("year=2023").is_err());
        assert!(parse_filter("metadata.=1").is_err());
        assert!(parse_filter("metadata.year").is_err());
    }

    #[test]
    fn the_format_follows_the_extension_unless_said() {
        assert_eq!(format_of(Path::new("a.CSV"), None), ExportFormat::Csv);
        assert_eq!(format_of(Path::new("a.xlsx"), None), ExportFormat::Xlsx);
        assert_eq!(format_of(Path::new("-"), None), ExportFormat::Ndjson);
        assert_eq!(
            format_of(Path::new("a.csv"), Some(ExportFormat::Ndjson)),
            ExportFormat::Ndjson
        );
    }
}
