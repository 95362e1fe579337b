//! `xarchive import FILE`: CSV, NDJSON or a spreadsheet, in UTF-8, GBK or
//! GB18030, from a file or standard input, streamed to a domain's `_bulk`
//! endpoint in chunks, with a progress bar; rejected lines reported (and
//! written to `--rejects`) with their line numbers and reasons.
//!
//! A reader thread parses the next chunk while the previous one is being
//! committed, and chunks are sent one at a time, in the file's order. A
//! file gives each record once: an archive number met again is a rejected
//! line naming the line it was first on (`duplicates`), and so is a line
//! without a title unless `--allow-empty-title`. Line numbers are the
//! input's: 1-based, a table's header is line 1 (or the row it is on in a
//! spreadsheet).
//!
//! The rejects file may hold identity numbers: it is owner-only and put in
//! place whole (`private_file`), with what was rejected before a stop too;
//! its cells are written as a spreadsheet shows text (`formula_cells`), as
//! a CSV export's are, and a CSV's are read back so.

mod columns;
mod duplicates;
mod sheet;
mod source;

pub use sheet::{child_main as sheet_rows_child, SheetRowsArgs, CHILD_COMMAND};

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{anyhow, Context};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::Value;
use xarchive_node::wire::ErrorCode;

use super::formula_cells::{neutralised, restored};
use super::private_file::PrivateFile;
use super::ServerArgs;
use columns::{Cell, Columns, MapEntry};
use duplicates::SeenIds;
use sheet::{Row, SheetRows};
use source::{EncodingArg, Format, FormatArg, Input, Lines, Stop};

#[derive(clap::Args)]
pub struct ImportArgs {
    /// The file to import; `-` reads standard input.
    file: PathBuf,
    /// `csv` (a header, then a record a row), `ndjson` (one record per
    /// line: {"id","title","metadata","content","keys"}), `xlsx` (a
    /// spreadsheet: a header row, then a record a row), or `auto`: by the
    /// extension, else by the first bytes (a spreadsheet's signature; `{`
    /// for NDJSON; else CSV).
    #[arg(long, value_enum, default_value_t = FormatArg::Auto)]
    format: FormatArg,
    /// The text's encoding; `auto`: UTF-8 (with or without a byte-order
    /// mark) if the text is valid UTF-8, else GB18030 (which includes GBK).
    #[arg(long, value_enum, default_value_t = EncodingArg::Auto)]
    encoding: EncodingArg,
    /// The spreadsheet's sheet to read (default: the first).
    #[arg(long, value_name = "NAME")]
    sheet: Option<String>,
    /// What a table's columns give: `COLUMN=TARGET`, comma-separated or
    /// repeated, TARGET one of id, title, content (base64), metadata (a
    /// JSON object), metadata.NAME, key:TYPE, or - (left out). Columns
    /// named id, title, metadata, content, metadata.NAME and key:TYPE need
    /// no mapping, nor do a catalogue's usual headers (档号 id, 题名 title,
    /// 年度 metadata.year, 身份证号 `key:id_card`, 姓名 with 出生日期
    /// `key:name_birth`, …); every other column becomes metadata under its
    /// own name. key:TYPE.name and key:TYPE.date make one key of a name
    /// and a birth date in two columns. A column named twice gives both
    /// (`姓名=key:name_birth.name,姓名=metadata.name` keeps the name in clear
    /// too).
    #[arg(long, value_name = "COLUMN=TARGET", value_delimiter = ',', value_parser = columns::parse_map_entry)]
    map: Vec<MapEntry>,
    /// Do not read a catalogue's usual headers (档号, 题名, 年度, …) as
    /// their fields: such columns become metadata under their own names.
    #[arg(long)]
    no_profile: bool,
    /// Import lines whose title is empty (refused otherwise: archival
    /// description requires a title).
    #[arg(long)]
    allow_empty_title: bool,
    /// Write every rejected line to FILE (CSV, UTF-8 with a byte-order
    /// mark; owner-only, 0600: it may hold identity numbers): its line
    /// number, why, and the line's own fields.
    #[arg(long, value_name = "FILE")]
    rejects: Option<PathBuf>,
    /// The memory a spreadsheet's reader may take, in MiB: a workbook
    /// needing more is refused (one that expands to gigabytes), however
    /// few its bytes.
    #[arg(long, value_name = "MIB", default_value_t = sheet::SHEET_MEMORY_MIB, value_parser = clap::value_parser!(u64).range(16..=65_536))]
    sheet_memory: u64,
    /// Records per request.
    #[arg(long, default_value_t = 20_000)]
    chunk: usize,
    #[command(flatten)]
    server: ServerArgs,
}

