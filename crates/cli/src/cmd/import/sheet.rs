//! The rows of a spreadsheet (.xlsx, .xlsm, .xlsb, .xls, .ods, through
//! calamine), read in bounded memory whatever the file claims or expands
//! to: the first sheet or the one named, each cell as the sheet shows it
//! (whole numbers without a decimal point, dates as `YYYY-MM-DD`), each row
//! with its number in the sheet.
//!
//! A workbook is a zip of XML or a compound file that a few kilobytes can
//! make claim, or expand to, gigabytes: a dimension of A1:XFD1048576, a
//! shared-strings part of 1.5 GB, one string repeated in every cell. Two
//! bounds hold whatever the file holds:
//!
//! - .xlsx and .xlsb are read a cell at a time (calamine's cell readers),
//!   never as the rectangle a sheet declares or its cells span: only the
//!   rows and cells really present are made, a row at a time, and a row,
//!   a cell, the rows and the columns past what a spreadsheet can hold
//!   (Excel's limits: 1,048,576 rows, 16,384 columns, 32,767 characters a
//!   cell) stop the import with that said;
//! - what calamine must read whole (the shared strings, the styles; an
//!   .xls or .ods sheet) is read in a child process of this binary whose
//!   memory the kernel bounds (`RLIMIT_DATA`, [`SHEET_MEMORY_MIB`] by
//!   default): a parser cannot be bounded from inside it (in Rust an
//!   allocation that fails aborts the process), and the child's death is
//!   told as what it is, a workbook that needs more memory than allowed.
//!
//! The child writes its rows as JSON lines on its standard output
//! ([`Frame`]); the parent reads them as it would a CSV's.

use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, ExitCode, Stdio};

use calamine::{Data, DataRef, Reader};
use nix::libc::{SIGABRT, SIGKILL};
use serde::{Deserialize, Serialize};

use super::columns::Cell;
use super::source::Stop;

/// A row of a table and its line (row) number in the input.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Row {
    pub line: u64,
    pub cells: Vec<Cell>,
}

/// Excel's own limits: no spreadsheet program writes more.
pub const MAX_ROWS: u32 = 1_048_576;
pub const MAX_COLUMNS: u32 = 16_384;
pub const MAX_CELL_CHARS: usize = 32_767;
/// The most text one row may hold: far beyond any catalogue's line (a
/// title is at most 4 KiB), far below what would strain memory.
pub const MAX_ROW_BYTES: usize = 4 << 20;
/// The reader's memory, by default (`--sheet-memory`).
pub const SHEET_MEMORY_MIB: u64 = 128;

/// The hidden command the import runs its reader as.
pub const CHILD_COMMAND: &str = "__sheet-rows";

/// What the reader child writes, one a line.
#[derive(Debug, Serialize, Deserialize)]
enum Frame {
    Row(Row),
    /// The sheet cannot be read on: why (never a cell's text).
    Stop(String),
    /// Every row was written.
    End,
}

/// `xarchive __sheet-rows`: the reader child. Not for people.
#[derive(clap::Args)]
pub struct SheetRowsArgs {
    /// The workbook.
    path: PathBuf,
    /// The sheet to read (default: the first).
    #[arg(long)]
    sheet: Option<String>,
    /// The input as messages name it.
    #[arg(long)]
    name: String,
    /// The memory the reader may take, in MiB.
    #[arg(long)]
    memory_mib: u64,
}

