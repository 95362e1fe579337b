//! The rows of a spreadsheet (.xlsx; .xls and .ods through the same
//! library, calamine): the first sheet or the one named, each cell as the
//! sheet shows it (whole numbers without a decimal point, dates as
//! `YYYY-MM-DD`), each row with its number in the sheet.

use std::io::Cursor;

use calamine::{Data, Reader, Xlsx};

use super::columns::Cell;
use super::source::Stop;

/// A row of a table and its line (row) number in the input.
#[derive(Clone, Debug)]
pub struct Row {
    pub line: u64,
    pub cells: Vec<Cell>,
}

/// The rows of sheet `sheet` (else the first) of the workbook in `bytes`.
pub fn rows(bytes: Vec<u8>, sheet: Option<&str>, input: &str) -> Result<Vec<Row>, Stop> {
    let unreadable = |e: calamine::Error| {
        Stop::Spreadsheet(format!("cannot read {input} as a spreadsheet: {e}"))
    };
    let mut workbook = if bytes.starts_with(b"PK\x03\x04") {
        match Xlsx::new(Cursor::new(bytes.clone())) {
            Ok(xlsx) => calamine::Sheets::Xlsx(xlsx),
            Err(_) => {
                calamine::open_workbook_auto_from_rs(Cursor::new(bytes)).map_err(unreadable)?
            }
        }
    } else {
        calamine::open_workbook_auto_from_rs(Cursor::new(bytes)).map_err(unreadable)?
    };
    let names = workbook.sheet_names();
    let name = match sheet {
        Some(wanted) => names
            .iter()
            .find(|n| n.as_str() == wanted)
            .cloned()
            .ok_or_else(|| {
                Stop::Spreadsheet(format!(
                    "{input} has no sheet {wanted:?} (it has: {})",
                    names.join(", ")
                ))
            })?,
        None => names
            .first()
            .cloned()
            .ok_or_else(|| Stop::Spreadsheet(format!("{input} has no sheets")))?,
    };
    let range = workbook
        .worksheet_range(&name)
        .map_err(|e| Stop::Spreadsheet(format!("cannot read sheet {name:?} of {input}: {e}")))?;
    let first_row = range.start().map_or(0, |(row, _)| u64::from(row));
    Ok(range
        .rows()
        .enumerate()
        .map(|(i, cells)| Row {
            line: first_row + i as u64 + 1,
            cells: cells.iter().map(cell).collect(),
        })
        .collect())
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
            Cell::Text(format!("{}", *f as i64))
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
}