/// What the reader thread sends, in the input's order.
enum Message {
    /// A table's header row: its line, and the columns with their targets.
    Header {
        line: u64,
        columns: Columns,
    },
    /// The input is a spreadsheet: progress counts its rows from now on.
    Rows,
    Chunk(Chunk),
    /// The input cannot be read on; every chunk before was sent.
    Stop(Stop),
}

/// One request's worth of NDJSON, and where its lines came from.
struct Chunk {
    body: Vec<u8>,
    /// The input line of each body line.
    lines: Vec<u64>,
    /// With `--rejects`: each body line's input (a row's fields, or the
    /// NDJSON line), to write if the domain refuses it.
    inputs: Vec<Vec<String>>,
    /// Rows refused before sending.
    refused: Vec<Rejected>,
    /// How far the input has been read: bytes, or a spreadsheet's rows.
    position: u64,
}

impl Chunk {
    fn new() -> Chunk {
        Chunk {
            body: Vec::new(),
            lines: Vec::new(),
            inputs: Vec::new(),
            refused: Vec::new(),
            position: 0,
        }
    }

    fn is_empty(&self) -> bool {
        self.lines.is_empty() && self.refused.is_empty()
    }
}

/// A line refused, here or by the domain.
struct Rejected {
    line: u64,
    code: String,
    reason: String,
    input: Vec<String>,
}

/// Rows looked at for a header: a title or two may stand above it.
const HEADER_SEARCH_ROWS: usize = 10;

/// A chunk is sent once its body is this large, whatever its lines: what
/// is in flight stays bounded however wide the rows.
const CHUNK_BYTES: usize = 8 << 20;

/// What the reader thread needs.
struct Reading {
    input: Input,
    format: FormatArg,
    encoding: EncodingArg,
    sheet: Option<String>,
    map: Vec<MapEntry>,
    profile: bool,
    empty_titles: bool,
    sheet_memory: u64,
    keep_inputs: bool,
    size: usize,
    read: Arc<AtomicU64>,
    tx: SyncSender<Message>,
}

impl Reading {
    fn send(&self, message: Message) -> bool {
        self.tx.send(message).is_ok()
    }

    /// Sends `chunk` and starts another; false once the receiver is gone.
    fn emit(&self, chunk: &mut Chunk, position: u64) -> bool {
        let mut full = std::mem::replace(chunk, Chunk::new());
        full.position = position;
        self.send(Message::Chunk(full))
    }

    fn bytes_read(&self) -> u64 {
        self.read.load(Ordering::Relaxed)
    }

    /// Reads the whole input into chunks; a [`Stop`] after what came before
    /// it was sent.
    fn run(self) {
        let mut chunk = Chunk::new();
        let result = self.read_into(&mut chunk);
        // What was read before a stop is sent first, so that it is
        // committed and the count of committed records is exact.
        if !chunk.is_empty() && !self.emit(&mut chunk, self.bytes_read()) {
            return;
        }
        if let Err(stop) = result {
            self.send(Message::Stop(stop));
        }
    }