/// The reader child's whole life: bound its own memory, read, write
/// frames. Runs without the async runtime (no threads, no arenas).
pub fn child_main(args: &SheetRowsArgs) -> ExitCode {
    let bytes = args.memory_mib.saturating_mul(1 << 20);
    if let Err(e) =
        nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_DATA, bytes, bytes)
    {
        xarchive::errln!("cannot bound the spreadsheet reader's memory: {e}");
        return ExitCode::FAILURE;
    }
    let mut out = BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    let mut send = |frame: &Frame| -> bool {
        serde_json::to_writer(&mut out, frame).is_ok() && out.write_all(b"\n").is_ok()
    };
    let last = match read_rows(&args.path, args.sheet.as_deref(), &args.name, &mut |row| {
        send(&Frame::Row(row))
    }) {
        Ok(()) => Frame::End,
        Err(stop) => Frame::Stop(stop),
    };
    if !send(&last) || out.flush().is_err() {
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

/// Reads the rows of `path`'s sheet, giving each to `emit` (false: stop
/// reading); or why it cannot.
fn read_rows(
    path: &Path,
    sheet: Option<&str>,
    input: &str,
    emit: &mut dyn FnMut(Row) -> bool,
) -> Result<(), String> {
    let open = || {
        std::fs::File::open(path)
            .map(|f| BufReader::with_capacity(1 << 16, f))
            .map_err(|e| format!("cannot open {input}: {e}"))
    };
    let unreadable =
        |e: &dyn std::fmt::Display| format!("cannot read {input} as a spreadsheet: {e}");
    let mut magic = [0u8; 4];
    open()?
        .read_exact(&mut magic)
        .map_err(|_| unreadable(&"it is too short"))?;
    if magic == *b"PK\x03\x04" {
        // .xlsx, .xlsm; else .xlsb; else .ods: all zips. What is said of
        // one that none reads is why it is not an .xlsx, by far the most
        // common.
        let not_xlsx = match calamine::Xlsx::new(open()?) {
            Ok(mut xlsx) => {
                let name = chosen_sheet(xlsx.sheet_names(), sheet, input)?;
                let mut cells = xlsx
                    .worksheet_cells_reader(&name)
                    .map_err(|e| sheet_error(&name, input, &e))?;
                return stream(
                    &mut || cells.next_cell().map_err(|e| sheet_error(&name, input, &e)),
                    emit,
                );
            }
            Err(e) => e,
        };
        if let Ok(mut xlsb) = calamine::Xlsb::new(open()?) {
            let name = chosen_sheet(xlsb.sheet_names(), sheet, input)?;
            let mut cells = xlsb
                .worksheet_cells_reader(&name)
                .map_err(|e| sheet_error(&name, input, &e))?;
            return stream(
                &mut || cells.next_cell().map_err(|e| sheet_error(&name, input, &e)),
                emit,
            );
        }
        let mut ods = calamine::Ods::new(open()?).map_err(|_| unreadable(&not_xlsx))?;
        let name = chosen_sheet(ods.sheet_names(), sheet, input)?;
        let range = ods
            .worksheet_range(&name)
            .map_err(|e| sheet_error(&name, input, &e))?;
        return whole(&range, emit);
    }
    let mut xls = calamine::Xls::new(open()?).map_err(|e| unreadable(&e))?;
    let name = chosen_sheet(xls.sheet_names(), sheet, input)?;
    let range = xls
        .worksheet_range(&name)
        .map_err(|e| sheet_error(&name, input, &e))?;
    whole(&range, emit)
}

fn sheet_error(name: &str, input: &str, e: &dyn std::fmt::Display) -> String {
    format!("cannot read sheet {name:?} of {input}: {e}")
}

/// The sheet named, else the first.
fn chosen_sheet(names: Vec<String>, wanted: Option<&str>, input: &str) -> Result<String, String> {
    match wanted {
        Some(wanted) => names
            .iter()
            .find(|n| n.as_str() == wanted)
            .cloned()
            .ok_or_else(|| {
                format!(
                    "{input} has no sheet {wanted:?} (it has: {})",
                    names.join(", ")
                )
            }),
        None => names
            .first()
            .cloned()
            .ok_or_else(|| format!("{input} has no sheets")),
    }
}

/// A row being put together from its cells, with what it holds so far.
struct Building {
    row: u32,
    cells: Vec<Cell>,
    bytes: usize,
}

impl Building {
    fn new(row: u32) -> Building {
        Building {
            row,
            cells: Vec::new(),
            bytes: 0,
        }
    }

    /// Puts `data` at `column`, within Excel's limits and the row's.
    fn put(&mut self, column: u32, data: Data) -> Result<(), String> {
        let (row, line) = (self.row, u64::from(self.row) + 1);
        if row >= MAX_ROWS {
            return Err(format!(
                "row {line} is past the last row a spreadsheet has ({MAX_ROWS}): the file was not written by a spreadsheet program"
            ));
        }
        if column >= MAX_COLUMNS {
            return Err(format!(
                "row {line} has a cell in column {}, past the last a spreadsheet has ({MAX_COLUMNS}, XFD): the file was not written by a spreadsheet program",
                u64::from(column) + 1
            ));
        }
        let cell = cell(&data);
        let text = cell.text();
        if text.len() > MAX_CELL_CHARS && text.chars().count() > MAX_CELL_CHARS {
            return Err(format!(
                "row {line}, column {} holds more than {MAX_CELL_CHARS} characters, more than a spreadsheet cell holds: the file was not written by a spreadsheet program",
                u64::from(column) + 1
            ));
        }
        self.bytes += text.len();
        if self.bytes > MAX_ROW_BYTES {
            return Err(format!(
                "row {line} holds more than {} MiB of text, more than any line of a catalogue",
                MAX_ROW_BYTES >> 20
            ));
        }
        let at = column as usize;
        if self.cells.len() <= at {
            self.cells.resize(at + 1, Cell::Text(String::new()));
        }
        self.cells[at] = cell;
        Ok(())
    }

    fn done(self) -> Row {
        Row {
            line: u64::from(self.row) + 1,
            cells: self.cells,
        }
    }
}

/// A sheet read a cell at a time, in the order the file holds them (rows
/// in order, as every spreadsheet program writes them): a row is given
/// once a cell of another row comes.
fn stream<'a>(
    next: &mut dyn FnMut() -> Result<Option<calamine::Cell<DataRef<'a>>>, String>,
    emit: &mut dyn FnMut(Row) -> bool,
) -> Result<(), String> {
    let mut building: Option<Building> = None;
    while let Some(found) = next()? {
        let (row, column) = found.get_position();
        let data = Data::from(found.get_value().clone());
        if data == Data::Empty {
            continue;
        }
        if building.as_ref().is_some_and(|b| b.row != row) {
            if let Some(done) = building.take() {
                if !emit(done.done()) {
                    return Ok(());
                }
            }
        }
        building
            .get_or_insert_with(|| Building::new(row))
            .put(column, data)?;
    }
    if let Some(done) = building {
        emit(done.done());
    }
    Ok(())
}

