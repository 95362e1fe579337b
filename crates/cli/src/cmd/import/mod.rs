//! `xarchive import FILE`: CSV, NDJSON or a spreadsheet, in UTF-8, GBK or
//! GB18030, from a file or standard input, streamed to a domain's `_bulk`
//! endpoint in chunks, with a progress bar; rejected lines reported (and
//! written to `--rejects`) with their line numbers and reasons.
//!
//! A reader thread parses the next chunk while the previous one is being
//! committed, and chunks are sent one at a time so that a later line for
//! an ID always wins over an earlier one, as in the file. Line numbers are
//! the input's: 1-based, a table's header is line 1 (or the row it is on
//! in a spreadsheet).

mod columns;
mod sheet;
mod source;

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{anyhow, Context};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::Value;
use xarchive_node::wire::ErrorCode;

use super::ServerArgs;
use columns::{Cell, Columns, MapEntry};
use sheet::Row;
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
    /// 年度 metadata.year, 身份证号 key:id_card, …); every other column
    /// becomes metadata under its own name.
    #[arg(long, value_name = "COLUMN=TARGET", value_delimiter = ',', value_parser = columns::parse_map_entry)]
    map: Vec<MapEntry>,
    /// Do not read a catalogue's usual headers (档号, 题名, 年度, …) as
    /// their fields: such columns become metadata under their own names.
    #[arg(long)]
    no_profile: bool,
    /// Write every rejected line to FILE (CSV, UTF-8 with a byte-order
    /// mark): its line number, why, and the line's own fields.
    #[arg(long, value_name = "FILE")]
    rejects: Option<PathBuf>,
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
    /// A spreadsheet's rows were read: progress counts rows from now on.
    Rows(u64),
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