    fn read_into(&self, chunk: &mut Chunk) -> Result<(), Stop> {
        let reader = self.input.open(self.read.clone())?;
        let (format, reader) = source::detect(&self.input, self.format, reader)?;
        let name = self.input.name();
        if format != Format::Spreadsheet && self.sheet.is_some() {
            return Err(Stop::Columns(format!(
                "--sheet names a sheet, but {name} is not a spreadsheet"
            )));
        }
        let mut seen = SeenIds::new();
        match format {
            Format::Ndjson => {
                if !self.map.is_empty() {
                    return Err(Stop::Columns(format!(
                        "--map maps a table's columns, but {name} is NDJSON"
                    )));
                }
                self.ndjson(reader, chunk, &mut seen)
            }
            Format::Csv => {
                let lines = Lines::new(source::buffered(reader), self.encoding);
                let decoded = source::Decoded::new(lines, name.clone());
                let mut csv = csv::ReaderBuilder::new()
                    .has_headers(false)
                    .flexible(true)
                    .from_reader(decoded);
                let rows = csv.records().map(|record| match record {
                    Ok(record) => Ok(Row {
                        line: record.position().map_or(0, |p| p.line()),
                        cells: record
                            .iter()
                            .map(|field| Cell::Text(restored(field).to_owned()))
                            .collect(),
                    }),
                    Err(e) => Err(csv_stop(e, &name)),
                });
                self.table(rows, chunk, &mut seen, false, |this| this.bytes_read())
            }
            Format::Spreadsheet => {
                // A file is read by the child itself; standard input is
                // handed to it through a temporary file.
                let (path, stdin) = match &self.input {
                    Input::Path(path) => (Some(path.as_path()), None),
                    Input::Stdin => (None, Some(reader)),
                };
                let rows =
                    SheetRows::start(path, stdin, self.sheet.as_deref(), &name, self.sheet_memory)?;
                if !self.send(Message::Rows) {
                    return Ok(());
                }
                let position = AtomicU64::new(0);
                self.table(
                    rows.inspect(|row| {
                        if let Ok(row) = row {
                            position.store(row.line, Ordering::Relaxed);
                        }
                    }),
                    chunk,
                    &mut seen,
                    true,
                    |_| position.load(Ordering::Relaxed),
                )
            }
        }
    }