/// A sheet calamine read whole (.xls, .ods), a row at a time.
fn whole(range: &calamine::Range<Data>, emit: &mut dyn FnMut(Row) -> bool) -> Result<(), String> {
    let (first_row, first_column) = range.start().unwrap_or((0, 0));
    for (i, cells) in range.rows().enumerate() {
        let mut row = Building::new(first_row.saturating_add(u32::try_from(i).unwrap_or(u32::MAX)));
        for (j, data) in cells.iter().enumerate() {
            if *data != Data::Empty {
                row.put(
                    first_column.saturating_add(u32::try_from(j).unwrap_or(u32::MAX)),
                    data.clone(),
                )?;
            }
        }
        if !row.cells.is_empty() && !emit(row.done()) {
            return Ok(());
        }
    }
    Ok(())
}

/// Largest magnitude whose every whole number a spreadsheet holds exactly
/// as typed: 15 significant digits.
const EXACT_DIGITS_LIMIT: f64 = 1e15;

/// A cell as the sheet shows it.
pub fn cell(data: &Data) -> Cell {
    match data {
        Data::Empty => Cell::Text(String::new()),
        Data::String(s) | Data::DateTimeIso(s) | Data::DurationIso(s) => Cell::Text(s.clone()),
        Data::Int(i) => Cell::Text(i.to_string()),
        Data::Float(f) if f.fract() == 0.0 && f.abs() < EXACT_DIGITS_LIMIT => {
            // Whole and below 10^15: exact in an i64.
            #[allow(clippy::cast_possible_truncation)]
            let whole = *f as i64;
            Cell::Text(format!("{whole}"))
        }
        Data::Float(f) if f.fract() == 0.0 && f.is_finite() => Cell::LongNumber(format!("{f:.0}")),
        Data::Float(f) => Cell::Text(f.to_string()),
        Data::Bool(b) => Cell::Text(if *b { "TRUE" } else { "FALSE" }.to_owned()),
        Data::DateTime(dt) if dt.is_datetime() => {
            let (y, mo, d, h, mi, s, ms) = dt.to_ymd_hms_milli();
            Cell::Text(if (h, mi, s, ms) == (0, 0, 0, 0) {
                format!("{y:04}-{mo:02}-{d:02}")
            } else {
                format!("{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02}")
            })
        }
        Data::DateTime(dt) => Cell::Text(dt.to_string()),
        Data::Error(e) => Cell::SpreadsheetError(e.to_string()),
    }
}

