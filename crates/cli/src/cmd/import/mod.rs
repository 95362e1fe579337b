//! `xarchive import FILE`: CSV (with a header) or NDJSON, streamed to a
//! domain's `_bulk` endpoint in chunks, with a progress bar.
//!
//! A reader thread parses the next chunk while the previous one is being
//! committed, and chunks are sent one at a time so that a later line for
//! an ID always wins over an earlier one, as in the file.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{Map, Value};

use super::ServerArgs;

#[derive(clap::Args)]
pub struct ImportArgs {
    /// The file to import.
    file: PathBuf,
    /// `csv` (header with `id`, `title`, optional `metadata` JSON and
    /// `content` base64, and `key:TYPE` columns for keys, such as
    /// `key:id_card`; other columns become metadata), `ndjson` (one
    /// record per line: {"id","title","metadata","content","keys"}), or
    /// `auto` (by extension, else by the first byte).
    #[arg(long, default_value = "auto")]
    format: String,
    /// Records per request.
    #[arg(long, default_value_t = 20_000)]
    chunk: usize,
    #[command(flatten)]
    server: ServerArgs,
}

/// One request's worth of NDJSON, and where its lines came from.
struct Chunk {
    body: Vec<u8>,
    /// File line of each body line.
    lines: Vec<u64>,
    /// Bytes of the file read up to the end of this chunk.
    offset: u64,
}

#[derive(Clone, Copy, PartialEq)]
enum Format {
    Csv,
    Ndjson,
}

fn detect(path: &Path, format: &str) -> anyhow::Result<Format> {
    match format {
        "csv" => return Ok(Format::Csv),
        "ndjson" | "jsonl" => return Ok(Format::Ndjson),
        "auto" => {}
        other => bail!("unknown --format {other:?} (csv, ndjson or auto)"),
    }
    match path.extension().and_then(|e| e.to_str()) {
        Some("csv") => return Ok(Format::Csv),
        Some("ndjson" | "jsonl" | "json") => return Ok(Format::Ndjson),
        _ => {}
    }
    let mut first = [0u8; 64];
    let n = File::open(path)?.read(&mut first)?;
    let starts_with_brace = first[..n].iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
    Ok(if starts_with_brace {
        Format::Ndjson
    } else {
        Format::Csv
    })
}

/// Counts bytes read, so progress follows the file rather than records.
struct Counted<R> {
    inner: R,
    read: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read
            .fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
        Ok(n)
    }
}

/// Reads `path` into chunks of `size` records, sending each on `tx`.
fn produce(
    path: &Path,
    format: Format,
    size: usize,
    tx: std::sync::mpsc::SyncSender<anyhow::Result<Chunk>>,
) {
    let result = (|| -> anyhow::Result<()> {
        let read = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let file = Counted {
            inner: File::open(path).with_context(|| format!("cannot open {}", path.display()))?,
            read: read.clone(),
        };
        let offset = || read.load(std::sync::atomic::Ordering::Relaxed);
        let mut chunk = Chunk {
            body: Vec::new(),
            lines: Vec::new(),
            offset: 0,
        };
        let emit = |chunk: &mut Chunk, offset: u64| -> bool {
            chunk.offset = offset;
            let full = std::mem::replace(
                chunk,
                Chunk {
                    body: Vec::new(),
                    lines: Vec::new(),
                    offset: 0,
                },
            );
            tx.send(Ok(full)).is_ok()
        };
        match format {
            Format::Ndjson => {
                let mut reader = BufReader::with_capacity(1 << 20, file);
                let mut line = Vec::new();
                let mut number = 0u64;
                loop {
                    line.clear();
                    if reader.read_until(b'\n', &mut line)? == 0 {
                        break;
                    }
                    number += 1;
                    if line.iter().all(u8::is_ascii_whitespace) {
                        continue;
                    }
                    chunk.body.extend_from_slice(&line);
                    if line.last() != Some(&b'\n') {
                        chunk.body.push(b'\n');
                    }
                    chunk.lines.push(number);
                    if chunk.lines.len() == size && !emit(&mut chunk, offset()) {
                        return Ok(());
                    }
                }
            }
            Format::Csv => {
                let mut reader = csv::ReaderBuilder::new().flexible(false).from_reader(file);
                let headers = reader
                    .headers()
                    .context("cannot read the CSV header")?
                    .clone();
                let column = |name: &str| headers.iter().position(|h| h.trim() == name);
                let id_col = column("id").context("the CSV header has no `id` column")?;
                let title_col = column("title").context("the CSV header has no `title` column")?;
                let (metadata_col, content_col) = (column("metadata"), column("content"));
                let mut row = csv::StringRecord::new();
                while reader.read_record(&mut row).context("malformed CSV")? {
                    let number = row.position().map_or(0, |p| p.line());
                    let (mut metadata, mut keys) = (Map::new(), Map::new());
                    if let Some(text) = metadata_col
                        .and_then(|c| row.get(c))
                        .filter(|t| !t.is_empty())
                    {
                        match serde_json::from_str(text) {
                            Ok(Value::Object(m)) => metadata = m,
                            _ => bail!("line {number}: the metadata column is not a JSON object"),
                        }
                    }
                    for (i, value) in row.iter().enumerate() {
                        if i == id_col
                            || i == title_col
                            || Some(i) == metadata_col
                            || Some(i) == content_col
                        {
                            continue;
                        }
                        let header = headers[i].trim();
                        match header.strip_prefix("key:") {
                            // An empty cell: the record has no such key.
                            Some(_) if value.is_empty() => {}
                            Some(key_type) => {
                                keys.insert(key_type.to_owned(), value.into());
                            }
                            None => {
                                metadata.insert(header.to_owned(), value.into());
                            }
                        }
                    }
                    let mut record = Map::new();
                    record.insert("id".into(), row.get(id_col).unwrap_or_default().into());
                    record.insert(
                        "title".into(),
                        row.get(title_col).unwrap_or_default().into(),
                    );
                    record.insert("metadata".into(), Value::Object(metadata));
                    if !keys.is_empty() {
                        record.insert("keys".into(), Value::Object(keys));
                    }
                    if let Some(c) = content_col
                        .and_then(|c| row.get(c))
                        .filter(|c| !c.is_empty())
                    {
                        record.insert("content".into(), c.into());
                    }
                    serde_json::to_writer(&mut chunk.body, &Value::Object(record))?;
                    chunk.body.push(b'\n');
                    chunk.lines.push(number);
                    if chunk.lines.len() == size && !emit(&mut chunk, offset()) {
                        return Ok(());
                    }
                }
            }
        }
        if !chunk.lines.is_empty() {
            emit(&mut chunk, offset());
        }
        Ok(())
    })();
    if let Err(e) = result {
        let _ = tx.send(Err(e));
    }
}