    fn ndjson(
        &self,
        reader: Box<dyn Read + Send>,
        chunk: &mut Chunk,
        seen: &mut SeenIds,
    ) -> Result<(), Stop> {
        let name = self.input.name();
        let mut lines = Lines::new(source::buffered(reader), self.encoding);
        let mut line = Vec::new();
        while let Some(number) = lines.next_into(&mut line, &name)? {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let input = || {
                let text = String::from_utf8_lossy(&line);
                vec![text.trim_end_matches(['\r', '\n']).to_owned()]
            };
            // A line that is not a record's JSON goes to the domain as it
            // is, which refuses it saying why.
            let head: Option<Head> = serde_json::from_slice(&line).ok();
            let refusal = head.and_then(|head| {
                let untitled = head.title.as_deref().is_some_and(|t| t.trim().is_empty());
                if untitled && !self.empty_titles {
                    return Some(("invalid_row", columns::no_title(None)));
                }
                let first = seen.first_line(&head.id?, number)?;
                Some(("duplicate_id", duplicate_reason(first)))
            });
            if let Some((code, reason)) = refusal {
                chunk.refused.push(Rejected {
                    line: number,
                    code: code.to_owned(),
                    reason,
                    input: input(),
                });
            } else {
                chunk.body.extend_from_slice(&line);
                if line.last() != Some(&b'\n') {
                    chunk.body.push(b'\n');
                }
                chunk.lines.push(number);
                if self.keep_inputs {
                    chunk.inputs.push(input());
                }
            }
            if self.full(chunk) && !self.emit(chunk, self.bytes_read()) {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Whether `chunk` is to be sent now.
    fn full(&self, chunk: &Chunk) -> bool {
        chunk.lines.len() + chunk.refused.len() >= self.size || chunk.body.len() >= CHUNK_BYTES
    }

    /// A table's rows: the header (found among the first rows), then a
    /// record a row. A spreadsheet's rows (`pad`) stop at their last
    /// cell that holds something: they are as wide as the header.
    fn table(
        &self,
        rows: impl Iterator<Item = Result<Row, Stop>>,
        chunk: &mut Chunk,
        seen: &mut SeenIds,
        pad: bool,
        position: impl Fn(&Self) -> u64,
    ) -> Result<(), Stop> {
        let mut columns: Option<Columns> = None;
        let mut first_error = None;
        let mut looked_at = 0;
        for row in rows {
            let mut row = row?;
            if row.cells.iter().all(|c| c.text().trim().is_empty()) {
                continue;
            }
            let Some(columns) = &columns else {
                let header: Vec<String> = row.cells.iter().map(|c| c.text().to_owned()).collect();
                match Columns::resolve(&header, &self.map, self.profile) {
                    Ok(found) => {
                        let found = found.allowing_empty_titles(self.empty_titles);
                        if !self.send(Message::Header {
                            line: row.line,
                            columns: found.clone(),
                        }) {
                            return Ok(());
                        }
                        columns = Some(found);
                    }
                    Err(e) => {
                        first_error.get_or_insert(e);
                        looked_at += 1;
                        if looked_at == HEADER_SEARCH_ROWS {
                            break;
                        }
                    }
                }
                continue;
            };
            let width = columns.headers().len();
            if pad && row.cells.len() < width {
                row.cells.resize(width, Cell::Text(String::new()));
            }
            let refused = |code: &str, reason: String| Rejected {
                line: row.line,
                code: code.to_owned(),
                reason,
                input: texts(&row.cells),
            };
            match columns.record(&row.cells) {
                Ok(record) => {
                    let id = record.get("id").and_then(Value::as_str).unwrap_or_default();
                    if let Some(first) = seen.first_line(id, row.line) {
                        chunk
                            .refused
                            .push(refused("duplicate_id", duplicate_reason(first)));
                    } else {
                        // Writing a JSON value to a Vec cannot fail.
                        let _ = serde_json::to_writer(&mut chunk.body, &Value::Object(record));
                        chunk.body.push(b'\n');
                        chunk.lines.push(row.line);
                        if self.keep_inputs {
                            chunk.inputs.push(texts(&row.cells));
                        }
                    }
                }
                Err(reason) => chunk.refused.push(refused("invalid_row", reason)),
            }
            if self.full(chunk) && !self.emit(chunk, position(self)) {
                return Ok(());
            }
        }
        if columns.is_none() {
            return Err(Stop::Columns(match first_error {
                Some(e) => format!("{e} (looked for a header in the first {looked_at} rows)"),
                None => format!("{} has no rows", self.input.name()),
            }));
        }
        Ok(())
    }
}

/// What an NDJSON line's checks need of it.
#[derive(serde::Deserialize)]
struct Head {
    id: Option<String>,
    title: Option<String>,
}

/// Why a line repeating the archive number of line `first` is refused.
fn duplicate_reason(first: u64) -> String {
    format!("the archive number of line {first} again: a file gives each record once")
}

fn texts(cells: &[Cell]) -> Vec<String> {
    cells.iter().map(|c| c.text().to_owned()).collect()
}

/// A CSV reader's error as a [`Stop`]: the decoder's own stop, an I/O
/// error, or the CSV itself.
fn csv_stop(e: csv::Error, input: &str) -> Stop {
    let line = e.position().map_or(0, |p| p.line());
    let detail = e.to_string();
    match e.into_kind() {
        csv::ErrorKind::Io(io) => source::stop_from_io(io, input),
        _ => Stop::Csv { line, detail },
    }
}

/// Where rejected lines are written (`--rejects`): a CSV, UTF-8 with a
/// byte-order mark so that spreadsheets open it as such; owner-only, and
/// in place once the import ends, however it ends.
struct RejectsFile {
    file: PrivateFile,
    writer: csv::Writer<std::fs::File>,
    written: u64,
}

impl RejectsFile {
    fn create(path: &Path) -> anyhow::Result<RejectsFile> {
        let file = PrivateFile::create(path)?;
        let mut out = file
            .file()
            .try_clone()
            .with_context(|| format!("cannot create {}", path.display()))?;
        std::io::Write::write_all(&mut out, b"\xef\xbb\xbf")
            .with_context(|| format!("cannot write {}", path.display()))?;
        Ok(RejectsFile {
            writer: csv::WriterBuilder::new().flexible(true).from_writer(out),
            file,
            written: 0,
        })
    }

    /// One row, its cells as a spreadsheet shows text.
    fn row(&mut self, cells: &[String]) -> anyhow::Result<()> {
        let cells: Vec<_> = cells.iter().map(|c| neutralised(c)).collect();
        self.writer
            .write_record(cells.iter().map(|c| c.as_bytes()))
            .with_context(|| format!("cannot write {}", self.file.path().display()))
    }

    fn header(&mut self, columns: &[String]) -> anyhow::Result<()> {
        let mut row = vec!["line".to_owned(), "reason".to_owned()];
        row.extend(columns.iter().cloned());
        self.row(&row)
    }

    fn write(&mut self, rejected: &Rejected) -> anyhow::Result<()> {
        let mut row = vec![
            rejected.line.to_string(),
            format!("{}: {}", rejected.code, rejected.reason),
        ];
        row.extend(rejected.input.iter().cloned());
        self.row(&row)?;
        self.written += 1;
        Ok(())
    }

    fn finish(mut self) -> anyhow::Result<(PathBuf, u64)> {
        let path = self.file.path().to_owned();
        self.writer
            .flush()
            .with_context(|| format!("cannot write {}", path.display()))?;
        self.file.persist()?;
        Ok((path, self.written))
    }
}

/// What has been committed so far, for the summary and a stop's message.
#[derive(Default)]
struct Tally {
    created: u64,
    replaced: u64,
    rejected: u64,
    /// The first rejections, to print.
    shown: Vec<String>,
}

impl Tally {
    fn committed(&self) -> u64 {
        self.created + self.replaced
    }
}

/// Rejections printed at the end; the rest are counted (and written to
/// `--rejects`).
const SHOWN_REJECTIONS: usize = 10;

pub async fn run(args: ImportArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(args.chunk > 0, "--chunk must be positive");
    let client = args.server.client()?;
    let input = Input::new(&args.file);
    if let Input::Path(path) = &input {
        // Said before anything else, naming the path.
        std::fs::metadata(path).with_context(|| format!("cannot open {}", path.display()))?;
    }
    let mut rejects = args
        .rejects
        .as_deref()
        .map(RejectsFile::create)
        .transpose()?;
    let read = Arc::new(AtomicU64::new(0));
    let (tx, rx) = std::sync::mpsc::sync_channel(2);
    let reading = Reading {
        input: input.clone(),
        format: args.format,
        encoding: args.encoding,
        sheet: args.sheet.clone(),
        map: args.map.clone(),
        profile: !args.no_profile,
        empty_titles: args.allow_empty_title,
        sheet_memory: args.sheet_memory,
        keep_inputs: rejects.is_some(),
        size: args.chunk,
        read: read.clone(),
        tx,
    };
    std::thread::spawn(move || reading.run());
    let rx = Arc::new(Mutex::new(rx));

    let bar = match input.size() {
        Some(total) => ProgressBar::new(total).with_style(
            ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] [{bar:40}] {bytes}/{total_bytes} {msg}",
            )?
            .progress_chars("=> "),
        ),
        None => ProgressBar::new_spinner().with_style(ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bytes} {msg}",
        )?),
    };
    let started = Instant::now();
    let mut tally = Tally::default();
    let fed = feed(&rx, &client, &bar, &mut tally, &mut rejects).await;
    // What was rejected before a stop is kept too.
    let written = rejects.map(RejectsFile::finish).transpose();
    fed?;
    let written = written?;
    bar.finish_and_clear();
    let elapsed = started.elapsed().as_secs_f64();
    let done = tally.committed();
    if super::json(false) {
        super::print_json(&serde_json::json!({
            "committed": done,
            "created": tally.created,
            "replaced": tally.replaced,
            "rejected": tally.rejected,
            "rejected_lines": tally.shown,
            "rejects_file": written.as_ref().map(|(path, _)| path.display().to_string()),
            "seconds": elapsed,
        }))?;
        return Ok(if tally.rejected == 0 {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        });
    }
    xarchive::outln!(
        "imported {done} records ({} created, {} replaced) in {elapsed:.2} s: {:.0} records/s",
        tally.created,
        tally.replaced,
        done as f64 / elapsed.max(1e-9)
    );
    if tally.rejected == 0 {
        return Ok(ExitCode::SUCCESS);
    }
    xarchive::outln!("{} lines rejected:", tally.rejected);
    for line in &tally.shown {
        xarchive::outln!("  {line}");
    }
    let rejected = usize::try_from(tally.rejected).unwrap_or(usize::MAX);
    if rejected > tally.shown.len() {
        xarchive::outln!("  … and {} more", rejected - tally.shown.len());
    }
    if let Some((path, n)) = written {
        xarchive::outln!("{n} rejected lines written to {}", path.display());
    }
    Ok(ExitCode::FAILURE)
}