/// The rows of a spreadsheet, from the reader child.
pub struct SheetRows {
    child: Child,
    out: BufReader<ChildStdout>,
    /// The child's standard error, kept (the first 64 KiB) to tell why it
    /// died.
    said: Option<std::thread::JoinHandle<Vec<u8>>>,
    input: String,
    memory_mib: u64,
    line: String,
    ended: bool,
    /// Keeps a spooled standard input until the child is done with it.
    _spooled: Option<tempfile::NamedTempFile>,
}

impl SheetRows {
    /// Starts the reader child on `path` (standard input is first written
    /// to an owner-only temporary file: a workbook is read by seeking).
    pub fn start(
        path: Option<&Path>,
        stdin: Option<Box<dyn Read + Send>>,
        sheet: Option<&str>,
        input: &str,
        memory_mib: u64,
    ) -> Result<SheetRows, Stop> {
        let spooled = match stdin {
            Some(mut reader) => {
                let mut file = tempfile::NamedTempFile::new().map_err(|source| Stop::Read {
                    input: input.to_owned(),
                    source,
                })?;
                crate::cmd::private_file::owner_only(file.as_file())
                    .and_then(|()| std::io::copy(&mut reader, &mut file).map(|_| ()))
                    .map_err(|source| Stop::Read {
                        input: input.to_owned(),
                        source,
                    })?;
                Some(file)
            }
            None => None,
        };
        let path = match (&spooled, path) {
            (Some(file), _) => file.path().to_owned(),
            (None, Some(path)) => path.to_owned(),
            (None, None) => {
                return Err(Stop::Spreadsheet(format!("{input}: nothing to read")));
            }
        };
        let exe = std::env::current_exe().map_err(|source| Stop::Read {
            input: input.to_owned(),
            source,
        })?;
        let mut command = Command::new(exe);
        command
            .arg(CHILD_COMMAND)
            .arg(&path)
            .arg("--name")
            .arg(input)
            .arg("--memory-mib")
            .arg(memory_mib.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(sheet) = sheet {
            command.arg("--sheet").arg(sheet);
        }
        let mut child = command.spawn().map_err(|source| Stop::Read {
            input: input.to_owned(),
            source,
        })?;
        let (Some(out), Some(mut err)) = (child.stdout.take(), child.stderr.take()) else {
            return Err(Stop::Spreadsheet(format!(
                "cannot read {input}: the reader has no output"
            )));
        };
        let said = std::thread::spawn(move || {
            let mut kept = Vec::new();
            let _ = (&mut err).take(64 << 10).read_to_end(&mut kept);
            // The rest is read and dropped, so the child never blocks.
            let _ = std::io::copy(&mut err, &mut std::io::sink());
            kept
        });
        Ok(SheetRows {
            child,
            out: BufReader::with_capacity(1 << 16, out),
            said: Some(said),
            input: input.to_owned(),
            memory_mib,
            line: String::new(),
            ended: false,
            _spooled: spooled,
        })
    }

    /// Why the child stopped without a last frame.
    fn died(&mut self) -> Stop {
        let status = self.child.wait();
        let said = self
            .said
            .take()
            .and_then(|said| said.join().ok())
            .unwrap_or_default();
        let said = String::from_utf8_lossy(&said);
        let input = &self.input;
        let memory = self.memory_mib;
        let out_of_memory = said.contains("memory allocation of")
            || status
                .as_ref()
                .is_ok_and(|s| s.signal().is_some_and(|n| n == SIGABRT || n == SIGKILL));
        if out_of_memory {
            return Stop::Spreadsheet(format!(
                "{input} needs more than {memory} MiB of memory to read: a workbook whose few bytes expand to far more (a shared string repeated, a part of gigabytes) is refused, whatever it claims. If it is a real catalogue, save it as CSV (UTF-8) and import that, or give --sheet-memory more"
            ));
        }
        let why = said.trim();
        Stop::Spreadsheet(format!(
            "cannot read {input}: the spreadsheet reader stopped ({}){}",
            status.map_or_else(|e| e.to_string(), |s| s.to_string()),
            if why.is_empty() {
                String::new()
            } else {
                format!(": {why}")
            }
        ))
    }
}

impl Iterator for SheetRows {
    type Item = Result<Row, Stop>;