pub async fn run(args: ImportArgs) -> anyhow::Result<ExitCode> {
    let client = args.server.client()?;
    let format = detect(&args.file, &args.format)?;
    let total = std::fs::metadata(&args.file)
        .with_context(|| format!("cannot read {}", args.file.display()))?
        .len();
    anyhow::ensure!(args.chunk > 0, "--chunk must be positive");
    let (tx, rx) = std::sync::mpsc::sync_channel(2);
    let path = args.file.clone();
    let chunk = args.chunk;
    std::thread::spawn(move || produce(&path, format, chunk, tx));
    let rx = std::sync::Arc::new(std::sync::Mutex::new(rx));

    let bar = ProgressBar::new(total).with_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] [{bar:40}] {bytes}/{total_bytes} {msg}",
        )?
        .progress_chars("=> "),
    );
    let started = Instant::now();
    let (mut created, mut replaced, mut failed) = (0u64, 0u64, 0u64);
    let mut failures: Vec<String> = Vec::new();
    loop {
        let next = {
            let rx = rx.clone();
            tokio::task::spawn_blocking(move || rx.lock().ok().and_then(|rx| rx.recv().ok()))
                .await?
        };
        let Some(chunk) = next else { break };
        let chunk = chunk?;
        let report = match client.bulk(chunk.body).await {
            Ok(report) => report,
            Err(e) => {
                bar.abandon();
                bail!(
                    "import stopped after {} acknowledged records: {e}",
                    created + replaced
                );
            }
        };
        created += report.summary.created as u64;
        replaced += report.summary.replaced as u64;
        failed += report.summary.failed as u64;
        for result in report.results.iter().filter(|r| r.status >= 400) {
            if failures.len() < 10 {
                let line = chunk
                    .lines
                    .get(result.line.saturating_sub(1))
                    .copied()
                    .unwrap_or(0);
                failures.push(format!(
                    "line {line}: {}: {}",
                    result.code.as_deref().unwrap_or("?"),
                    result.message.as_deref().unwrap_or("")
                ));
            }
        }
        bar.set_position(chunk.offset);
        let rate = (created + replaced) as f64 / started.elapsed().as_secs_f64();
        bar.set_message(format!("{} records, {rate:.0}/s", created + replaced));
    }
    bar.finish_and_clear();
    let elapsed = started.elapsed().as_secs_f64();
    let done = created + replaced;
    println!(
        "imported {done} records ({created} created, {replaced} replaced) in {elapsed:.2} s: {:.0} records/s",
        done as f64 / elapsed.max(1e-9)
    );
    if failed > 0 {
        println!("{failed} lines failed:");
        for f in &failures {
            println!("  {f}");
        }
        if failed as usize > failures.len() {
            println!("  … and {} more", failed as usize - failures.len());
        }
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}