/// Sends each chunk the reader thread makes, in order, counting what the
/// domain did and writing what was rejected; until the input ends, or
/// stops (an error saying where and what was committed).
async fn feed(
    rx: &Arc<Mutex<Receiver<Message>>>,
    client: &xarchive_node::ApiClient,
    bar: &ProgressBar,
    tally: &mut Tally,
    rejects: &mut Option<RejectsFile>,
) -> anyhow::Result<()> {
    let mut rejects_header_written = false;
    let started = Instant::now();
    while let Some(message) = next(rx).await? {
        let chunk = match message {
            Message::Header { line, columns } => {
                let mapping: Vec<String> = columns
                    .targets()
                    .map(|(header, target)| format!("{header} → {target}"))
                    .collect();
                // On standard error, where the bar is (and whether or not
                // it is drawn: indicatif's println is silent when hidden).
                bar.suspend(|| {
                    if line > 1 {
                        xarchive::errln!(
                            "the header is line {line}; the lines above it were left out"
                        );
                    }
                    xarchive::errln!("columns: {}", mapping.join(", "));
                });
                if let Some(rejects) = rejects.as_mut() {
                    rejects.header(columns.headers())?;
                    rejects_header_written = true;
                }
                continue;
            }
            Message::Rows => {
                bar.set_length(0);
                bar.set_style(ProgressStyle::with_template(
                    "{spinner} [{elapsed_precise}] row {pos} {msg}",
                )?);
                continue;
            }
            Message::Stop(stop) => {
                bar.abandon();
                return Err(stopped(stop, tally));
            }
            Message::Chunk(chunk) => chunk,
        };
        if let Some(rejects) = rejects.as_mut() {
            if !rejects_header_written {
                rejects.header(&["record".to_owned()])?;
                rejects_header_written = true;
            }
        }
        let mut rejected = chunk.refused;
        if !chunk.lines.is_empty() {
            let (first, last) = (chunk.lines[0], chunk.lines[chunk.lines.len() - 1]);
            let report = match client.bulk(chunk.body).await {
                Ok(report) => report,
                Err(e) => {
                    bar.abandon();
                    xarchive::errln!(
                        "import stopped at line {first}: the request carrying lines {first}–{last} failed. {} records were committed, from the lines before line {first}; some of lines {first}–{last} may have been stored too (importing again is safe: each line replaces its record)",
                        tally.committed()
                    );
                    return Err(e.into());
                }
            };
            tally.created += report.summary.created as u64;
            tally.replaced += report.summary.replaced as u64;
            for result in report.results.iter().filter(|r| r.status >= 400) {
                let at = result.line.saturating_sub(1);
                rejected.push(Rejected {
                    line: chunk.lines.get(at).copied().unwrap_or(0),
                    code: result.code.map_or("?", ErrorCode::as_str).to_owned(),
                    reason: result.message.clone().unwrap_or_default(),
                    input: chunk.inputs.get(at).cloned().unwrap_or_default(),
                });
            }
        }
        rejected.sort_by_key(|r| r.line);
        for r in &rejected {
            tally.rejected += 1;
            if tally.shown.len() < SHOWN_REJECTIONS {
                tally
                    .shown
                    .push(format!("line {}: {}: {}", r.line, r.code, r.reason));
            }
            if let Some(rejects) = rejects.as_mut() {
                rejects.write(r)?;
            }
        }
        bar.set_position(chunk.position);
        let rate = tally.committed() as f64 / started.elapsed().as_secs_f64();
        bar.set_message(format!("{} records, {rate:.0}/s", tally.committed()));
    }
    Ok(())
}

/// The reader thread's next message, waited for off the async threads.
async fn next(rx: &Arc<Mutex<Receiver<Message>>>) -> anyhow::Result<Option<Message>> {
    let rx = rx.clone();
    Ok(tokio::task::spawn_blocking(move || rx.lock().ok().and_then(|rx| rx.recv().ok())).await?)
}

/// The error an import that stopped ends with: why, where, and what was
/// committed before.
fn stopped(stop: Stop, tally: &Tally) -> anyhow::Error {
    let committed = tally.committed();
    match stop.line() {
        Some(line) => anyhow!(
            "{stop}\nimport stopped at line {line}: {committed} records were committed, from the lines before it"
        ),
        None if committed == 0 && tally.rejected == 0 => anyhow!(stop),
        None => anyhow!("{stop}\nimport stopped: {committed} records were committed before"),
    }
}