    fn next(&mut self) -> Option<Result<Row, Stop>> {
        if self.ended {
            return None;
        }
        self.line.clear();
        let frame = match self.out.read_line(&mut self.line) {
            Ok(0) | Err(_) => None,
            Ok(_) => serde_json::from_str::<Frame>(&self.line).ok(),
        };
        match frame {
            Some(Frame::Row(row)) => Some(Ok(row)),
            Some(Frame::End) => {
                self.ended = true;
                let _ = self.child.wait();
                None
            }
            Some(Frame::Stop(why)) => {
                self.ended = true;
                let _ = self.child.wait();
                Some(Err(Stop::Spreadsheet(why)))
            }
            None => {
                self.ended = true;
                Some(Err(self.died()))
            }
        }
    }
}

impl Drop for SheetRows {
    fn drop(&mut self) {
        if !self.ended {
            // Read no further: the import stopped (a failed request).
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use calamine::{ExcelDateTime, ExcelDateTimeType};

    #[test]
    fn cells_read_as_the_sheet_shows_them() {
        let text = |s: &str| Cell::Text(s.to_owned());
        assert_eq!(cell(&Data::Float(2024.0)), text("2024"));
        assert_eq!(cell(&Data::Float(12.5)), text("12.5"));
        assert_eq!(cell(&Data::Int(7)), text("7"));
        assert_eq!(
            cell(&Data::Float(110105491231002.0)),
            text("110105491231002")
        );
        assert_eq!(
            cell(&Data::Float(110105194912310000.0)),
            Cell::LongNumber("110105194912310000".into())
        );
        let date = ExcelDateTime::new(45356.0, ExcelDateTimeType::DateTime, false);
        assert_eq!(cell(&Data::DateTime(date)), text("2024-03-05"));
        let noon = ExcelDateTime::new(45356.5, ExcelDateTimeType::DateTime, false);
        assert_eq!(cell(&Data::DateTime(noon)), text("2024-03-05 12:00:00"));
        assert_eq!(cell(&Data::Empty), text(""));
        assert!(matches!(
            cell(&Data::Error(calamine::CellErrorType::Ref)),
            Cell::SpreadsheetError(_)
        ));
    }

    #[test]
    fn rows_past_what_a_spreadsheet_holds_are_refused_saying_so() {
        let text = || Data::String("x".into());
        let mut row = Building::new(MAX_ROWS - 1);
        row.put(MAX_COLUMNS - 1, text()).expect("the last cell");
        assert_eq!(row.cells.len(), MAX_COLUMNS as usize);
        let e = Building::new(MAX_ROWS).put(0, text()).unwrap_err();
        assert!(e.contains("row 1048577 is past the last row"), "{e}");
        let e = Building::new(0).put(MAX_COLUMNS, text()).unwrap_err();
        assert!(e.contains("column 16385"), "{e}");
        let long = Data::String("档".repeat(MAX_CELL_CHARS + 1));
        let e = Building::new(4).put(1, long).unwrap_err();
        assert!(e.contains("row 5, column 2 holds more than 32767"), "{e}");
        assert!(!e.contains('档'), "{e}");
        Building::new(4)
            .put(1, Data::String("档".repeat(MAX_CELL_CHARS)))
            .expect("a full cell");
        let mut wide = Building::new(0);
        let full = || Data::String("a".repeat(MAX_CELL_CHARS));
        let e = (0..200)
            .find_map(|c| wide.put(c, full()).err())
            .expect("refused once past the row's bound");
        assert!(e.contains("more than 4 MiB"), "{e}");
    }
}