/// What the reader thread needs.
struct Reading {
    input: Input,
    format: FormatArg,
    encoding: EncodingArg,
    sheet: Option<String>,
    map: Vec<MapEntry>,
    profile: bool,
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
        match format {
            Format::Ndjson => {
                if !self.map.is_empty() {
                    return Err(Stop::Columns(format!(
                        "--map maps a table's columns, but {name} is NDJSON"
                    )));
                }
                self.ndjson(reader, chunk)
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
                            .map(|field| Cell::Text(field.to_owned()))
                            .collect(),
                    }),
                    Err(e) => Err(csv_stop(e, &name)),
                });
                self.table(rows, chunk, |this| this.bytes_read())
            }
            Format::Spreadsheet => {
                let mut bytes = Vec::new();
                let mut reader = reader;
                reader
                    .read_to_end(&mut bytes)
                    .map_err(|source| Stop::Read {
                        input: name.clone(),
                        source,
                    })?;
                let rows = sheet::rows(bytes, self.sheet.as_deref(), &name)?;
                let last = rows.last().map_or(0, |r| r.line);
                if !self.send(Message::Rows(last)) {
                    return Ok(());
                }
                let position = AtomicU64::new(0);
                self.table(
                    rows.into_iter().map(|row| {
                        position.store(row.line, Ordering::Relaxed);
                        Ok(row)
                    }),
                    chunk,
                    |_| position.load(Ordering::Relaxed),
                )
            }
        }
    }

    fn ndjson(&self, reader: Box<dyn Read + Send>, chunk: &mut Chunk) -> Result<(), Stop> {
        let name = self.input.name();
        let mut lines = Lines::new(source::buffered(reader), self.encoding);
        let mut line = Vec::new();
        while let Some(number) = lines.next_into(&mut line, &name)? {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            chunk.body.extend_from_slice(&line);
            if line.last() != Some(&b'\n') {
                chunk.body.push(b'\n');
            }
            chunk.lines.push(number);
            if self.keep_inputs {
                let text = String::from_utf8_lossy(&line);
                chunk
                    .inputs
                    .push(vec![text.trim_end_matches(['\r', '\n']).to_owned()]);
            }
            if chunk.lines.len() == self.size && !self.emit(chunk, self.bytes_read()) {
                return Ok(());
            }
        }
        Ok(())
    }

    /// A table's rows: the header (found among the first rows), then a
    /// record a row.
    fn table(
        &self,
        rows: impl Iterator<Item = Result<Row, Stop>>,
        chunk: &mut Chunk,
        position: impl Fn(&Self) -> u64,
    ) -> Result<(), Stop> {
        let mut columns: Option<Columns> = None;
        let mut first_error = None;
        let mut looked_at = 0;
        for row in rows {
            let row = row?;
            if row.cells.iter().all(|c| c.text().trim().is_empty()) {
                continue;
            }
            let Some(columns) = &columns else {
                let header: Vec<String> = row.cells.iter().map(|c| c.text().to_owned()).collect();
                match Columns::resolve(&header, &self.map, self.profile) {
                    Ok(found) => {
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
            match columns.record(&row.cells) {
                Ok(record) => {
                    // Writing a JSON value to a Vec cannot fail.
                    let _ = serde_json::to_writer(&mut chunk.body, &Value::Object(record));
                    chunk.body.push(b'\n');
                    chunk.lines.push(row.line);
                    if self.keep_inputs {
                        chunk.inputs.push(texts(&row.cells));
                    }
                }
                Err(reason) => chunk.refused.push(Rejected {
                    line: row.line,
                    code: "invalid_row".to_owned(),
                    reason,
                    input: texts(&row.cells),
                }),
            }
            if chunk.lines.len() + chunk.refused.len() >= self.size
                && !self.emit(chunk, position(self))
            {
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
/// byte-order mark so that spreadsheets open it as such.
struct RejectsFile {
    path: PathBuf,
    writer: csv::Writer<std::fs::File>,
    written: u64,
}

impl RejectsFile {
    fn create(path: PathBuf) -> anyhow::Result<RejectsFile> {
        let mut file = std::fs::File::create(&path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        std::io::Write::write_all(&mut file, b"\xef\xbb\xbf")
            .with_context(|| format!("cannot write {}", path.display()))?;
        Ok(RejectsFile {
            writer: csv::WriterBuilder::new().flexible(true).from_writer(file),
            path,
            written: 0,
        })
    }

    fn header(&mut self, columns: &[String]) -> anyhow::Result<()> {
        let mut row = vec!["line".to_owned(), "reason".to_owned()];
        row.extend(columns.iter().cloned());
        self.writer
            .write_record(&row)
            .with_context(|| format!("cannot write {}", self.path.display()))
    }

    fn write(&mut self, rejected: &Rejected) -> anyhow::Result<()> {
        let mut row = vec![
            rejected.line.to_string(),
            format!("{}: {}", rejected.code, rejected.reason),
        ];
        row.extend(rejected.input.iter().cloned());
        self.writer
            .write_record(&row)
            .with_context(|| format!("cannot write {}", self.path.display()))?;
        self.written += 1;
        Ok(())
    }

    fn finish(mut self) -> anyhow::Result<(PathBuf, u64)> {
        self.writer
            .flush()
            .with_context(|| format!("cannot write {}", self.path.display()))?;
        Ok((self.path, self.written))
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
    let mut rejects = args.rejects.clone().map(RejectsFile::create).transpose()?;
    let read = Arc::new(AtomicU64::new(0));
    let (tx, rx) = std::sync::mpsc::sync_channel(2);
    let reading = Reading {
        input: input.clone(),
        format: args.format,
        encoding: args.encoding,
        sheet: args.sheet.clone(),
        map: args.map.clone(),
        profile: !args.no_profile,
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
    let mut rejects_header_written = false;
    while let Some(message) = next(&rx).await? {
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
                if let Some(rejects) = &mut rejects {
                    rejects.header(columns.headers())?;
                    rejects_header_written = true;
                }
                continue;
            }
            Message::Rows(rows) => {
                bar.set_length(rows);
                bar.set_style(
                    ProgressStyle::with_template(
                        "{spinner} [{elapsed_precise}] [{bar:40}] row {pos}/{len} {msg}",
                    )?
                    .progress_chars("=> "),
                );
                continue;
            }
            Message::Stop(stop) => {
                bar.abandon();
                return Err(stopped(stop, &tally));
            }
            Message::Chunk(chunk) => chunk,
        };
        if let Some(rejects) = &mut rejects {
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
            if let Some(rejects) = &mut rejects {
                rejects.write(r)?;
            }
        }
        bar.set_position(chunk.position);
        let rate = tally.committed() as f64 / started.elapsed().as_secs_f64();
        bar.set_message(format!("{} records, {rate:.0}/s", tally.committed()));
    }
    bar.finish_and_clear();
    let elapsed = started.elapsed().as_secs_f64();
    let done = tally.committed();
    if !super::json(false) {
        xarchive::outln!(
            "imported {done} records ({} created, {} replaced) in {elapsed:.2} s: {:.0} records/s",
            tally.created,
            tally.replaced,
            done as f64 / elapsed.max(1e-9)
        );
    }
    let written = rejects.map(RejectsFile::finish).transpose()?;
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
    if tally.rejected == 0 {
        return Ok(ExitCode::SUCCESS);
    }
    xarchive::outln!("{} lines rejected:", tally.rejected);
    for line in &tally.shown {
        xarchive::outln!("  {line}");
    }
    if tally.rejected as usize > tally.shown.len() {
        xarchive::outln!(
            "  … and {} more",
            tally.rejected as usize - tally.shown.len()
        );
    }
    if let Some((path, n)) = written {
        xarchive::outln!("{n} rejected lines written to {}", path.display());
    }
    Ok(ExitCode::FAILURE)
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
